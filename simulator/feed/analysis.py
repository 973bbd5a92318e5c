"""The input pipeline against a GPU step: does the host keep the GPU fed, in the first (cold)
epoch and the later ones, which stage bounds it, and which single change would remove a stall.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

from simulator.config.dataset import DatasetSpec, LoaderSpec
from simulator.config.host import Disk, Host, load_host
from simulator.config.workload import WorkloadSpec
from simulator.errors import InputError
from simulator.feed import costs
from simulator.feed.simulation import Outcome, Scenario, simulate, steps_for
from simulator.units import GiB

STAGES = ("storage", "network", "decode", "host link")
# A stall shorter than this share of the GPU's step is noise of the simulated window, not a
# stall a remedy need remove
STALL_TOLERANCE = 0.01
# The remedies' faster disks: those the shipped hosts read from (their files cite the data
# sheets), by how much faster they are than each kind
FASTER_DISKS = {"hdd": ("sata-ssd-server", "nvme-workstation"),
                "sata-ssd": ("nvme-workstation",), "nvme": ()}
# zstd on token ids or raw arrays: a ratio a user should measure on their data; 2:1 is what
# the remedy tries
COMPRESSION_TRIED = 2.0


@dataclass(frozen=True)
class Remedy:
    """One single change simulated: the stall it leaves, and whether it removes the stall."""

    change: str                  # in words
    stall_s_per_step: float      # with the change, steady epochs
    samples_per_s_supplied: float
    removes_stall: bool


@dataclass(frozen=True)
class FeedResult:
    """The input pipeline against the GPU's step: samples per second needed and supplied,
    whether it bounds the step and which stage, the stall per step in the first and later
    epochs, the epochs' length, and the remedies tried."""

    host: Host
    dataset: DatasetSpec
    loader: LoaderSpec
    batch: int
    gpu_step_s: float            # the GPU's own time per step (replay, plus GPU decoding)
    samples_per_s_needed: float
    samples_per_s_supplied: float       # steady (warm) epochs
    first_samples_per_s_supplied: float  # the first, cold epoch
    bound: bool                  # in steady epochs, the pipeline supplies fewer samples than
    #                              the GPU consumes
    bottleneck: str              # a stage of STAGES, or "none"
    utilisation: dict[str, float]  # per stage, with an infinitely fast GPU
    stall_s_per_step: float      # steady (warm) epochs
    first_stall_s_per_step: float  # the first, cold epoch
    gpu_wait_share: float        # steady epochs
    copy_s_per_step: float       # the host-to-device copy of one batch
    first_epoch_s: float
    steady_epoch_s: float
    page_cache_hit_rate: float   # steady epochs
    cache_fraction: float        # page cache / dataset
    steps_per_epoch: int
    remedies: tuple[Remedy, ...]
    timeline: Outcome            # the steady epoch's run, for the report's plot

    @property
    def best_change(self) -> str | None:
        """The first remedy, in the seed article's order, that removes the stall."""
        return next((r.change for r in self.remedies if r.removes_stall), None)


def check_feedable(spec: WorkloadSpec, file: str = "") -> DatasetSpec:
    if spec.dataset is None:
        raise InputError(f"--host simulates the input pipeline, and {spec.name} has no dataset "
                         "(its inputs are synthetic): expected data.dataset in the workload",
                         file=file or spec.path, path="$.data.dataset")
    return spec.dataset


def analyze_feed(spec: WorkloadSpec, host: Host, step_time_s: float,
                 remedies: bool = True) -> FeedResult:
    """The pipeline feeding a GPU whose step (the replay's) takes step_time_s."""
    ds = check_feedable(spec)
    return _analyze(host, ds, spec.loader, spec.batch_size, step_time_s, remedies)


def _run(host: Host, ds: DatasetSpec, ld: LoaderSpec, batch: int, gpu_s: float,
         hit: float) -> Outcome:
    steps = steps_for(ld.workers, ld.prefetch_factor)
    return simulate(Scenario(host, ds, ld, batch, gpu_s, hit, steps))


def _later_epochs(host: Host, ds: DatasetSpec, ld: LoaderSpec, batch: int, step_time_s: float
                  ) -> tuple[float, float, Outcome, Outcome]:
    """(page-cache hit rate, the GPU's time per step, the run against that step, the run
    against a GPU that never waits) for the epochs after the first."""
    hit = costs.page_cache_hit_rate(ds, host)
    gpu_step = step_time_s + costs.gpu_decode_s(ds, ld, batch)
    return (hit, gpu_step, _run(host, ds, ld, batch, step_time_s, hit),
            _run(host, ds, ld, batch, 0.0, hit))


