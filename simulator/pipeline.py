"""The one-direction pipeline: workload + hardware -> trace -> memory profile -> step estimate.

This is also the notebook API:

    from simulator import analyze
    result = analyze("workloads/transformer.json", "t4")
    result.estimate.step_time_s, result.memory.peak_bytes
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from simulator.config.hardware import Hardware, load_hardware
from simulator.config.workload import WorkloadSpec, load_workload
from simulator.estimate import MemoryModel, StepEstimate, estimate
from simulator.workload.generate import build_trace
from simulator.workload.memory import MemoryProfile, profile
from simulator.workload.trace import Trace

DEFAULT_HARDWARE = "t4"


@dataclass(frozen=True)
class RunResult:
    workload: WorkloadSpec
    hardware: Hardware
    trace: Trace
    memory: MemoryProfile
    estimate: StepEstimate

    @property
    def fits(self) -> bool:
        return self.memory.peak_bytes <= self.hardware.memory.capacity_bytes


def analyze(workload: WorkloadSpec | str | Path, hardware: Hardware | str | Path = DEFAULT_HARDWARE,
            memory_model: MemoryModel | None = None) -> RunResult:
    spec = workload if isinstance(workload, WorkloadSpec) else load_workload(workload)
    hw = hardware if isinstance(hardware, Hardware) else load_hardware(hardware)
    trace = build_trace(spec)
    return RunResult(spec, hw, trace, profile(trace), estimate(trace, hw, memory_model))
