"""What makes a training step fit: each remedy the articles name, with the peak it gives.

Every remedy is a changed workload run through the same generator and memory timeline, except
sharding over GPUs, which scales the categories it shards (ZeRO stages) in the timeline.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from simulator.config.workload import BNB_8BIT, TORCH_FUSED, WorkloadSpec
from simulator.workload.allocator import place
from simulator.workload.generate import build_trace
from simulator.workload.memory import MemoryProfile, profile
from simulator.workload.trace import Category

GPU_COUNTS = (2, 4, 8, 16)


@dataclass(frozen=True)
class Remedy:
    name: str
    change: str          # what to change, in the workload file's terms
    peak_bytes: int      # live tensors
    fits: bool           # the live peak within the capacity
    # the caching allocator's reserve, what an out-of-memory error checks (None for sharding,
    # which scales the memory timeline rather than generating a step to place)
    reserved_bytes: int | None = None
    reserve_fits: bool | None = None


@dataclass(frozen=True)
class Footprint:
    """A generated step's live peak and its caching-allocator reserve."""

    peak_bytes: int
    reserved_bytes: int


def _footprint(spec: WorkloadSpec) -> Footprint:
    trace = build_trace(spec)
    return Footprint(profile(trace).peak_bytes, place(trace).reserved_peak)


def _remedy(name: str, change: str, f: Footprint, capacity: int) -> Remedy:
    return Remedy(name, change, f.peak_bytes, f.peak_bytes <= capacity, f.reserved_bytes,
                  f.reserved_bytes <= capacity)


def _largest_fitting(lo: int, hi: int, fits: Callable[[int], bool],
                     lo_fits: bool = False) -> int | None:
    """The largest n in [lo, hi] with fits(n), for fits monotone (true below some n);
    `lo_fits`: the caller knows lo fits, so it is not tried again."""
    if not lo_fits and not fits(lo):
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


# the largest batch searched: this many times the workload's own (the search doubles up to it)
LARGEST_BATCH_FACTOR = 1 << 20


@dataclass(frozen=True)
class LargestBatch:
    batch_size: int      # per optimizer step
    micro_batches: int   # the workload's own, kept
    peak_bytes: int      # live tensors
    reserved_bytes: int  # the caching allocator's reserve, the figure held to the capacity


def largest_batch(spec: WorkloadSpec, capacity: int, own: Footprint) -> LargestBatch | None:
    """For a step that fits (`own`: its footprint, which the caller has): the largest batch
    per optimizer step whose caching-allocator reserve still fits (what an out-of-memory
    error checks; the live peak is below it), with the workload's micro-batch count kept, so
    its batch is a multiple of it. None where there
    is no batch to grow (a captured trace, a benchmark) or the step's own reserve does not
    fit. The reserve does not always grow with the batch (LLaMA-7B's is 69.2 GiB at batch 1
    and 64.2 at 2, as freed blocks fit the new sizes better), so the search (doubling, then
    halving the bracket) finds a batch that fits whose next one does not, which a larger
    batch could follow."""
    k = spec.micro_batches
    if spec.model["type"] == "captured" or spec.batch_size < 1:
        return None
    found: dict[int, LargestBatch] = {}

    def fits(n: int) -> bool:  # n samples per micro-batch
        f = _footprint(dataclasses.replace(spec, batch_size=n * k))
        found[n] = LargestBatch(n * k, k, f.peak_bytes, f.reserved_bytes)
        return f.reserved_bytes <= capacity

    if own.reserved_bytes > capacity:
        return None
    step = spec.batch_size // k
    found[step] = LargestBatch(spec.batch_size, k, own.peak_bytes, own.reserved_bytes)
    top = step * LARGEST_BATCH_FACTOR
    while step * 2 <= top and fits(step * 2):  # doubling brackets it in a few builds
        step *= 2
    return found[_largest_fitting(step, min(step * 2 - 1, top), fits, lo_fits=True)]


