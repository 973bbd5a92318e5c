"""Step time from a trace on a piece of hardware: per op, compute and memory overlap (roofline).

Here is the analytic fidelity, the plain peak roofline peer tools use: every op at the larger of
FLOPs / peak compute and bytes / peak DRAM bandwidth, back to back. The replay (`replay/`)
produces the same records with simulated DRAM, L2 and compute losses, and carries this one
beside it for comparison.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from simulator.config.hardware import Hardware
from simulator.errors import InputError
from simulator.gpu.compute import op_ceiling
from simulator.workload.trace import PHASES, Op, Phase, Trace


class MemoryModel(Protocol):
    name: str

    def transfer_time_s(self, op: Op) -> float:
        """Seconds to move the op's DRAM bytes, with nothing else in the way."""
        ...


@dataclass(frozen=True)
class PeakBandwidth:
    """Analytic: every byte moves at the bus's peak rate (bus width x data rate / 8)."""

    bandwidth_Bps: float
    name: str = "analytic"

    def transfer_time_s(self, op: Op) -> float:
        return op.bytes_moved / self.bandwidth_Bps


# How the memory side is timed: every burst through the GDDR6 engine, windows of it, or peak.
FIDELITIES = ("cycle", "sampled", "analytic")


def check_fidelity(fidelity: str, file: str | None = None, path: str | None = None) -> str:
    if fidelity not in FIDELITIES:
        raise InputError(f"expected a fidelity of {', '.join(FIDELITIES)}, got '{fidelity}'",
                         file=file, path=path)
    return fidelity


# What limits an op: its arithmetic; DRAM streaming; DRAM latency with too few requests in flight
# to cover it; the L2's bandwidth; or the kernel is so small that the GPU waited longer for the
# host to dispatch and launch it than it ran.
BOUNDS = ("compute", "dram_bandwidth", "dram_latency", "l2", "launch")
# Bounds that memory sets: DRAM or L2. A launch-bound op is not among them: its time is the gap
# before a kernel too small to hide it, which neither faster memory nor more FLOP/s shortens.
MEMORY_BOUNDS = frozenset({"dram_bandwidth", "dram_latency", "l2"})
# What a phase or step is said to be bound by: the class of op bounds holding most of its time.
BOUND_CLASSES = ("memory", "compute", "launch")


def bound_class(bound: str) -> str:
    """memory, compute or launch, for one of BOUNDS."""
    return "memory" if bound in MEMORY_BOUNDS else bound


def time_by_class(ops: list[OpTime]) -> dict[str, float]:
    """Seconds of these ops' time under each class of bound (BOUND_CLASSES)."""
    time = dict.fromkeys(BOUND_CLASSES, 0.0)
    for o in ops:
        time[bound_class(o.bound)] += o.time_s
    return time


def dominant_class(time: dict[str, float], ops: int) -> str | None:
    """The class of op bounds that holds for most of the time (`time_by_class`; memory on a
    tie, as the bound a roofline reader checks first); None for no ops (a phase the step does
    not have)."""
    return max(BOUND_CLASSES, key=lambda c: time[c]) if ops else None


@dataclass(frozen=True)
class OpTime:
    op: Op
    compute_s: float     # arithmetic at the ceiling used (with tile and wave losses when replayed)
    memory_s: float      # DRAM: analytic bytes / peak; replayed, op start to last completion
    ceiling: str         # the compute ceiling used (hardware peak_tflops key)
    bound: str           # one of BOUNDS
    l2_s: float = 0.0    # every byte through the L2 at its bandwidth (replay only)
    launch_s: float = 0.0  # GPU idle before the kernel: host dispatch not yet done, then the
    #                        launch gap (replay only)
    dram_bytes: int | None = None  # bytes to and from DRAM after the L2; None: every byte

    @property
    def time_s(self) -> float:
        return self.launch_s + max(self.compute_s, self.memory_s, self.l2_s)

    @property
    def bytes_to_dram(self) -> int:
        return self.op.bytes_moved if self.dram_bytes is None else self.dram_bytes


@dataclass(frozen=True)
class PhaseTotals:
    phase: Phase
    ops: int
    flops: int
    bytes_read: int
    bytes_written: int
    time_s: float
    time_by_class: dict[str, float]  # seconds under each class of bound (BOUND_CLASSES)

    @property
    def memory_bound_time_s(self) -> float:
        return self.time_by_class["memory"]

    @property
    def launch_bound_time_s(self) -> float:
        return self.time_by_class["launch"]

    @property
    def bound(self) -> str | None:
        """memory, compute or launch: the class holding most of the phase's time."""
        return dominant_class(self.time_by_class, self.ops)

    @property
    def bytes_moved(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def arithmetic_intensity(self) -> float:
        return self.flops / self.bytes_moved if self.bytes_moved else 0.0


@dataclass(frozen=True)
class StepEstimate:
    hardware: Hardware
    trace: Trace
    memory_model: str    # the fidelity: analytic, sampled or cycle
    ops: list[OpTime]
    replay: Any = None   # replay.ReplayDetails when simulated; None for analytic

    @property
    def fidelity(self) -> str:
        return self.memory_model

    @property
    def analytic(self) -> StepEstimate:
        """The peak-roofline estimate of the same step (itself when analytic)."""
        return self.replay.analytic if self.replay is not None else self

    @property
    def step_time_s(self) -> float:
        return sum(o.time_s for o in self.ops)

    @property
    def time_by_class(self) -> dict[str, float]:
        return time_by_class(self.ops)

    @property
    def memory_bound_time_s(self) -> float:
        return self.time_by_class["memory"]

    @property
    def bound(self) -> str | None:
        """memory, compute or launch: the class of op bounds holding most of the step."""
        return dominant_class(self.time_by_class, len(self.ops))

    def phase(self, phase: Phase) -> PhaseTotals:
        sel = [o for o in self.ops if o.op.phase == phase]
        return PhaseTotals(
            phase, len(sel), sum(o.op.flops for o in sel), sum(o.op.bytes_read for o in sel),
            sum(o.op.bytes_written for o in sel), sum(o.time_s for o in sel),
            time_by_class(sel))

    def phases(self) -> list[PhaseTotals]:
        return [self.phase(p) for p in PHASES]

    def slowest(self, n: int) -> list[OpTime]:
        return sorted(self.ops, key=lambda o: o.time_s, reverse=True)[:n]


def estimate(trace: Trace, hw: Hardware, memory: MemoryModel | None = None) -> StepEstimate:
    memory = memory or PeakBandwidth(hw.peak_bandwidth_Bps)
    timed = []
    for op in trace.ops:
        c = op_ceiling(hw, op)
        compute_s, memory_s = op.flops / c.flops_per_s, memory.transfer_time_s(op)
        timed.append(OpTime(op, compute_s, memory_s, c.key,
                            "compute" if compute_s >= memory_s else "dram_bandwidth"))
    return StepEstimate(hw, trace, memory.name, timed)
