"""Why the step takes as long as it does: memory-bound share, where DRAM time is lost, and which
single hardware change would shorten it most.

DRAM inefficiency is measured over the ops the DRAM limits: channel-cycles of their spans in
which a channel's data bus moved nothing. For bandwidth-bound ops that loss is split among its
causes in proportion to each cause's raw cycle cost as the engine counted it (row misses and
conflicts: their ACT/PRE latencies; bank-group spacing: nCCDL - nCCDS per column command that
follows one to the same group; turnaround: the bus gap of each read/write switch; refresh: the
cycles refresh held banks; channel imbalance: how far each channel's busy cycles fall short of
the busiest). Latency-bound ops lose theirs to too few requests in flight.

The what-if figures are first-order, from each op's own breakdown (a faster bus shortens the
bandwidth-bound DRAM spans, faster SMs the compute spans, a bigger L2 scales DRAM spans by the
bytes it saves). A compute-bound op's DRAM span was paced by its SMs, so its DRAM's own time is
taken as its bytes at the efficiency the DRAM-bound ops reached. Run a sweep to confirm one.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.config.hardware import Hardware
from simulator.dram.system import Counters, MemorySystem, turnaround_cycles_per_switch
from simulator.estimate import MEMORY_BOUNDS, OpTime
from simulator.gpu.compute import launch_overhead_s
from simulator.gpu.dispatch import dispatch_s, issue_s
from simulator.gpu.l2 import cache_capacity, l2_cache
from simulator.workload.trace import Op

CAUSES = ("row_misses", "bank_group_spacing", "read_write_turnaround", "refresh",
          "channel_imbalance", "too_few_requests_in_flight")
SPEEDUP = 1.25  # each what-if makes one resource 25 % faster (or the L2 twice as big)
DEFAULT_DRAM_EFFICIENCY = 0.9  # share of peak assumed when no op was DRAM-bound


@dataclass(frozen=True)
class Bottlenecks:
    step_s: float
    memory_bound_share: float         # share of step time in ops bound by DRAM or L2
    time_by_bound: dict[str, float]   # seconds of step time per bound
    dram_busy_share: float            # data-bus busy share of channel-cycles in DRAM-bound ops
    dram_lost_by_cause: dict[str, float]  # share of those channel-cycles lost, per cause
    what_if: dict[str, float]         # step time in s after each single change
    best_change: str


def _split_lost(c: Counters, span_ck: float, ms: MemorySystem, latency_bound: bool
                ) -> dict[str, float]:
    ch = len(c.channel_busy)
    lost = max(span_ck * ch - float(c.channel_busy.sum()), 0.0)
    if latency_bound:
        return {"too_few_requests_in_flight": lost}
    t = ms.timing
    raw = {
        "row_misses": c.row_misses * t.nRCDRD + c.row_conflicts * (t.nRP + t.nRCDRD),
        "bank_group_spacing": c.same_bankgroup * (t.nCCDL - t.nCCDS),
        "read_write_turnaround": c.rw_switches * turnaround_cycles_per_switch(t),
        "refresh": c.refresh_cycles,
        "channel_imbalance": float((c.channel_busy.max() - c.channel_busy).sum()),
    }
    total = sum(raw.values())
    return {k: lost * v / total for k, v in raw.items()} if total else {}


def timeline_s(ops: list[Op], busy_s: list[float], gap_s: float, eager: bool = True) -> float:
    """When the last kernel ends, as replay's host and kernel stream tell it: each kernel
    starts a launch gap after both its host dispatch is done and the kernel before it has
    ended; the host moves on after each op's issue time, and waits for the GPU at an op whose
    result it reads (`host_waits`)."""
    host = end = 0.0
    for op, busy in zip(ops, busy_s, strict=True):
        ready = host + dispatch_s(op, eager)
        host += issue_s(op, eager)
        end = max(end, ready) + gap_s + busy
        if op.host_waits:
            host = max(host, end)
    return end


def summarize(hw: Hardware, ms: MemorySystem, timed: list[OpTime], detail: list,
              eager: bool = True) -> Bottlenecks:
    step = sum(o.time_s for o in timed)
    by_bound: dict[str, float] = {}
    for o in timed:
        by_bound[o.bound] = by_bound.get(o.bound, 0.0) + o.time_s
    lost = dict.fromkeys(CAUSES, 0.0)
    span_total = busy_total = 0.0
    channels = ms.org.channels
    for o, d in zip(timed, detail, strict=True):
        if o.bound not in ("dram_bandwidth", "dram_latency"):
            continue
        span = d.service.span_ck
        span_total += span * channels
        busy_total += float(d.service.counters.channel_busy.sum())
        for k, v in _split_lost(d.service.counters, span, ms, o.bound == "dram_latency").items():
            lost[k] += v
    lost_share = {k: v / span_total for k, v in lost.items()} if span_total else {}

    # what-if, op by op
    bigger = l2_cache(hw, 2 * cache_capacity(hw))
    busy: dict[str, list[float]] = {"dram_bandwidth_+25%": [], "compute_+25%": [],
                                    "l2_bandwidth_+25%": [], "l2_capacity_x2": []}
    efficiency = busy_total / span_total if span_total else DEFAULT_DRAM_EFFICIENCY
    for o, d in zip(timed, detail, strict=True):
        # a DRAM that kept pace with the SMs took the SMs' time; on its own it would take
        # about its bytes at the efficiency DRAM-bound ops reached
        mem = o.memory_s
        if o.bound == "compute" and o.bytes_to_dram:
            mem = min(mem, o.bytes_to_dram / (hw.peak_bandwidth_Bps * efficiency))
        dram_bw_s = mem / SPEEDUP if o.bound in ("dram_bandwidth", "compute") else mem
        saved = bigger.filter(o.op).dram_bytes
        l2x2_mem = mem * (saved / o.bytes_to_dram) if o.bytes_to_dram else mem
        busy["dram_bandwidth_+25%"].append(max(o.compute_s, dram_bw_s, o.l2_s))
        fixed = d.fixed_s  # (a convolution's transforms and launches)
        busy["compute_+25%"].append(max(fixed + (o.compute_s - fixed) / SPEEDUP, mem, o.l2_s))
        busy["l2_bandwidth_+25%"].append(max(o.compute_s, mem, o.l2_s / SPEEDUP))
        busy["l2_capacity_x2"].append(max(o.compute_s, min(l2x2_mem, mem), o.l2_s))
    # kernels that end sooner can leave the GPU waiting on the host: rerun the timeline
    gap = launch_overhead_s(hw)
    ops = [o.op for o in timed]
    what_if = {k: timeline_s(ops, b, gap, eager) for k, b in busy.items()}
    best = min(what_if, key=what_if.get)
    mem_share = sum(v for k, v in by_bound.items() if k in MEMORY_BOUNDS) / step if step else 0.0
    return Bottlenecks(step, mem_share, by_bound,
                       busy_total / span_total if span_total else 0.0, lost_share, what_if, best)