def remedies(spec: WorkloadSpec, capacity: int, base: MemoryProfile) -> list[Remedy]:
    """Each remedy alone (and all at once), for a step whose peak exceeds `capacity`. A
    captured trace has no workload to regenerate: only sharding applies to it. The searches
    (the smaller batch, the micro-batch count) hold the allocator's reserve to the capacity,
    as an out-of-memory error does; each regenerated remedy reports its reserve beside its
    live peak."""
    if spec.model["type"] == "captured":
        return _sharding(base, capacity)
    out: list[Remedy] = []
    ex = spec.execution

    def tried(name: str, change: str, changed: WorkloadSpec) -> Remedy:
        return _remedy(name, change, _footprint(changed), capacity)

    # smaller batch (per optimizer step, one micro-batch)
    if spec.batch_size > 1:
        sizes: dict[int, Footprint] = {}

        def batch_fits(n: int) -> bool:
            sizes[n] = _footprint(dataclasses.replace(spec, batch_size=n, micro_batches=1))
            return sizes[n].reserved_bytes <= capacity

        n = _largest_fitting(1, spec.batch_size - 1, batch_fits)
        change = "batch_size 1" if n is None else f"batch_size {n} (from {spec.batch_size})"
        out.append(_remedy("smaller batch", change, sizes[n or 1], capacity))
    # gradient accumulation: the same batch in more, smaller passes
    divisors = [k for k in range(spec.micro_batches + 1, spec.batch_size + 1)
                if spec.batch_size % k == 0]
    for k in divisors:
        f = _footprint(dataclasses.replace(spec, micro_batches=k))
        if f.reserved_bytes <= capacity or k == divisors[-1]:
            out.append(_remedy("gradient accumulation", f"micro_batches {k} (batch_size "
                               f"{spec.batch_size} kept)", f, capacity))
            break
    # activation checkpointing
    for level in ("selective", "full"):
        if level == "selective" and spec.model["type"] in ("sequential_cnn", "resnet"):
            continue
        if ex.checkpointing != level:
            out.append(tried(f"{level} activation checkpointing", f"checkpointing {level}",
                             dataclasses.replace(spec, execution=dataclasses.replace(
                                 ex, checkpointing=level))))
    # gradients freed between steps: none held through the forward pass
    if ex.zero_grad == "zeros":
        out.append(tried("gradients set to None", "zero_grad none "
                         "(optimizer.zero_grad(set_to_none=True))",
                         dataclasses.replace(spec, execution=dataclasses.replace(
                             ex, zero_grad="none"))))
    # mixed precision
    if spec.dtype == "fp32" and ex.autocast is None:
        out.append(tried("mixed precision", "mixed_precision bf16 (fp32 master weights)",
                         dataclasses.replace(spec, execution=dataclasses.replace(
                             ex, autocast="bf16"))))
    # a fused optimizer: no parameter-sized temporaries
    if spec.optimizer.implementation != "fused" and base.at_peak.get(Category.TEMPORARY):
        out.append(tried("fused optimizer", "optimizer implementation fused"
                         + _custom_kernel(spec.optimizer.type),
                         dataclasses.replace(spec, optimizer=dataclasses.replace(
                             spec.optimizer, implementation="fused"))))
    # 8-bit optimizer state
    if spec.optimizer.state_dtype != "int8" and base.at_peak.get(Category.OPTIMIZER_STATE):
        out.append(tried("8-bit optimizer state", "optimizer state_dtype int8"
                         + _custom_kernel(spec.optimizer.type, "8-bit"),
                         dataclasses.replace(spec, optimizer=dataclasses.replace(
                             spec.optimizer, state_dtype="int8"))))
    out += _sharding(base, capacity)
    # everything that keeps the batch and the one GPU, at once
    combined, changes = _combined(spec)
    if len(changes) > 1:
        out.append(tried("combined", " + ".join(changes), combined))
    return out


def _custom_kernel(optimizer: str, kind: str = "fused") -> str:
    """What a remedy asks for where the library users reach for has no kernel to switch to:
    torch.optim's fused ones, bitsandbytes' 8-bit ones."""
    if kind == "fused":
        return ("" if optimizer in TORCH_FUSED
                else f" (a custom kernel: torch.optim has no fused {optimizer})")
    return ("" if optimizer in BNB_8BIT
            else f" (a custom kernel: bitsandbytes has no 8-bit {optimizer})")


def _combined(spec: WorkloadSpec) -> tuple[WorkloadSpec, list[str]]:
    """The workload with every remedy that keeps its batch and its one GPU (gradients set
    to None, full checkpointing, mixed precision, a fused optimizer, 8-bit state), and the
    changes made."""
    ex, opt, changes = spec.execution, spec.optimizer, []
    if ex.zero_grad == "zeros":
        ex = dataclasses.replace(ex, zero_grad="none")
        changes.append("gradients set to None")
    if ex.checkpointing != "full":
        ex = dataclasses.replace(ex, checkpointing="full")
        changes.append("full checkpointing")
    if spec.dtype == "fp32" and ex.autocast is None:
        ex = dataclasses.replace(ex, autocast="bf16")
        changes.append("mixed precision")
    if opt.implementation != "fused":
        opt = dataclasses.replace(opt, implementation="fused")
        changes.append("fused optimizer" + _custom_kernel(opt.type))
    if opt.state_dtype != "int8":
        opt = dataclasses.replace(opt, state_dtype="int8")
        changes.append("8-bit state" + _custom_kernel(opt.type, "8-bit"))
    return dataclasses.replace(spec, execution=ex, optimizer=opt), changes


def _sharding(base: MemoryProfile, capacity: int) -> list[Remedy]:
    """Sharding over N data-parallel GPUs (ZeRO stages): the live bytes of one GPU. Each rank
    steps the optimizer on its partition alone (DeepSpeed's ZeRO, PyTorch's FSDP), so the
    step's parameter-sized temporaries shard with the state at every stage."""
    stages = (("ZeRO-1: optimizer state sharded", (Category.OPTIMIZER_STATE,)),
              ("ZeRO-2: optimizer state and gradients sharded",
               (Category.OPTIMIZER_STATE, Category.GRADIENT)),
              ("ZeRO-3 / FSDP: state, gradients and parameters sharded",
               (Category.OPTIMIZER_STATE, Category.GRADIENT, Category.PARAMETER)))
    out = []
    for label, cats in stages:
        for n in GPU_COUNTS:
            p = base.peak_scaled({c: 1 / n for c in cats}, optimizer_scratch=1 / n)
            if p <= capacity or n == GPU_COUNTS[-1]:
                out.append(Remedy(label, f"{n} GPUs", p, p <= capacity))
                break
    return out
