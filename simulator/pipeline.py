"""The one-direction pipeline: workload + hardware -> trace -> memory profile -> step estimate.

This is also the notebook API:

    from simulator.pipeline import analyze
    result = analyze("workloads/transformer.json", "t4")
    result.estimate.step_time_s, result.memory.peak_bytes

and with a host feeding the GPU (`feed`: the input pipeline, simulator/feed/):

    result = analyze("resnet50", "a10", host="nvme-workstation")
    result.feed.bound, result.feed.stall_s_per_step
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from simulator.config.hardware import Hardware, load_hardware
from simulator.config.host import Host, load_host
from simulator.config.workload import (
    OptimizerSpec,
    WorkloadSpec,
    load_workload,
    parse_workload,
)
from simulator.errors import InputError
from simulator.estimate import MemoryModel, StepEstimate, check_fidelity, estimate
from simulator.feed.analysis import FeedResult, analyze_feed, check_feedable
from simulator.replay import replay
from simulator.workload import tracefile
from simulator.workload.allocator import Placement, place
from simulator.workload.generate import build_trace
from simulator.workload.memory import MemoryProfile, profile
from simulator.workload.trace import Trace

DEFAULT_HARDWARE = "t4"


@dataclass(frozen=True)
class RunResult:
    """One training step of a workload on a card: its trace, memory profile and step estimate
    (the replay's, or the analytic roofline's), and with a host the input pipeline's result."""

    workload: WorkloadSpec
    hardware: Hardware
    trace: Trace
    memory: MemoryProfile
    estimate: StepEstimate
    placement: Placement | None = None  # the caching allocator's placement of the tensors
    feed: FeedResult | None = None      # the input pipeline, where a host was given

    @property
    def fits(self) -> bool:
        """The live peak within the capacity less the runtime's reserve (the caching
        allocator's reserve is `reserve_fits`)."""
        return self.memory.peak_bytes <= self.hardware.usable_bytes

    @property
    def reserve_fits(self) -> bool | None:
        """The caching allocator's reserve within the capacity: what an out-of-memory error
        checks (None without a placement), held to the capacity less the runtime's reserve."""
        if self.placement is None:
            return None
        return self.placement.reserved_peak <= self.hardware.usable_bytes


class Step:
    """A workload generated into its trace, with what follows from the trace alone (where the
    allocator puts its tensors, its memory profile), worked out once for any number of
    hardware points: a sweep keeps one per workload."""

    def __init__(self, workload: WorkloadSpec | str | Path):
        self.spec, self.trace = load_step(workload)

    @functools.cached_property
    def placement(self) -> Placement:
        return place(self.trace)

    @functools.cached_property
    def memory(self) -> MemoryProfile:
        return profile(self.trace)


def load_step(workload: WorkloadSpec | str | Path) -> tuple[WorkloadSpec, Trace]:
    """A workload (file, name or spec) generated into its trace, or a trace file read back."""
    if isinstance(workload, WorkloadSpec):
        return workload, build_trace(workload)
    if str(workload).endswith(".jsonl"):
        path = Path(workload)
        trace, header = tracefile.read(path)
        if header.get("source"):
            return parse_workload(header["source"], str(path)), trace
        captured = header.get("captured")
        if not captured:
            raise InputError("expected the header's 'source' (the workload it was generated "
                             "from) or 'captured'", file=f"{path}:1")
        spec = WorkloadSpec(
            name=header["workload"], description=f"captured from {captured['function']}",
            model={"type": "captured"}, batch_size=0, src_seq_len=None, tgt_seq_len=None,
            seq_len=None, micro_batches=1, dtype=captured["dtype"], loss="as captured",
            optimizer=OptimizerSpec(captured["optimizer"].lower(), implementation="as captured"),
            path=str(path))
        return spec, trace
    spec = load_workload(workload)
    return spec, build_trace(spec)


def default_fidelity(hw: Hardware) -> str:
    """Sampled replay where the GDDR6 engine applies; the analytic roofline elsewhere (HBM)."""
    return "sampled" if hw.memory.replayable else "analytic"


def analyze(workload: WorkloadSpec | str | Path | Step,
            hardware: Hardware | str | Path = DEFAULT_HARDWARE,
            fidelity: str | None = None, memory_model: MemoryModel | None = None,
            progress: bool = False, dram_memo: dict | None = None,
            share_shapes: bool = True, host: Host | str | Path | None = None) -> RunResult:
    """One step of the workload on the hardware. `fidelity`: cycle, sampled or analytic
    (None: sampled on GDDR6, analytic otherwise); `memory_model` replaces the analytic
    DRAM ceiling; `progress` shows a progress bar on long replays; `dram_memo` keeps sampled
    DRAM results for reuse by later calls, `share_shapes` lets ops of one traffic shape share
    windows (see replay.replay). A `Step` as the workload spares generating it again. `host`
    (a name, file or Host) adds the input pipeline feeding the GPU that step."""
    step = workload if isinstance(workload, Step) else Step(workload)
    spec, trace = step.spec, step.trace
    if host is not None:
        host = load_host(host)
        check_feedable(spec)
    hw = hardware if isinstance(hardware, Hardware) else load_hardware(hardware)
    fidelity = check_fidelity(fidelity or default_fidelity(hw))
    if fidelity == "analytic" or memory_model is not None:
        est = estimate(trace, hw, memory_model)
    else:
        if not hw.memory.replayable:
            raise InputError(f"the replay simulates GDDR6 memory; {hw.name} has "
                             f"{hw.memory.type}: expected --fidelity analytic", file=hw.path,
                             path="$.memory.type")
        est = replay(trace, hw, fidelity, progress, dram_memo, step.placement, share_shapes)
    feed = analyze_feed(spec, host, est.step_time_s) if host is not None else None
    return RunResult(spec, hw, trace, step.memory, est, step.placement, feed)
