"""The replay: ops through the compute model, the L2 and the GDDR6 engine. Invariants, not
figures: fidelity against real cards is benchmarks/stream_fidelity.py's job."""

import dataclasses
import math

import numpy as np
import pytest

from simulator.config.hardware import load_hardware
from simulator.config.organization import ACCESS_BYTES
from simulator.estimate import BOUNDS
from simulator.gpu.clocks import clocks
from simulator.gpu.compute import (
    GemmShape,
    kernel_compute,
    launch_overhead_s,
    tile_plan,
)
from simulator.gpu.l2 import L2Cache
from simulator.pipeline import analyze, load_step
from simulator.replay import replay
from simulator.replay.traffic import OpRequests, RequestScratch
from simulator.workload.allocator import place
from simulator.workload.trace import Access, Category, Op, Pattern, Phase, Tensor, Unit

# an op as SampledMemory sees it, where a stand-in replaces the engine's windows
_StubOp = dataclasses.make_dataclass("Op", ["count", "identity", ("scattered", bool, True)])


@pytest.fixture(scope="module")
def cnn():
    return load_step("cnn")[1]


@pytest.fixture(scope="module")
def t4():
    return load_hardware("t4")


@pytest.fixture(scope="module")
def cnn_cycle(cnn, t4):
    return replay(cnn, t4, "cycle")


@pytest.fixture(scope="module")
def cnn_sampled(cnn, t4):
    return replay(cnn, t4, "sampled")


def _tensor(i, n, dtype="fp32", cat=Category.ACTIVATION):
    return Tensor(i, f"t{i}", (n,), dtype, cat)


def _op(i, reads, writes, kind="elementwise", flops=0):
    return Op(i, f"op{i}", kind, Phase.FORWARD, flops, tuple(Access(t, t.nbytes) for t in reads),
              tuple(Access(t, t.nbytes) for t in writes), "fp32", Unit.VECTOR)


def test_every_op_obeys_the_ceilings(cnn_cycle, t4):
    peak = t4.peak_bandwidth_Bps
    for o in cnn_cycle.ops:
        assert o.bound in BOUNDS
        assert o.time_s == pytest.approx(o.launch_s + max(o.compute_s, o.memory_s, o.l2_s))
        # the DRAM never moves an op's bytes faster than the bus can
        assert o.bytes_to_dram <= o.memory_s * peak * (1 + 1e-9) + ACCESS_BYTES
        assert o.compute_s >= o.op.flops / (max(v for v in t4.peak_tflops.values() if v) * 1e12)
    assert cnn_cycle.step_time_s == pytest.approx(sum(o.time_s for o in cnn_cycle.ops))
    assert cnn_cycle.replay.error_bound_s == 0


def test_sampled_tracks_cycle(cnn_cycle, cnn_sampled):
    """The bar is 2 % on step time for every shipped workload; the CNN is the one small
    enough to run at cycle fidelity in a test (benchmarks/replay_speed.py measures the rest)."""
    assert cnn_sampled.step_time_s == pytest.approx(cnn_cycle.step_time_s, rel=0.02)
    ties = 0
    for a, b in zip(cnn_cycle.ops, cnn_sampled.ops, strict=True):
        # an op whose launch gap and busy time lie within 5 % of each other is bound by
        # whichever a few per cent of DRAM time tips: `sampled` serves small ops from an idle
        # memory system (pool2's 614 kB of writes take 1.94 us in the step at `cycle`, 2.03 us
        # from idle, against a 2.0 us launch gap)
        tie = any(_near_tie(o) for o in (a, b))
        ties += tie
        assert a.bound == b.bound or a.op.phase is Phase.OPTIMIZER or tie
        # the clock each kernel runs at follows the step's earlier busy and idle times, which
        # the two fidelities time a little differently (gpu/clocks.py)
        assert a.compute_s == pytest.approx(b.compute_s, rel=1e-3)
        assert a.dram_bytes == b.dram_bytes
    assert ties <= len(cnn_cycle.ops) // 10


def _near_tie(o, within=0.05):
    busy = max(o.compute_s, o.memory_s, o.l2_s)
    return abs(o.launch_s - busy) <= within * max(o.launch_s, busy)


