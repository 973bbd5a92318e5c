"""Where samples are read from, as simpy resources: local disks, or storage servers behind a
network. Each `read` is a process a loader worker waits on."""

from __future__ import annotations

from collections.abc import Generator

import simpy

from simulator.config.host import Disk, Host, Network
from simulator.units import BITS_PER_BYTE, GIGA, MB


def _link_s(nbytes: float, gbit_per_s: float) -> float:
    """Seconds `nbytes` take over a network link of `gbit_per_s` (1e9 bit/s)."""
    return nbytes * BITS_PER_BYTE / (gbit_per_s * GIGA)


class DiskArray:
    """`devices` disks striped together; a sample lives on one of them. A disk serves one
    read at a time, each for its access time at the queue it sees (1 / IOPS at that many
    outstanding: command queueing reorders a deeper queue into shorter seeks, up to the rated
    IOPS) plus its bytes at the sequential rate."""

    def __init__(self, env: simpy.Environment, disk: Disk):
        self.env, self.disk = env, disk
        self.disks = [simpy.Resource(env, capacity=1) for _ in range(disk.devices)]
        self.busy_s = 0.0  # disk-seconds, summed over the disks

    def read(self, key: int, nbytes: float, accesses: float = 1.0) -> Generator:
        """`accesses`: the share of a random access this read pays (a sequential read of part
        of a shard pays its part of the shard's one access)."""
        d = self.disks[key % self.disk.devices]
        with d.request() as req:
            yield req
            outstanding = 1 + len(d.queue)
            t = accesses / self.disk.iops_at(outstanding) \
                + nbytes / (self.disk.sequential_read_MBps * MB)
            self.busy_s += t
            yield self.env.timeout(t)

    def utilisation(self, elapsed_s: float) -> float:
        """The disks' busy share: 1 when every disk always has a read in service."""
        return self.busy_s / elapsed_s / self.disk.devices if elapsed_s > 0 else 0.0


class NetworkStore:
    """Storage servers behind the client's link: a request waits for one of the client's
    outstanding slots, pays the round trip, is read by the server holding its stripe (its disks,
    then its link) and crosses the client's link."""

    def __init__(self, env: simpy.Environment, net: Network):
        self.env, self.net = env, net
        self.outstanding = simpy.Resource(env, capacity=net.max_outstanding)
        self.client = simpy.Resource(env, capacity=1)
        self.servers = [DiskArray(env, net.node_storage) for _ in range(net.nodes)]
        self.server_links = [simpy.Resource(env, capacity=1) for _ in range(net.nodes)]
        self.client_busy_s = 0.0
        self.server_busy_s = [0.0] * net.nodes
        self.read_s = 0.0   # reads' time from request to last byte, summed
        self.disk_s = 0.0   # ... of which at the servers' disks

    @property
    def disk_share(self) -> float:
        """Of a read's time, the share spent at the servers' disks (the rest: the network)."""
        return self.disk_s / self.read_s if self.read_s else 0.0

    def _server_part(self, node: int, key: int, nbytes: float, accesses: float) -> Generator:
        start = self.env.now
        yield from self.servers[node].read(key, nbytes, accesses)
        self.disk_s += self.env.now - start
        with self.server_links[node].request() as req:
            yield req
            t = _link_s(nbytes, self.net.node_bandwidth_Gbps)
            self.server_busy_s[node] += t
            yield self.env.timeout(t)

    def read(self, key: int, nbytes: float, accesses: float = 1.0) -> Generator:
        net, start = self.net, self.env.now
        with self.outstanding.request() as req:
            yield req
            yield self.env.timeout(net.latency_us * 1e-6)
            stripes = max(1, min(net.stripe_count, -(-int(nbytes) // net.stripe_bytes)))
            first = key % net.nodes
            parts = [self.env.process(self._server_part((first + s) % net.nodes, key // net.nodes,
                                                        nbytes / stripes, accesses))
                     for s in range(stripes)]
            yield self.env.all_of(parts)
            with self.client.request() as creq:
                yield creq
                t = _link_s(nbytes, net.client_bandwidth_Gbps)
                self.client_busy_s += t
                yield self.env.timeout(t)
        self.read_s += self.env.now - start

    def utilisation(self, elapsed_s: float) -> dict[str, float]:
        """'storage': the busiest server's disks; 'network': the busier of the client's link
        and the busiest server's link."""
        if elapsed_s <= 0:
            return {"storage": 0.0, "network": 0.0}
        return {"storage": max(s.utilisation(elapsed_s) for s in self.servers),
                "network": max(self.client_busy_s, *self.server_busy_s) / elapsed_s}


def build(env: simpy.Environment, host: Host) -> DiskArray | NetworkStore:
    return NetworkStore(env, host.network) if host.network else DiskArray(env, host.storage)
