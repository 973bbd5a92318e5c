"""The replay: a training step's ops through the compute model, the L2 and the GDDR6 engine.

The story, as two simpy processes: the host dispatches the step's ops in order, each at eager
PyTorch's per-op cost (gpu/dispatch.py), and queues their kernels. The GPU runs one kernel at
a time: it takes the next from the queue (waiting for the host when the host is behind), waits
its launch gap, then its SMs work for as long as the arithmetic (at the clock the card's recent
load leaves it: gpu/clocks.py) or the L2's bandwidth takes, while the DRAM serves the L2's
misses and write-backs as the SMs reach them. The kernel ends when both are done. Compute and
memory overlap within a kernel; kernels run one at a time.

Fidelities: `cycle` (every 32 B burst through the channel engine), `sampled` (windows of each
op, extrapolated; see replay/memory.py) and `analytic` (estimate.py; no replay).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import simpy

from simulator.config.hardware import Hardware
from simulator.dram.system import DramStats, MemorySystem
from simulator.errors import InputError
from simulator.estimate import OpTime, StepEstimate, estimate
from simulator.gpu.clocks import ClockState, clocks
from simulator.gpu.compute import kernel_compute, launch_overhead_s
from simulator.gpu.dispatch import dispatch_s, issue_s
from simulator.gpu.l2 import OpTraffic, l2_bandwidth_Bps, l2_cache
from simulator.replay.bottleneck import Bottlenecks, summarize
from simulator.replay.memory import CycleMemory, SampledMemory, Service
from simulator.replay.traffic import OpRequests
from simulator.units import GB
from simulator.workload.allocator import Placement, place
from simulator.workload.trace import Op, Trace

# The memory kept pace with the SMs when its last request finished within this many unloaded
# read latencies (ACT + read + burst) of the SMs finishing: only the final drain showed ...
_PACE_SLACK_LATENCIES = 2
# ... or within this share of the SMs' time: the write-backs left in the queues at the end
_PACE_SLACK_SHARE = 1.05


@dataclass(frozen=True)
class OpReplay:
    """Per-op detail beyond OpTime: what the L2 and the DRAM engine did."""

    traffic: OpTraffic
    service: Service
    tile_efficiency: float
    wave_efficiency: float
    shares: object                  # ops with the same share one DRAM result (memory.shares)
    boost_compute_s: float = 0.0    # the arithmetic through the library at the boost clock
    fixed_s: float = 0.0            # of the replayed arithmetic time, what no FLOP/s peak
    #                                 shortens (KernelCompute.fixed_s, at the clock it ran)


@dataclass(frozen=True)
class DramDemand:
    """What one op asks of the DRAM: its L2 misses and write-backs as requests, and the pace
    at which the SMs reach them."""

    traffic: OpTraffic
    requests: OpRequests
    compute_s: float                # the SMs' arithmetic (KernelCompute.time_s)
    l2_s: float                     # every byte through the L2 at its bandwidth
    on_chip_s: float                # the SMs' time: the longer of the two
    pace_ck: float                  # the same in CK cycles
    key: tuple                      # the traffic's shape: ops with the same key reuse results


@dataclass(frozen=True)
class ReplayDetails:
    analytic: StepEstimate
    per_op: list[OpReplay]
    dram: DramStats                 # the engine's totals over the simulated requests
    l2_bandwidth_GBps: float
    l2_bandwidth_measured: bool
    cache_bytes: int
    error_bound_s: float            # sampled: the ops' bounds combined (step_error_bound); cycle: 0
    simulated_requests: int
    bottlenecks: Bottlenecks
    placement: Placement
    fits: bool


# What separates the replay's step from the datasheet roofline, added one at a time
SEPARATION = ("analytic", "kernel_efficiency", "clocks", "dram_and_l2", "host_and_launch")


def separation(est: StepEstimate) -> dict[str, float]:
    """Step seconds as each effect joins the roofline, in SEPARATION's order: the analytic
    step; its arithmetic through the library's kernels at the boost clock; at the clock the
    card holds; its bytes through the simulated L2 and DRAM rather than at peak; and the GPU's
    waits on the host and the launch gap (the replayed step). The differences between
    neighbours are what each effect costs."""
    d: ReplayDetails = est.replay
    steps = dict.fromkeys(SEPARATION, 0.0)
    steps["analytic"] = d.analytic.step_time_s
    for o, r, a in zip(est.ops, d.per_op, d.analytic.ops, strict=True):
        at_peak = a.memory_s  # the op's bytes at peak bandwidth, as the roofline has them
        steps["kernel_efficiency"] += max(r.boost_compute_s, at_peak)
        steps["clocks"] += max(o.compute_s, at_peak)
        steps["dram_and_l2"] += max(o.compute_s, o.memory_s, o.l2_s)
        steps["host_and_launch"] += o.time_s
    return steps


def step_error_bound(detail: list[OpReplay]) -> float:
    """The step's error bound in CK from its ops' 95 % bounds: summed over ops that share one
    result (the same windows, so their errors move together), combined in quadrature across
    the rest (each measured on windows of its own). Each op's bound is Student's t, at least
    1.96, times its standard error, so this is at least 1.96 times the standard error of the
    sum: a 95 % interval. Summing every op's bound would treat all the errors as moving
    together, which independent windows do not."""
    by_result: dict[object, float] = defaultdict(float)
    for d in detail:
        by_result[d.shares] += d.service.error_ck
    return math.sqrt(sum(b * b for b in by_result.values()))


def _bound(compute_s: float, memory_s: float, l2_s: float, launch_s: float, dram_bytes: int,
           peak_Bps: float, slack_s: float) -> str:
    busy = max(compute_s, memory_s, l2_s)
    if launch_s > busy:
        return "launch"
    if memory_s <= _PACE_SLACK_SHARE * max(compute_s, l2_s) + slack_s:
        return "compute" if compute_s >= l2_s else "l2"
    # DRAM took longest: streaming at a good share of peak, or waiting on latency
    return "dram_bandwidth" if dram_bytes / peak_Bps >= 0.5 * memory_s else "dram_latency"


class Replay:
    def __init__(self, trace: Trace, hw: Hardware, fidelity: str = "sampled",
                 progress: bool = False, dram_memo: dict | None = None,
                 placement: Placement | None = None, share_shapes: bool = True,
                 initial_heat: float = 1.0):
        if fidelity not in ("cycle", "sampled"):
            raise InputError(f"expected a replay fidelity of cycle or sampled, got '{fidelity}'")
        self.trace, self.hw, self.fidelity = trace, hw, fidelity
        self.ms = MemorySystem.from_hardware(hw)
        self.memory = (CycleMemory(self.ms) if fidelity == "cycle"
                       else SampledMemory(self.ms, dram_memo, share_shapes))
        self.placement = placement if placement is not None else place(trace)
        # data addresses lie below inline ECC's carve-out, which holds the check bits that
        # travel with every line (replay/traffic.py)
        self.capacity = self.ms.org.capacity_bytes - hw.memory.ecc_reserved_bytes
        self.ecc_base = self.capacity if hw.memory.ecc_reserved_bytes else None
        self.l2 = l2_cache(hw)
        self.l2_Bps, self.l2_measured = l2_bandwidth_Bps(hw)
        self.launch_s = launch_overhead_s(hw)
        self.clock = ClockState(clocks(hw), initial_heat,
                                operand_values=trace.operand_values)
        t = self.ms.timing
        self.tck_s = self.ms.tck_ns * 1e-9
        self.slack_s = _PACE_SLACK_LATENCIES * (t.nRCDRD + t.nCL + t.nBL) * self.tck_s
        self.progress = progress
        self.timed: list[OpTime] = []
        self.detail: list[OpReplay] = []

    def run(self) -> StepEstimate:
        env = simpy.Environment()  # time in seconds
        env.process(self._kernel_stream(env))
        env.run()
        analytic = estimate(self.trace, self.hw)
        errors = step_error_bound(self.detail) * self.tck_s
        details = ReplayDetails(
            analytic, self.detail, self.ms.stats(), self.l2_Bps / GB, self.l2_measured,
            self.l2.capacity, errors, sum(d.service.simulated_requests for d in self.detail),
            summarize(self.hw, self.ms, self.timed, self.detail, self.trace.eager),
            self.placement,
            self.placement.reserved_peak <= self.capacity)
        return StepEstimate(self.hw, self.trace, self.fidelity, self.timed, details)

    def _host(self, env: simpy.Environment, launches: simpy.Store,
              finished: dict[int, simpy.Event]):
        """The host dispatches the step's ops one after another, each at its framework cost,
        and queues their kernels, each ready to launch its full dispatch time after the op's
        call. It runs ahead of the GPU except where it reads a result (`host_waits`: an
        `.item()`, a branch on a tensor): there it waits for the GPU to finish that op, and the
        GPU then waits for the next ops' dispatch."""
        eager = self.trace.eager
        for op in self.trace.ops:
            called = env.now
            yield env.timeout(issue_s(op, eager))
            yield launches.put((op, called + dispatch_s(op, eager)))
            if op.host_waits:
                yield finished[op.index]

    def _kernel_stream(self, env: simpy.Environment):
        launches = simpy.Store(env)
        finished = {op.index: env.event() for op in self.trace.ops if op.host_waits}
        env.process(self._host(env, launches, finished))
        bar = None
        if self.progress:
            from tqdm import tqdm
            bar = tqdm(total=len(self.trace.ops), unit="op", delay=2.0, leave=False,
                       desc=f"replay ({self.fidelity})")
        for _ in self.trace.ops:
            idle_from = env.now
            op, ready = yield launches.get()  # the GPU waits here when the host is behind
            yield env.timeout(max(0.0, ready - env.now) + self.launch_s)
            idle_s = env.now - idle_from
            self.clock.idle(idle_s)
            kc = kernel_compute(self.hw, op, clock_scale=1.0)
            # the clock sinks as the SMs stay busy; a convolution's transforms through DRAM
            # (KernelCompute.dram_s) do not run on that clock
            on_sms_s = kc.time_s - kc.dram_s
            stretch = self.clock.stretch(on_sms_s) / on_sms_s if on_sms_s > 0 else 1.0
            compute_s = kc.dram_s + on_sms_s * stretch
            fixed_s = kc.dram_s + (kc.fixed_s - kc.dram_s) * stretch
            demand = self.dram_demand(op, compute_s)
            sms = env.timeout(demand.on_chip_s)
            dram = env.process(self._dram(env, demand))
            yield sms & dram
            service: Service = dram.value
            memory_s = service.span_ck * self.tck_s
            traffic = demand.traffic
            self.clock.busy(env.now - idle_from - idle_s)
            bound = _bound(compute_s, memory_s, demand.l2_s, idle_s, traffic.dram_bytes,
                           self.hw.peak_bandwidth_Bps, self.slack_s)
            self.timed.append(OpTime(op, compute_s, memory_s, kc.ceiling.key, bound,
                                     demand.l2_s, idle_s, traffic.dram_bytes))
            self.detail.append(OpReplay(traffic, service, kc.tile_efficiency,
                                        kc.wave_efficiency,
                                        self.memory.shares(demand.requests, demand.key),
                                        kc.time_s, fixed_s))
            if op.host_waits:
                finished[op.index].succeed()
            if bar is not None:
                bar.update()
        if bar is not None:
            bar.close()

    def dram_demand(self, op: Op, compute_s: float | None = None) -> DramDemand:
        """The op's DRAM requests after the L2 (whose state it advances: call it for every op,
        in order) and the SMs' pace. `compute_s`: the op's arithmetic time when known."""
        if compute_s is None:
            compute_s = kernel_compute(self.hw, op).time_s
        traffic = self.l2.filter(op)
        l2_s = traffic.l2_bytes / self.l2_Bps
        reqs = OpRequests(op.index, traffic, self.placement.address, self.capacity,
                          op.list_length, self.ecc_base)
        key = traffic_shape(op, traffic)
        on_chip_s = max(compute_s, l2_s)
        return DramDemand(traffic, reqs, compute_s, l2_s, on_chip_s, on_chip_s / self.tck_s, key)

    def _dram(self, env: simpy.Environment, demand: DramDemand):
        """The L2's misses and write-backs through the GDDR6 engine, paced by the SMs."""
        start_ck = math.ceil(env.now / self.tck_s)
        service = self.memory.serve(demand.requests, start_ck, demand.pace_ck, demand.key)
        yield env.timeout(service.span_ck * self.tck_s)
        return service