@pytest.mark.parametrize("card", ["t4", "l4"])
def test_sampled_step_lies_within_its_bound_of_cycle_on_the_seed_transformer(card):
    """The seed Transformer's step at both replay fidelities (about half a minute at `cycle`):
    `sampled` within its reported 95 % bound of `cycle`. On the T4 it had landed 0.23 % below
    against a 0.17 % bound while hidden ops ended without their writes' drain and the
    embedding gradients' windows were measured before their scattered writes clogged the
    queues; on the L4 0.26 % below against 0.20 %, while write streams left per-bank
    refreshes owed (hundreds per channel) to be paid at their op's end, where no window saw."""
    step = load_step("transformer")[1]
    hw = load_hardware(card)
    cycle = replay(step, hw, "cycle")
    sampled = replay(step, hw, "sampled")
    assert 0 < sampled.replay.error_bound_s < 0.005 * cycle.step_time_s
    assert abs(sampled.step_time_s - cycle.step_time_s) <= sampled.replay.error_bound_s


def test_sampled_windows_do_not_fall_in_step_with_a_repeating_pattern(t4):
    """An op whose DRAM rate drops over half of every eighth of its progress, as bank conflicts
    come and go along gigabyte arrays with the address bits the hash folds; the engine is
    replaced by that rate pattern, so the exact time is known. Wherever the drops sit (64
    phases), the estimate lands within its reported 95 % bound of the exact time nearly as
    often as a 95 % interval should, and the bound stays small. Windows at fixed fractions of
    the op (the middles of its quarters) all saw the same rate: their bound was 0 and always
    missed."""
    from simulator.dram.system import MemorySystem
    from simulator.replay.memory import SampledMemory

    ms = MemorySystem.from_hardware(t4)
    nothing = ms.counters() - ms.counters()
    within = 0
    for phase in np.arange(64) / 64:
        class Sampler(SampledMemory):
            def _measure(self, reqs, centre, measured, warm=0, phase=phase):
                rate = 6.0 if (centre * 8 - phase) % 1 < 0.5 else 7.0  # requests per CK
                return rate, self._window_requests, 0.0, nothing

        sampler = Sampler(ms)
        n = 64 * sampler._window_requests
        op = _StubOp(n, ("op",))
        got = sampler.serve(op, 0, 0.0, "op")
        exact = n * (0.5 / 6.0 + 0.5 / 7.0)
        within += abs(got.span_ck - exact) <= got.error_ck + 1e-9 * exact
        assert got.error_ck < 0.1 * exact
    assert within >= 0.8 * 64


def test_windows_warm_up_until_the_rate_of_the_same_requests_settles(t4):
    """A stand-in engine where the measured requests run faster after a queue-full's warm-up
    than after a longer one (a minority of requests that FR-FCFS passes over clogs the queues
    slowly): the sampler lengthens the warm-up until four times as long changes nothing, and
    every window then takes that warm-up, so the op's time is the settled rate's. Only ops
    with a scattered (gather or strided) access are checked."""
    from simulator.dram.system import MemorySystem
    from simulator.replay.memory import WARM_STEPS, SampledMemory

    ms = MemorySystem.from_hardware(t4)
    nothing = ms.counters() - ms.counters()
    warm_ups = []

    class Sampler(SampledMemory):
        def _measure(self, reqs, centre, measured, warm=0):
            warm = warm or self._warm
            warm_ups.append(warm)
            rate = 8.0 if warm < WARM_STEPS * self._warm else 7.0
            return rate, warm + measured + self._warm, 0.0, nothing

    sampler = Sampler(ms)
    n = 256 * sampler._window_requests
    op = _StubOp(n, ("op",))
    got = sampler.serve(op, 0, 0.0, "op")
    assert got.span_ck == pytest.approx(n / 7.0)
    settled = WARM_STEPS * sampler._warm
    assert warm_ups[:3] == [sampler._warm, settled, WARM_STEPS * settled]
    assert set(warm_ups[3:]) == {settled} and len(warm_ups) > 4
    # sequential streams alone take a queue-full's warm-up, unchecked
    warm_ups.clear()
    got = Sampler(ms).serve(_StubOp(n, ("op",), False), 0, 0.0, "op")
    assert got.span_ck == pytest.approx(n / 8.0) and set(warm_ups) == {sampler._warm}


