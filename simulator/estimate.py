"""Step time from a trace on a piece of hardware: per op, compute and memory overlap (roofline).

The memory side is a `MemoryModel`. Here it is the analytic peak-bandwidth ceiling; the replay
through the GDDR6 channel engine plugs in behind the same interface.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from simulator.config.hardware import Hardware
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


@dataclass(frozen=True)
class OpTime:
    op: Op
    compute_s: float
    memory_s: float
    ceiling: str         # the compute ceiling used (hardware peak_tflops key)

    @property
    def time_s(self) -> float:
        return max(self.compute_s, self.memory_s)

    @property
    def bound(self) -> str:
        return "compute" if self.compute_s >= self.memory_s else "memory"


@dataclass(frozen=True)
class PhaseTotals:
    phase: Phase
    ops: int
    flops: int
    bytes_read: int
    bytes_written: int
    time_s: float
    memory_bound_time_s: float

    @property
    def bytes_moved(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def arithmetic_intensity(self) -> float:
        return self.flops / self.bytes_moved if self.bytes_moved else 0.0

    @property
    def bound(self) -> str:
        """The bound that holds for most of the phase's time."""
        return "memory" if self.memory_bound_time_s * 2 > self.time_s else "compute"


@dataclass(frozen=True)
class StepEstimate:
    hardware: Hardware
    trace: Trace
    memory_model: str
    ops: list[OpTime]

    @property
    def step_time_s(self) -> float:
        return sum(o.time_s for o in self.ops)

    def phase(self, phase: Phase) -> PhaseTotals:
        sel = [o for o in self.ops if o.op.phase == phase]
        return PhaseTotals(
            phase, len(sel), sum(o.op.flops for o in sel), sum(o.op.bytes_read for o in sel),
            sum(o.op.bytes_written for o in sel), sum(o.time_s for o in sel),
            sum(o.time_s for o in sel if o.bound == "memory"))

    def phases(self) -> list[PhaseTotals]:
        return [self.phase(p) for p in PHASES]

    def slowest(self, n: int) -> list[OpTime]:
        return sorted(self.ops, key=lambda o: o.time_s, reverse=True)[:n]


def estimate(trace: Trace, hw: Hardware, memory: MemoryModel | None = None) -> StepEstimate:
    memory = memory or PeakBandwidth(hw.peak_bandwidth_Bps)
    timed = []
    for op in trace.ops:
        c = op_ceiling(hw, op)
        timed.append(OpTime(op, op.flops / c.flops_per_s, memory.transfer_time_s(op), c.key))
    return StepEstimate(hw, trace, memory.name, timed)