def traffic_shape(op: Op, traffic: OpTraffic) -> tuple:
    """What ops must have in common to share DRAM results (`sampled` windows): kind, and per
    access its pattern (and a gather's run), DRAM bytes, direction and the first of the op's
    accesses to the same storage. The last because an op that writes in place the rows it reads
    is served differently (Adam's in-place steps about 5 % faster on the A40) from one of the
    same sizes that writes elsewhere."""
    first: dict[int, int] = {}
    return (op.kind, tuple(
        (a.access.pattern, a.access.run_bytes, a.dram_bytes, a.is_write,
         first.setdefault(a.access.tensor.storage.id, i))
        for i, a in enumerate(traffic.accesses)))


def replay(trace: Trace, hw: Hardware, fidelity: str = "sampled",
           progress: bool = False, dram_memo: dict | None = None,
           placement: Placement | None = None, share_shapes: bool = True,
           initial_heat: float = 1.0) -> StepEstimate:
    """One step replayed. `dram_memo`: a dict to keep `sampled` DRAM results in for later
    replays on the same memory system (a sweep's points); the results do not change with it,
    only the engine's totals (`ReplayDetails.dram`) then cover fewer requests. `placement`:
    the trace's, when already worked out. `share_shapes`: `sampled` ops of one traffic shape
    share windows (SampledMemory). `initial_heat`: the SM clock's state as the step starts
    (gpu/clocks.py): 1, hot, for a step among many; 0 for one run after an idle pause."""
    if fidelity == "analytic":
        return estimate(trace, hw)
    return Replay(trace, hw, fidelity, progress, dram_memo, placement, share_shapes,
                  initial_heat).run()