def test_an_op_hidden_under_the_sms_pace_ends_after_its_writes_drain(t4):
    """A weight gradient whose DRAM keeps up with the SMs: its reads go first while its writes
    wait below the write buffer's watermark, so at `cycle` the op ends after its pace.
    `sampled` shows the DRAM well hidden and measures that tail on the op's last requests fed at
    its pace; without the tail it had ended with the pace (0.7 us short, with a bound of 0)."""
    from simulator.dram.system import MemorySystem
    from simulator.pipeline import Step
    from simulator.replay import Replay
    from simulator.replay.memory import CycleMemory, SampledMemory

    step = Step("workloads/transformer.json")
    rp = Replay(step.trace, t4, "sampled", placement=step.placement)
    for op in step.trace.ops:
        demand = rp.dram_demand(op)  # (in order: the L2 follows the step)
        if op.name == "decoder.3.self_attn.in_proj.grad_weight":
            break

    def memory():
        return MemorySystem.from_hardware(t4)

    sampled = SampledMemory(memory()).serve(demand.requests, 0, demand.pace_ck, demand.key)
    cycle = CycleMemory(memory()).serve(demand.requests, 0, demand.pace_ck, demand.key)
    assert sampled.simulated_requests < demand.requests.count  # not simulated in full
    assert cycle.span_ck > demand.pace_ck + 100  # the writes' drain, CK
    assert sampled.span_ck == pytest.approx(cycle.span_ck, rel=0.002)


def test_step_bound_adds_ops_that_share_a_result_and_combines_the_rest_in_quadrature():
    """Ops that share one result (the windows of their traffic shape, by default) have errors
    that move together, so their bounds add; ops measured on windows of their own are
    independent."""
    from simulator.replay import OpReplay, step_error_bound
    from simulator.replay.memory import Service

    def op(key, error_ck):
        return OpReplay(None, Service(1e6, error_ck, None, 0), 1.0, 1.0, key)

    assert step_error_bound([op("a", 3.0), op("a", 4.0), op("b", 24.0)]) == pytest.approx(25.0)
    assert step_error_bound([op("a", 3.0), op("b", 4.0)]) == pytest.approx(5.0)
    assert step_error_bound([op("a", 0.0)]) == 0.0


def test_ops_of_one_shape_share_windows_unless_each_takes_its_own(t4):
    """Two ops of one traffic shape whose tensors sit apart meet different rates (here a
    stand-in engine: the rate follows the op's requests). Shared, the second takes the first
    one's windows and simulates nothing; with its own windows it gets its own rate."""
    from simulator.dram.system import MemorySystem
    from simulator.replay.memory import SampledMemory

    ms = MemorySystem.from_hardware(t4)
    nothing = ms.counters() - ms.counters()

    class Sampler(SampledMemory):
        def _measure(self, reqs, centre, measured, warm=0):
            return (6.0 if reqs.identity == ("a",) else 7.0), self._window_requests, 0.0, nothing

    op = _StubOp
    for share in (True, False):
        sampler = Sampler(ms, share_shapes=share)
        n = 64 * sampler._window_requests
        a = sampler.serve(op(n, ("a",)), 0, 0.0, "shape")
        b = sampler.serve(op(n, ("b",)), 0, 0.0, "shape")
        assert a.span_ck == pytest.approx(n / 6.0)
        if share:
            assert b.span_ck == a.span_ck and b.simulated_requests == 0
        else:
            assert b.span_ck == pytest.approx(n / 7.0) and b.simulated_requests > 0


def test_an_in_place_op_does_not_take_the_shape_of_one_writing_elsewhere():
    """Ops of one kind and sizes share `sampled` windows, but one that writes in place the
    rows it reads meets the DRAM differently from one that writes another tensor."""
    from simulator.replay import traffic_shape

    a, b, c = (_tensor(i, 1 << 16) for i in range(3))
    l2 = L2Cache(1 << 10)  # far smaller than the tensors: every byte reaches the DRAM
    ops = [_op(1, [a], [b]), _op(2, [b], [a]), _op(3, [c], [c])]
    shapes = [traffic_shape(op, l2.filter(op)) for op in ops]
    assert shapes[0] == shapes[1]
    assert shapes[2] != shapes[0]


def test_replay_is_deterministic(cnn, t4, cnn_sampled):
    again = replay(cnn, t4, "sampled")
    assert [o.time_s for o in again.ops] == [o.time_s for o in cnn_sampled.ops]


def test_faster_memory_never_slows_the_step(cnn, t4, cnn_sampled):
    mem = dataclasses.replace(t4.memory, data_rate_gbps=2 * t4.memory.data_rate_gbps)
    fast = replay(cnn, dataclasses.replace(t4, memory=mem), "sampled")
    assert fast.step_time_s < cnn_sampled.step_time_s
    dram = [o for o in cnn_sampled.ops if o.bound == "dram_bandwidth"]
    assert dram
    faster = {o.op.index: o for o in fast.ops}
    for o in dram:
        assert faster[o.op.index].memory_s < o.memory_s


def test_analytic_rides_along(cnn_sampled, cnn, t4):
    from simulator.estimate import estimate

    assert cnn_sampled.analytic.step_time_s == estimate(cnn, t4).step_time_s
    assert replay(cnn, t4, "analytic").replay is None