def _analyze(host: Host, ds: DatasetSpec, ld: LoaderSpec, batch: int, step_time_s: float,
             remedies: bool) -> FeedResult:
    step_time_s = float(step_time_s)
    hit, gpu_step, warm, supply = _later_epochs(host, ds, ld, batch, step_time_s)
    cold = warm if hit == 0 else _run(host, ds, ld, batch, step_time_s, 0.0)
    cold_supply = supply if hit == 0 else _run(host, ds, ld, batch, 0.0, 0.0)
    needed = batch / gpu_step if gpu_step > 0 else math.inf
    supplied = batch / supply.period_s
    bound = bool(supplied < needed)
    use = supply.utilisation
    bottleneck = max(STAGES, key=lambda k: use[k]) if bound else "none"
    steps = math.ceil(ds.samples / batch)
    stalled = bound or warm.stall_s_per_step > STALL_TOLERANCE * gpu_step
    fixes = tuple(_remedies(host, ds, ld, batch, step_time_s, bound)) \
        if remedies and stalled else ()
    return FeedResult(
        host=host, dataset=ds, loader=ld, batch=batch, gpu_step_s=gpu_step,
        samples_per_s_needed=needed, samples_per_s_supplied=supplied,
        first_samples_per_s_supplied=batch / cold_supply.period_s, bound=bound,
        bottleneck=bottleneck, utilisation=use, stall_s_per_step=warm.stall_s_per_step,
        first_stall_s_per_step=cold.stall_s_per_step,
        gpu_wait_share=warm.stall_s_per_step / warm.period_s,
        copy_s_per_step=costs.copy_s(ds, ld, host, batch),
        first_epoch_s=cold.first_batch_s + steps * cold.period_s,
        steady_epoch_s=steps * warm.period_s,
        page_cache_hit_rate=hit, cache_fraction=costs.cache_fraction(ds, host),
        steps_per_epoch=steps, remedies=fixes, timeline=warm)


def _link_candidates(ld: LoaderSpec) -> list[tuple[str, LoaderSpec]]:
    out = []
    if not ld.pin_memory:
        out.append(("pinned memory (pin_memory=True)", dataclasses.replace(ld, pin_memory=True)))
    if ld.copy == "in_step":
        out.append(("copies overlapped with the previous step (a side CUDA stream)",
                    dataclasses.replace(ld, copy="overlapped")))
    return out


def _candidates(host: Host, ds: DatasetSpec, ld: LoaderSpec, bound: bool
                ) -> list[tuple[str, Host, DatasetSpec, LoaderSpec]]:
    """The seed article's remedies, each a single change to the host, dataset or loader; a
    pipeline that keeps up, whose GPU waits for its copies only, gets the host link's."""
    if not bound:
        return [(change, host, ds, lo) for change, lo in _link_candidates(ld)]
    out = []
    for name in FASTER_DISKS[host.storage.kind] if host.network is None else ():
        disk = _shipped_disk(name)
        out.append((f"faster storage: {disk.kind} ({disk.model}, as {name}) for the "
                    f"{host.storage.kind}", dataclasses.replace(host, storage=disk), ds, ld))
    if host.network is not None:
        n = host.network
        out.append((f"more storage nodes: {2 * n.nodes} servers instead of {n.nodes}",
                    dataclasses.replace(host, network=dataclasses.replace(n, nodes=2 * n.nodes)),
                    ds, ld))
    if ld.workers < host.cpu.cores:
        out.append((f"more loader workers: {host.cpu.cores} (one per core) instead of "
                    f"{ld.workers}", host, ds, dataclasses.replace(ld, workers=host.cpu.cores)))
    cores = 2 * host.cpu.cores
    out.append((f"more cores: {cores}, with {max(ld.workers, 1) * 2} loader workers",
                dataclasses.replace(host, cpu=dataclasses.replace(host.cpu, cores=cores)), ds,
                dataclasses.replace(ld, workers=max(ld.workers, 1) * 2)))
    if costs.cache_fraction(ds, host) < 1:
        ram = math.ceil((ds.stored_bytes + host.reserved_bytes) / GiB)
        out.append((f"a dataset that fits the page cache: {ram} GiB of RAM instead of "
                    f"{host.ram_bytes / GiB:g}", dataclasses.replace(host, ram_bytes=ram * GiB),
                    ds, ld))
    if ds.format in ("raw", "tokens"):
        r = COMPRESSION_TRIED
        out.append((f"compression: samples stored at {r:g}:1 (zstd), decompressed by the workers",
                    host, dataclasses.replace(ds, format="compressed", compression_ratio=r,
                                              bytes_per_sample=ds.bytes_per_sample / r), ld))
    if ds.format == "jpeg" and ld.decode == "cpu":
        out.append(("GPU decoding (as DALI's nvJPEG): the workers pass JPEG bytes on",
                    host, ds, dataclasses.replace(ld, decode="gpu")))
    return out + [(change, host, ds, lo) for change, lo in _link_candidates(ld)]


@functools.cache
def _shipped_disk(host_name: str) -> Disk:
    return load_host(host_name).storage


def _remedies(host: Host, ds: DatasetSpec, ld: LoaderSpec, batch: int, step_time_s: float,
              bound: bool) -> list[Remedy]:
    """Each candidate simulated again. Input-bound, a change removes the stall when the
    pipeline then keeps up and the GPU no longer waits for batches (its in-step copy may
    remain, a stall of its own); otherwise, when the GPU no longer waits at all."""
    out = []
    for change, h, d, lo in _candidates(host, ds, ld, bound):
        _, gpu_step, warm, supply = _later_epochs(h, d, lo, batch, step_time_s)
        supplied = batch / supply.period_s
        tolerance = STALL_TOLERANCE * gpu_step
        removes = bool((supplied >= batch / gpu_step and warm.wait_s_per_step <= tolerance)
                       if bound else warm.stall_s_per_step <= tolerance)
        out.append(Remedy(change, warm.stall_s_per_step, supplied, removes))
    return out
