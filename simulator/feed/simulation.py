"""One stretch of training as simpy processes: loader workers read samples (from the page cache
or storage), decode them on the CPU's cores and collate batches; the training process pins each
batch and copies it over the host link; the GPU consumes one batch per step.

PyTorch DataLoader semantics: worker w builds batches w, w + W, w + 2W, ... one sample after
another (read, then decode); at most prefetch_factor x W batches are outstanding; batches reach
the training loop in order.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import simpy

from simulator.config.dataset import DatasetSpec, LoaderSpec
from simulator.config.host import Host
from simulator.feed import costs, storage
from simulator.units import GB


@dataclass(frozen=True)
class Scenario:
    """What one simulation runs: the pipeline's inputs, the GPU's compute time per step (0: a
    GPU that never waits on itself, to measure what the pipeline supplies) and the page cache's
    hit rate."""

    host: Host
    dataset: DatasetSpec
    loader: LoaderSpec
    batch: int
    gpu_step_s: float
    hit_rate: float
    steps: int
    seed: int = 0


@dataclass
class Outcome:
    """What a simulation measured over its steady stretch (`window`)."""

    period_s: float                 # time per step
    stall_s_per_step: float         # GPU idle per step: waiting for its batch and its copy
    wait_s_per_step: float          # ... of which waiting for a batch the loader had not made
    first_batch_s: float            # from the start until the first step begins
    steady_from_s: float            # where the measured (steady) stretch begins
    utilisation: dict[str, float]   # per stage: share of its capacity in use
    timeline: list[tuple[float, float, str]] = field(default_factory=list)  # (start, end, state)
    queue: list[tuple[float, int]] = field(default_factory=list)  # (time, batches ready)


def simulate(s: Scenario) -> Outcome:
    env = simpy.Environment()
    host, ds, ld = s.host, s.dataset, s.loader
    workers, ahead = loaders(ld.workers, ld.prefetch_factor)
    cores = simpy.Resource(env, capacity=host.cpu.cores)
    store = storage.build(env, host)
    link = simpy.Resource(env, capacity=1)
    rng = random.Random(s.seed)
    hits = [rng.random() < s.hit_rate for _ in range(s.steps * s.batch)]
    decode_s = costs.decode_cpu_s(ds, ld, host)
    cached_read_s = ds.bytes_per_sample / (host.cpu.copy_GBps * GB)
    sequential = ds.access == "sequential"
    share = ds.bytes_per_sample / ds.shard_bytes if sequential else 1.0
    batch_bytes = costs.batch_bytes_to_gpu(ds, ld, s.batch)
    pin_s = batch_bytes / (host.cpu.copy_GBps * GB) if ld.pin_memory else 0.0
    copy_s = costs.copy_s(ds, ld, host, s.batch)
    gpu_s = s.gpu_step_s + costs.gpu_decode_s(ds, ld, s.batch)

    built = [env.event() for _ in range(s.steps)]       # a worker has collated batch b
    pinned = [env.event() for _ in range(s.steps)]      # ... and it is pinned, in order
    copied = [env.event() for _ in range(s.steps)]      # ... and on the GPU (overlapped copy)
    consumed = [env.event() for _ in range(s.steps)]    # the GPU has begun step b
    stats = {"cpu_s": 0.0, "read_s": 0.0, "link_s": 0.0, "pin_s": 0.0}
    queue: list[tuple[float, int]] = []
    ready = [0]

    def worker(w: int):
        for b in range(w, s.steps, workers):
            if b >= ahead:
                yield consumed[b - ahead]
            for i in range(b * s.batch, (b + 1) * s.batch):
                if not hits[i]:   # a read from storage waits without a core
                    start = env.now
                    yield env.process(store.read(i, ds.bytes_per_sample, share))
                    stats["read_s"] += env.now - start
                work = decode_s + (cached_read_s if hits[i] else 0.0)
                with cores.request() as core:
                    yield core
                    stats["cpu_s"] += work
                    yield env.timeout(work)
            built[b].succeed()

    def pin_thread():
        for b in range(s.steps):
            yield built[b]
            if pin_s:
                with cores.request() as core:
                    yield core
                    stats["pin_s"] += pin_s
                    yield env.timeout(pin_s)
            ready[0] += 1
            queue.append((env.now, ready[0]))
            pinned[b].succeed()

    def copy_engine():   # overlapped copies: a side stream one batch ahead of the GPU
        for b in range(s.steps):
            yield pinned[b]
            if b >= 1:
                yield consumed[b - 1]
            yield from _copy()
            copied[b].succeed()

    def _copy():
        with link.request() as req:
            yield req
            stats["link_s"] += copy_s
            yield env.timeout(copy_s)

    timeline: list[tuple[float, float, str]] = []
    starts: list[float] = []
    stalls: list[float] = []
    waits: list[float] = []

    def gpu():
        for b in range(s.steps):
            idle_from = env.now
            yield pinned[b]
            waits.append(env.now - idle_from)
            if ld.copy == "overlapped":
                yield copied[b]
            else:
                yield from _copy()
            ready[0] -= 1
            queue.append((env.now, ready[0]))
            consumed[b].succeed()
            stalls.append(env.now - idle_from)
            timeline.append((idle_from, env.now, "waiting"))
            starts.append(env.now)
            yield env.timeout(gpu_s)
            timeline.append((starts[-1], env.now, "busy"))

    for w in range(workers):
        env.process(worker(w))
    env.process(pin_thread())
    if ld.copy == "overlapped":
        env.process(copy_engine())
    env.process(gpu())
    env.run()

    skip, steady = window(s.steps, workers, ahead)
    period = (starts[skip + steady] - starts[skip]) / steady
    stall = sum(stalls[skip + 1:skip + steady + 1]) / steady
    wait = sum(waits[skip + 1:skip + steady + 1]) / steady
    use = _utilisation(store, stats, env.now, workers, min(workers, host.cpu.cores))
    return Outcome(period_s=period, stall_s_per_step=stall, wait_s_per_step=wait,
                   first_batch_s=starts[0], steady_from_s=starts[skip],
                   utilisation=use, timeline=timeline, queue=queue)


def window(steps: int, workers: int, ahead: int) -> tuple[int, int]:
    """The steady stretch of a run: the steps to skip (the pipeline filling its prefetch) and
    how many to measure: whole rounds of the workers (a round's batches arrive together), with
    a full round after them (a last, partial round meets less contention)."""
    skip = min(ahead, max(0, steps - 2 * workers - 1))
    steady = max(1, (steps - skip - workers) // workers * workers)
    return skip, min(steady, steps - 1 - skip)


def loaders(workers: int, prefetch: int) -> tuple[int, int]:
    """(processes that load batches, batches outstanding at most): with 0 workers the
    training process loads each batch itself, one ahead."""
    return max(1, workers), prefetch * workers if workers else 1


def steps_for(workers: int, prefetch: int) -> int:
    """Steps one run simulates: the prefetch filled, at least two rounds of the workers (and
    24 steps) measured, and a round after them."""
    w, ahead = loaders(workers, prefetch)
    return ahead + max(2 * w, -(-24 // w) * w) + w + 1


def _utilisation(store, stats: dict, span: float, workers: int,
                 decoders: int) -> dict[str, float]:
    """Each stage's share of its capacity in use over the run: the one near 1 bounds it. The
    workers' time waiting on reads counts for storage (or the network, by the share of a read
    spent there): a worker reads one sample at a time, so storage that answers slowly bounds
    the pipeline without being busy."""
    span = span or 1.0
    waiting = stats["read_s"] / (workers * span)
    if isinstance(store, storage.NetworkStore):
        use = store.utilisation(span)
        use["storage"] = max(use["storage"], waiting * store.disk_share)
        use["network"] = max(use["network"], waiting * (1 - store.disk_share))
    else:
        use = {"storage": max(store.utilisation(span), waiting), "network": 0.0}
    use["decode"] = stats["cpu_s"] / (decoders * span)
    use["host link"] = max(stats["link_s"], stats["pin_s"]) / span
    return use