def test_bottleneck_summary(cnn_sampled):
    b = cnn_sampled.replay.bottlenecks
    assert sum(b.time_by_bound.values()) == pytest.approx(cnn_sampled.step_time_s)
    assert 0 < b.memory_bound_share < 1
    assert b.best_change == min(b.what_if, key=b.what_if.get)
    assert all(v <= cnn_sampled.step_time_s * (1 + 1e-9) for v in b.what_if.values())
    assert 0 < b.dram_busy_share <= 1
    assert sum(b.dram_lost_by_cause.values()) == pytest.approx(1 - b.dram_busy_share, abs=1e-6)
    # each resource that bounds some ops buys time when it gets faster; compute-bound ops had
    # their DRAM paced by the SMs, which must not hide what faster SMs would buy
    assert b.time_by_bound["compute"] > 0 and b.time_by_bound["dram_bandwidth"] > 0
    assert b.what_if["compute_+25%"] < cnn_sampled.step_time_s
    assert b.what_if["dram_bandwidth_+25%"] < cnn_sampled.step_time_s


def test_launch_bound_time_is_not_memory_bound(cnn_sampled, cnn, t4):
    """A kernel smaller than its launch gap waits on the launch, not on memory: the memory-bound
    share counts DRAM- and L2-bound ops only (it had counted every op not bound by compute, so
    the CNN's optimizer, launch-bound on a card with long gaps, read as memory-bound), and a
    phase is bound by the class (memory, compute, launch) that holds most of its time."""
    from simulator.estimate import BOUND_CLASSES, MEMORY_BOUNDS, bound_class
    from simulator.report.text import bottleneck_lines, phase_rows

    def class_times(ops):
        times = dict.fromkeys(BOUND_CLASSES, 0.0)
        for o in ops:
            times[bound_class(o.bound)] += o.time_s
        return times

    slow_launch = dataclasses.replace(t4, kernel_launch_overhead_us=50.0)
    gappy = replay(cnn, slow_launch, "sampled")
    for est in (cnn_sampled, gappy):
        b = est.replay.bottlenecks
        step = est.step_time_s
        assert b.time_by_bound["launch"] > 0
        memory = sum(o.time_s for o in est.ops if o.bound in MEMORY_BOUNDS)
        assert b.memory_bound_share == pytest.approx(memory / step)
        assert est.memory_bound_time_s == pytest.approx(memory)
        for p in est.phases():
            times = class_times(o for o in est.ops if o.op.phase is p.phase)
            assert p.bound == max(times, key=times.get)
            assert p.launch_bound_time_s == pytest.approx(times["launch"])
        times = class_times(est.ops)
        assert est.bound == max(times, key=times.get)
    # 50 us gaps before 37 kernels of a few us each: the step waits on launches
    assert gappy.bound == "launch"
    assert gappy.replay.bottlenecks.memory_bound_share < 0.2
    assert any(row[-1].startswith("launch (") for row in phase_rows(gappy)[1:-1])
    assert any("launch-bound share of step time" in line for line in bottleneck_lines(gappy))


def test_what_if_estimates_agree_with_simulating_the_change(cnn_sampled, cnn):
    """The summary estimates each change op by op from the step it has; simulating the
    changed card must agree. Compute +25 % (the CNN on the T4 runs on fp32 alone): within
    3 % (2.0 % measured): the estimate reruns the host-GPU timeline with the shorter kernels,
    but not the SM clock's response to the longer idle gaps they leave (gpu/clocks.py).
    A 25 % faster data rate also changes the DRAM's timings in CK (analog ones are kept in
    ns) and the L2 bandwidth estimated from the DRAM peak, which the estimate does not see:
    within 3 % (0.5 % measured here, 1.0 % on the transformer)."""
    from simulator.sweep.spec import build

    b = cnn_sampled.replay.bottlenecks
    spec = build("what-if", "t4", ["cnn"], {"fp32": [8.14 * 1.25]}, "sampled", "test")
    faster_sms = spec.points()[0].hardware
    assert replay(cnn, faster_sms, "sampled").step_time_s == pytest.approx(
        b.what_if["compute_+25%"], rel=0.03)
    spec = build("what-if", "t4", ["cnn"], {"data_rate_gbps": [12.5]}, "sampled", "test")
    faster_dram = replay(cnn, spec.points()[0].hardware, "sampled").step_time_s
    assert faster_dram == pytest.approx(b.what_if["dram_bandwidth_+25%"], rel=0.03)


