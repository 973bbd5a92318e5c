"""Host descriptions: the machine that feeds the GPU, as the file states it.

The input pipeline (simulator/feed/) turns these figures into service times; nothing here
simulates anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from simulator import resources
from simulator.config.loader import content_digest, load
from simulator.errors import InputError
from simulator.units import BITS_PER_BYTE, GB, GiB

# PCIe: transfer rate per lane (GT/s) and line-code efficiency by generation (PCI-SIG base
# specifications 1.0-6.0; 6.0's FLIT mode is counted at 242/256)
PCIE_GT_PER_S = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
PCIE_ENCODING = {1: 8 / 10, 2: 8 / 10, 3: 128 / 130, 4: 128 / 130, 5: 128 / 130, 6: 242 / 256}
# Host-to-device copies reach about 80 % of the raw rate from pinned memory (cudaMemcpy
# bandwidthTest on PCIe 3.0 x16: 12-13 GB/s of 15.75) and about half of it from pageable
# memory, which the driver copies through a pinned staging buffer first
PINNED_SHARE = 0.8
PAGEABLE_SHARE = 0.5
DEFAULT_OUTSTANDING = 64  # network requests a file-system client keeps in flight


@dataclass(frozen=True)
class Cpu:
    model: str
    cores: int
    jpeg_megapixels_per_s: float   # one core, decode + training augmentation
    copy_GBps: float               # one core, memcpy (1e9 B/s)
    decompress_MBps: float         # one core, general-purpose codec output (1e6 B/s)


@dataclass(frozen=True)
class Disk:
    """One kind of disk, `devices` of them striped together (RAID 0)."""

    kind: str
    model: str
    devices: int
    sequential_read_MBps: float    # one disk
    random_read_iops: float        # one disk, at queue_depth
    queue_depth: int
    latency_us: float              # one read alone

    def iops_at(self, outstanding: int) -> float:
        """Reads per second one disk completes with `outstanding` in flight: each takes its
        latency alone until the rated IOPS caps them (Little's law, a disk that overlaps
        requests fully up to its queue depth)."""
        q = max(1, min(outstanding, self.queue_depth))
        return min(q / (self.latency_us * 1e-6), self.random_read_iops)


@dataclass(frozen=True)
class Network:
    kind: str
    client_bandwidth_Gbps: float
    latency_us: float
    max_outstanding: int
    nodes: int
    node_bandwidth_Gbps: float
    node_storage: Disk
    stripe_count: int
    stripe_bytes: int


@dataclass(frozen=True)
class Pcie:
    generation: int
    lanes: int
    pinned_share: float = PINNED_SHARE
    pageable_share: float = PAGEABLE_SHARE

    @property
    def raw_GBps(self) -> float:
        """The link's payload rate before protocol overhead, GB/s (1e9 B/s) per direction."""
        gen = self.generation
        return PCIE_GT_PER_S[gen] * PCIE_ENCODING[gen] * self.lanes / BITS_PER_BYTE

    def copy_GBps(self, pinned: bool) -> float:
        return self.raw_GBps * (self.pinned_share if pinned else self.pageable_share)

    def copy_s(self, nbytes: float, pinned: bool) -> float:
        """Seconds a host-to-device copy of `nbytes` takes from pinned or pageable memory."""
        return nbytes / (self.copy_GBps(pinned) * GB)


@dataclass(frozen=True)
class Host:
    name: str
    display_name: str
    description: str
    cpu: Cpu
    ram_bytes: int
    reserved_bytes: int
    storage: Disk | None           # local disks, or
    network: Network | None        # distributed storage
    pcie: Pcie
    sources: tuple[str, ...]
    path: str = ""
    content_digest: str = ""       # SHA-256 of the description as loaded

    @property
    def page_cache_bytes(self) -> int:
        """RAM left for the OS page cache once the OS and the training processes hold theirs."""
        return max(0, self.ram_bytes - self.reserved_bytes)

    @property
    def source_kind(self) -> str:
        """Where the dataset is read from, in words."""
        if self.network is not None:
            n = self.network
            return f"{n.kind} ({n.nodes} servers x {n.node_storage.devices} {n.node_storage.kind})"
        s = self.storage
        return f"{s.devices} x {s.kind} ({s.model})" if s.devices > 1 else \
            f"{s.kind} ({s.model})"


def _disk(raw: dict) -> Disk:
    return Disk(kind=raw["kind"], model=raw["model"], devices=raw.get("devices", 1),
                sequential_read_MBps=raw["sequential_read_MBps"],
                random_read_iops=raw["random_read_iops"], queue_depth=raw["queue_depth"],
                latency_us=raw["latency_us"])


def parse_host(raw: dict, file: str) -> Host:
    """A host from its checked JSON; the checks no schema can state."""
    mem = raw["memory"]
    if mem["reserved_GiB"] >= mem["ram_GiB"]:
        raise InputError(f"expected reserved_GiB below ram_GiB ({mem['ram_GiB']:g}), got "
                         f"{mem['reserved_GiB']:g}: no RAM would be left for the page cache "
                         "or the batches", file=file, path="$.memory.reserved_GiB")
    net = raw.get("network")
    network = None
    if net is not None:
        if net["stripe_count"] > net["nodes"]:
            raise InputError(f"expected stripe_count at most nodes ({net['nodes']}), got "
                             f"{net['stripe_count']}", file=file, path="$.network.stripe_count")
        network = Network(kind=net["kind"], client_bandwidth_Gbps=net["client_bandwidth_Gbps"],
                          latency_us=net["latency_us"],
                          max_outstanding=net.get("max_outstanding", DEFAULT_OUTSTANDING),
                          nodes=net["nodes"], node_bandwidth_Gbps=net["node_bandwidth_Gbps"],
                          node_storage=_disk(net["node_storage"]),
                          stripe_count=net["stripe_count"], stripe_bytes=net["stripe_bytes"])
    c, p = raw["cpu"], raw["pcie"]
    return Host(
        name=raw["name"], display_name=raw["display_name"],
        description=raw.get("description", ""),
        cpu=Cpu(model=c["model"], cores=c["cores"],
                jpeg_megapixels_per_s=c["jpeg_megapixels_per_s"], copy_GBps=c["copy_GBps"],
                decompress_MBps=c["decompress_MBps"]),
        ram_bytes=int(mem["ram_GiB"] * GiB), reserved_bytes=int(mem["reserved_GiB"] * GiB),
        storage=_disk(raw["storage"]) if "storage" in raw else None, network=network,
        pcie=Pcie(generation=p["generation"], lanes=p["lanes"],
                  pinned_share=p.get("pinned_share", PINNED_SHARE),
                  pageable_share=p.get("pageable_share", PAGEABLE_SHARE)),
        sources=tuple(raw["sources"]), path=file,
        content_digest=content_digest(raw))


def host_names() -> list[str]:
    return resources.shipped_names(resources.hosts_dir())


def load_host_raw(spec: str | Path) -> tuple[dict, str]:
    """A host file as checked JSON, and its path: shipped by name, or a path."""
    path = resources.resolve("hosts", str(spec))
    raw = load(path, "host")
    if path.name[:-5] != raw["name"] and path.parent == resources.hosts_dir():
        raise InputError(f"expected name '{path.name[:-5]}' (the file's name), got "
                         f"'{raw['name']}'", file=str(path), path="$.name")
    return raw, str(path)


def load_host(spec: str | Path | Host) -> Host:
    """A host by shipped name (`hosts list`) or path, checked against its schema; InputError
    names what is wrong."""
    if isinstance(spec, Host):
        return spec
    raw, path = load_host_raw(spec)
    return parse_host(raw, path)