def test_hbm_cards_take_the_analytic_roofline():
    r = analyze("cnn", "a100-40gb")
    assert r.estimate.fidelity == "analytic"
    from simulator.errors import InputError

    with pytest.raises(InputError, match="GDDR6"):
        analyze("cnn", "a100-40gb", fidelity="sampled")


# --- the L2 -----------------------------------------------------------------------------------

def test_l2_reuse_between_consecutive_ops():
    small, big = _tensor(0, 1 << 16), _tensor(1, 1 << 22)   # 256 KiB and 16 MiB
    out1, out2 = _tensor(2, 1 << 16), _tensor(3, 1 << 22)
    l2 = L2Cache(4 << 20)
    assert l2.filter(_op(0, [small], [out1])).dram_read_bytes == small.nbytes  # cold
    t = l2.filter(_op(1, [out1], [_tensor(4, 1 << 16)]))
    assert t.dram_read_bytes == 0                  # just written: still in the L2
    assert t.dram_write_bytes == out1.nbytes       # writes reach DRAM once each
    l2.filter(_op(2, [big], [out2]))               # streams 32 MiB through: evicts the rest
    assert l2.filter(_op(3, [small], [])).dram_read_bytes == small.nbytes
    assert l2.filter(_op(4, [big], [])).dram_read_bytes == big.nbytes  # too big to stay


def test_the_l2_writes_a_resident_storage_back_once_however_often_it_is_rewritten():
    """Write-back: a kernel called again on the buffer the allocator hands back (or an
    in-place op) dirties lines already dirty; the DRAM sees them once, until they leave."""
    x, y, big = _tensor(0, 1 << 16), _tensor(1, 1 << 16), _tensor(2, 1 << 22)
    l2 = L2Cache(4 << 20)
    assert l2.filter(_op(0, [x], [y])).dram_write_bytes == y.nbytes   # dirtied: once
    again = l2.filter(_op(1, [x], [y]))
    assert again.dram_write_bytes == 0 and again.dram_read_bytes == 0
    l2.filter(_op(2, [big], []))                   # streams through: y written back, gone
    assert l2.filter(_op(3, [x], [y])).dram_write_bytes == y.nbytes
    clean = L2Cache(4 << 20)
    clean.filter(_op(0, [], [x]))
    clean.filter(_op(1, [y], []))                  # y read, not written: clean
    assert clean.filter(_op(2, [x], [y])).dram_write_bytes == y.nbytes



def test_an_ops_own_writes_evict_the_input_it_has_not_read_yet():
    """LRU with write-allocate: an elementwise op reading a resident 3 MiB input and writing
    3 MiB on a 4 MiB cache hits only until its writes have used the 1 MiB the rest of the
    cache held, a third of the input; with room for both it hits all."""
    x, y = _tensor(0, 3 << 18), _tensor(1, 3 << 18)    # 3 MiB each
    l2 = L2Cache(4 << 20)
    l2.filter(_op(0, [], [x]))                          # x written: resident
    t = l2.filter(_op(1, [x], [y]))
    assert t.dram_read_bytes == pytest.approx(x.nbytes * 2 / 3, rel=1e-6)
    roomy = L2Cache(8 << 20)
    roomy.filter(_op(0, [], [x]))
    assert roomy.filter(_op(1, [x], [y])).dram_read_bytes == 0


def test_an_in_place_op_reads_each_line_before_it_writes_it():
    """Partly resident, the misses are the tail of the access in addresses as in time: no
    line is written before the op has read it (the engine would forward such a read from
    the queued write and the op would read for free)."""
    x = _tensor(0, 3 << 18)
    l2 = L2Cache(4 << 20)
    l2.filter(_op(0, [], [x]))
    op = Op(1, "op1", "elementwise", Phase.FORWARD, 0, (Access(x, x.nbytes),),
            (Access(x, x.nbytes),), "fp32", Unit.VECTOR)
    traffic = l2.filter(op)
    assert 0 < traffic.dram_read_bytes < x.nbytes
    reqs = OpRequests(1, traffic, np.zeros(1, np.int64), 1 << 30).between(0.0, 1.0)
    first_write = {}
    for i, (addr, w) in enumerate(zip(reqs.address.tolist(), reqs.is_write.tolist(),
                                      strict=True)):
        if w:
            first_write.setdefault(addr, i)
        else:
            assert addr not in first_write, "a line read after its write"

def test_a_row_kernels_second_pass_misses_as_the_rows_in_flight_outgrow_the_l2(t4):
    """Layer norm reads each row twice, a block of 128 threads per row: on the T4 (40 SMs of
    8 such blocks) 320 rows are in flight. Rows of 1 KB (320 KB against 4 MB) are found again;
    rows of 64 KB (20 MB) are all read again from DRAM; between, a share. A tensor the L2
    holds whole is found again whatever its rows; a card whose occupancy is not known (no
    blocks_in_flight) finds them too. What the later passes fetch again crosses the L2; what
    they find costs no L2 time."""
    from simulator.gpu.l2 import l2_cache, row_reread_miss

    def norm_op(cols, rows):
        x = Tensor(0, "x", (rows, cols), "fp32", Category.ACTIVATION)
        y = Tensor(1, "y", (rows, cols), "fp32", Category.ACTIVATION)
        return Op(0, "ln", "norm", Phase.FORWARD, 0,
                  (Access(x, x.nbytes, passes=2, block_threads=128),), (Access(y, y.nbytes),),
                  "fp32", Unit.VECTOR)

    short, long_ = norm_op(256, 1 << 16), norm_op(16384, 1 << 10)   # 64 MiB each
    assert l2_cache(t4).filter(short).dram_read_bytes == 64 << 20
    assert l2_cache(t4).filter(long_).dram_read_bytes == 2 * (64 << 20)
    middle = norm_op(4096, 1 << 12)                                 # 320 rows of 16 KB
    share = row_reread_miss(320 * 16384, 4 << 20)
    assert 0 < share < 1
    assert l2_cache(t4).filter(middle).dram_read_bytes == pytest.approx(
        (64 << 20) * (1 + share), rel=1e-6)
    assert l2_cache(t4).filter(long_).l2_bytes == 3 * (64 << 20)     # two reads, one write
    assert l2_cache(t4).filter(short).l2_bytes == 2 * (64 << 20)     # found again: no more
    assert L2Cache(4 << 20).filter(long_).dram_read_bytes == 64 << 20  # occupancy unknown
    small = norm_op(16384, 8)                                         # 512 KB: held whole
    assert l2_cache(t4).filter(small).dram_read_bytes == small.reads[0].nbytes
    assert [row_reread_miss(w, 1 << 20) for w in (0, 1 << 18, 1 << 24)] == [0.0, 0.0, 1.0]


def test_resident_blocks_follow_the_compute_capability():
    """Turing holds 1024 threads an SM, Ada 1536, within 16 and 24 blocks; AMD's chips are not
    in the table."""
    from simulator.gpu.occupancy import resident_blocks

    t4, l4 = load_hardware("t4"), load_hardware("l4")
    assert resident_blocks(t4, 128) == 40 * 8 and resident_blocks(t4, 32) == 40 * 16
    assert resident_blocks(l4, 128) == 58 * 12 and resident_blocks(l4, 512) == 58 * 3
    assert resident_blocks(load_hardware("rx-7900-xtx"), 128) is None


def test_tiled_gemm_rereads_operands_that_do_not_fit():
    a, b, c = _tensor(0, 4096 * 4096), _tensor(1, 4096 * 4096), _tensor(2, 4096 * 4096)
    gemm = _op(0, [a, b], [c], kind="matmul", flops=2 * 4096 ** 3)
    small = L2Cache(1 << 20).filter(gemm).dram_read_bytes
    large = L2Cache(1 << 30).filter(gemm).dram_read_bytes
    assert large == a.nbytes + b.nbytes
    block = math.sqrt((1 << 20) / 12)
    assert small == pytest.approx(2 * 4096 ** 3 * 4 / block, rel=0.01)


# --- the compute model ------------------------------------------------------------------------

def test_tile_and_wave_quantization():
    # 41 full tiles on 40 SMs: two waves, the second nearly empty
    plan = tile_plan(GemmShape(1, 128 * 41, 128, 4096), (128, 128), 40)
    assert plan.tile_efficiency == 1 and plan.wave_efficiency == pytest.approx(41 / 80)
    # a ragged edge: 129 rows pad to two tiles
    plan = tile_plan(GemmShape(1, 129, 128, 4096), (128, 128), None)
    assert plan.tile_efficiency == pytest.approx(129 / 256)
    # too few tiles: K is split to fill the SMs, unless the kernel does not split
    plan = tile_plan(GemmShape(1, 128, 128, 128 * 40), (128, 128), 40)
    assert plan.wave_efficiency == 1 and plan.split_k == 40
    plan = tile_plan(GemmShape(1, 128, 128, 128 * 40), (128, 128), 40, split_k=False)
    assert plan.split_k == 1 and plan.wave_efficiency == pytest.approx(1 / 40)
    # nor does a batched product's (cuBLAS's batched kernels: the batch is the grid's depth)
    plan = tile_plan(GemmShape(9, 128, 128, 128 * 40), (128, 128), 40)
    assert plan.split_k == 1 and plan.wave_efficiency == pytest.approx(9 / 40)


def test_kernel_compute_and_launch(cnn, t4):
    for op in cnn.ops:
        kc = kernel_compute(t4, op)
        assert 0 < kc.tile_efficiency <= 1 and 0 < kc.wave_efficiency <= 1
        assert 0 < kc.library_efficiency <= 1
        if op.kind == "conv":  # cuDNN's algorithms: their own GEMMs (test_compute_model.py)
            continue
        # the sustained clock's peak, less tile, wave and the library's own losses
        assert kc.time_s == pytest.approx(op.flops / (
            kc.ceiling.flops_per_s * clocks(t4).scale * kc.tile_efficiency *
            kc.wave_efficiency * kc.library_efficiency))
    assert launch_overhead_s(t4) > 0
    assert launch_overhead_s(dataclasses.replace(t4, kernel_launch_overhead_us=7.0)) == 7e-6


# --- the traffic ------------------------------------------------------------------------------

def test_requests_cover_each_tensor_once(cnn, t4):
    placement = place(cnn)
    l2 = L2Cache(0)
    cap = 16 << 30
    for op in cnn.ops[:12]:
        traffic = l2.filter(op)
        reqs = OpRequests(op.index, traffic, placement.address, cap)
        r = reqs.between(0.0, 1.0)
        assert len(r) == reqs.count == sum(-(-a.dram_bytes // 32) for a in traffic.accesses)
        assert np.all(np.diff(r.progress) >= 0) and (r.address % 32 == 0).all()
        halves = [reqs.between(0, 0.5), reqs.between(0.5, 1.0)]
        assert sum(len(h) for h in halves) == len(r)
        for a in traffic.accesses:
            if a.access.pattern is Pattern.SEQUENTIAL and a.dram_bytes == a.access.nbytes:
                base = int(placement.address[a.access.tensor.storage.id])
                mine = r.address[(r.address >= base) & (r.address < base + a.dram_bytes)]
                assert len(np.unique(mine)) >= a.dram_bytes // 32


def test_request_addresses_follow_each_pattern():
    """Sequential accesses run from the tensor's start, strided ones touch 128 B lines spread
    evenly over it, gathers runs of lines (a line where the run is not stated) at hashed places
    (seeded by op and tensor). Written out per request against the compiled generator, which
    gives the same requests into kept buffers."""
    ts = [_tensor(i, 1 << 16) for i in range(5)]  # 256 KiB each, a MiB apart
    reads = (Access(ts[0], ts[0].nbytes), Access(ts[1], ts[1].nbytes // 8, Pattern.STRIDED),
             Access(ts[2], ts[2].nbytes // 4, Pattern.GATHER),
             Access(ts[4], ts[4].nbytes // 4, Pattern.GATHER, 3000))  # rows of 24 lines
    op = Op(7, "op7", "embedding", Phase.FORWARD, 0, reads, (Access(ts[3], ts[3].nbytes),),
            "fp32", Unit.VECTOR)
    traffic = L2Cache(0).filter(op)
    address = np.arange(5, dtype=np.int64) * (1 << 20)
    reqs = OpRequests(op.index, traffic, address, 1 << 30)
    r = reqs.between(0, 1)
    for a in traffic.accesses:
        storage = a.access.tensor.storage
        base, size, n = int(address[storage.id]), storage.nbytes, -(-a.dram_bytes // 32)
        want = []
        for k in range(n):
            line, sector = divmod(k, 4)
            if a.access.pattern is Pattern.SEQUENTIAL:
                offset = k * 32 % size
            elif a.access.pattern is Pattern.STRIDED:
                offset = line * (size // 128) // -(-n // 4) * 128 + sector * 32
            else:
                seed = (op.index << 20) ^ storage.id
                run = -(-a.access.run_bytes // 128) or 1
                place = (line // run + seed) * 0x9E3779B1 % (size // 128 // run)
                offset = (place * run + line % run) * 128 + sector * 32
            want.append(base + offset % size)
        mine = r.address[(r.address >= base) & (r.address < base + size)]
        assert sorted(mine.tolist()) == sorted(want)
        if a.access.run_bytes:  # each row read whole at one place: 24 lines a run
            runs = np.unique((mine - base) // (24 * 128))
            assert len(runs) == -(-n // (4 * 24)) and len(np.unique(mine)) == n
    scratch = RequestScratch()
    for p0, p1 in [(0, 0.5), (0.5, 1), (0.2, 0.9), (0, 1)]:
        kept, fresh = reqs.between(p0, p1, scratch), reqs.between(p0, p1)
        for field in ("address", "is_write", "progress"):
            assert np.array_equal(getattr(kept, field), getattr(fresh, field))


def test_a_one_tensor_kernel_streams_operands_of_one_shape_together():
    """An optimizer's single-tensor kernel (the for_loop path) reads a parameter, its
    gradient and its state and writes the parameter, all of one shape: its operands stream
    side by side over the whole kernel, not as two lists of two walked one tensor after the
    other (which the shapes alone would suggest)."""
    ts = [_tensor(i, 1 << 14) for i in range(3)]
    op = Op(0, "adam.step", "optimizer", Phase.OPTIMIZER, 0,
            tuple(Access(t, t.nbytes) for t in ts), (Access(ts[0], ts[0].nbytes),), "fp32",
            Unit.VECTOR, list_length=1)
    traffic = L2Cache(1 << 20).filter(op)
    address = np.arange(3, dtype=np.int64) * (1 << 20)
    r = OpRequests(0, traffic, address, 1 << 30, op.list_length).between(0, 0.25)
    tensor = r.address // (1 << 20)
    assert set(tensor.tolist()) == {0, 1, 2} and r.is_write.any()  # all four, from the start


def test_a_window_holds_requests_that_bunch_in_the_ops_tail(t4):
    """A two-tensor list whose first tensor the L2 holds: the op's DRAM requests are all in
    the second half of its progress, and a window centred in the first half still measures
    the op's requests (it found none and the step failed)."""
    from simulator.dram.system import MemorySystem
    from simulator.replay.memory import SampledMemory

    a, b = _tensor(0, 1 << 22), _tensor(1, 1 << 22)  # 16 MiB each
    op = Op(0, "foreach.norm", "optimizer", Phase.OPTIMIZER, 0,
            (Access(a, a.nbytes), Access(b, b.nbytes)), (), "fp32", Unit.VECTOR,
            list_length=2)
    l2 = L2Cache(32 << 20)
    l2.filter(_op(1, [], [a]))                          # a written: resident
    traffic = l2.filter(op)
    assert traffic.dram_read_bytes == b.nbytes
    reqs = OpRequests(0, traffic, np.array([0, 1 << 26], np.int64), 1 << 30, 2)
    assert reqs.between(0.0, 0.5).address.size == 0
    got = SampledMemory(MemorySystem.from_hardware(t4)).serve(reqs, 0, 0.0, "op")
    peak = t4.memory.peak_bandwidth_GBps * 1e9
    seconds = got.span_ck * MemorySystem.from_hardware(t4).tck_ns * 1e-9
    assert b.nbytes / peak < seconds < 2 * b.nbytes / peak


def test_foreach_lists_walk_in_step():
    """A multi-tensor kernel reads element i of every list at the same progress, and an
    in-place one reads each element before writing it back, whatever the L2 caught."""
    ts = [_tensor(i, 1 << 14) for i in range(6)]  # lists (t0, t1, t2) and (t3, t4, t5)
    op = _op(0, ts, ts[:3])
    l2 = L2Cache(1 << 20)
    l2.filter(_op(1, [], [ts[2]]))               # t2 resident: its read is an L2 hit
    traffic = l2.filter(op)
    address = np.arange(6, dtype=np.int64) * (1 << 20)
    r = OpRequests(0, traffic, address, 1 << 30).between(0, 1)
    first_write = {}
    for i, (a, w) in enumerate(zip(r.address, r.is_write, strict=True)):
        if w:
            first_write.setdefault(int(a), i)
    for i, (a, w) in enumerate(zip(r.address, r.is_write, strict=True)):
        if not w and int(a) in first_write:
            assert i < first_write[int(a)]
    # t0's and t3's first requests come together, before anything of t1 or t4
    tensor = r.address // (1 << 20)
    assert set(tensor[:8]) == {0, 3}


def test_a_measured_l2_bandwidth_wins_over_the_estimate():
    """The A40's file states what gpu-benches measured of its L2; the T4's states none and
    takes 6 x its DRAM peak."""
    from simulator.gpu.l2 import ESTIMATED_L2_TO_DRAM_BANDWIDTH, l2_bandwidth_Bps

    a40, t4 = load_hardware("a40"), load_hardware("t4")
    assert l2_bandwidth_Bps(a40) == (2430e9, True)
    assert l2_bandwidth_Bps(t4) == (ESTIMATED_L2_TO_DRAM_BANDWIDTH * t4.peak_bandwidth_Bps, False)
