"""Invariants of the channel engine on random traces (hypothesis), and its API contract."""

import dataclasses

import numpy as np
import pytest
from dram_helpers import VALIDATION, validation_system
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.config.controller import GPU_CONTROLLER, ControllerConfig
from simulator.config.hardware import load_hardware
from simulator.dram import commands as C
from simulator.dram import engine as E
from simulator.dram import system
from simulator.dram.checker import check_log
from simulator.dram.system import MemorySystem

HW = load_hardware(VALIDATION)


def test_engine_command_codes_match_the_rule_table():
    assert tuple(range(9)) == (E.ACT, E.PRE, E.PREA, E.RD, E.WR, E.RDA, E.WRA, E.REFAB, E.REFPB)
    assert C.NAMES[E.REFPB] == "REFpb" and E.N_CMD == C.N_COMMANDS


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 7), st.integers(1, 8), st.data())
def test_ring_removal_keeps_the_others_in_age_order(head, n, data):
    """A buffer's ring closes a removed request's gap from the shorter side, in runs of
    adjacent slots (two where the ring wraps): the others keep their fields and age order."""
    ring = 8
    bufs = np.full((1, 3, E.N_FIELDS, ring), -1, np.int64)
    counts = np.zeros((1, 3), np.int64)
    heads = np.zeros((1, 3), np.int64)
    requests = [[10 * r + f for f in range(E.N_FIELDS)] for r in range(n)]  # oldest first
    for r, fields in enumerate(requests):
        bufs[0, E.WBUF, :, (head + r) % ring] = fields
    counts[0, E.WBUF], heads[0, E.WBUF] = n, head
    gone = data.draw(st.integers(0, n - 1))
    E._remove(bufs, counts, heads, 0, E.WBUF, (head + gone) % ring)
    h, left = heads[0, E.WBUF], requests[:gone] + requests[gone + 1:]
    assert counts[0, E.WBUF] == n - 1
    assert [bufs[0, E.WBUF, :, (h + i) % ring].tolist() for i in range(n - 1)] == left


@st.composite
def traces(draw):
    n = draw(st.integers(1, 400))
    region = draw(st.sampled_from([2**12, 2**16, 2**22, 2**30]))  # how often rows conflict
    addr = draw(st.lists(st.integers(0, region // 32 - 1), min_size=n, max_size=n))
    write = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    gaps = draw(st.lists(st.integers(0, 40), min_size=n, max_size=n))
    ctl = ControllerConfig(
        read_buffer=draw(st.sampled_from([1, 4, 32, 128])),  # 128: FR-FCFS by bank tallies
        write_buffer=draw(st.sampled_from([2, 8, 32, 128])),
        scheduler=draw(st.sampled_from(["frfcfs", "frfcfs_hit_guard", "fcfs"])),
        page_policy=draw(st.sampled_from(["open", "closed"])),
        refresh=draw(st.sampled_from(["all_bank", "per_bank"])),
        refresh_postpone=draw(st.sampled_from([0, 1, 8])),  # 0, 1: banks held for refresh
        frontend=draw(st.sampled_from(["in_order", "per_channel"])),
        mapping=HW.controller.mapping if draw(st.booleans()) else ControllerConfig().mapping)
    return (np.array(addr, np.uint64) * 32, np.array(write, np.int64),
            np.cumsum(np.array(gaps, np.int64)), ctl)


def _run(addr, write, arrival, ctl):
    ms = MemorySystem.from_hardware(HW, log_commands=20_000, controller=ctl)
    done = ms.feed(addr, write, arrival, final=True)
    return ms, done


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces())
def test_random_traces_obey_every_timing_edge(trace):
    addr, write, arrival, ctl = trace
    ms, done = _run(addr, write, arrival, ctl)
    s = ms.stats()
    assert check_log(ms.command_log(), ms.timing) == []
    assert s.requests == len(addr) and (done >= arrival).all()
    assert s.reads + s.writes == len(addr)
    assert s.bandwidth_GBps <= s.peak_bandwidth_GBps * (1 + 1e-9)
    # refresh keeps up with simulated time (a per-bank one postponed at most refresh_postpone)
    every = ms.timing.nREFI // 16 if ctl.refresh == "per_bank" else ms.timing.nREFI
    owed = ctl.refresh_postpone + 1 if ctl.refresh == "per_bank" else 1
    assert s.refreshes >= ms.org.channels * (s.cycles // every - owed)
    # reads wait at least the read latency; writes complete when their WR issues
    reads = write == 0
    forwarded = s.forwarded_reads
    slow = done[reads] - arrival[reads] >= ms.timing.nCL + ms.timing.nBL + 1
    assert slow.sum() >= reads.sum() - forwarded
    # same input, same result
    ms2, done2 = _run(addr, write, arrival, ctl)
    assert np.array_equal(done, done2) and ms2.stats().as_dict() == s.as_dict()
    assert np.array_equal(ms.command_log(), ms2.command_log())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces(), st.booleans())
def test_skipping_to_the_next_possible_command_changes_nothing(trace, at_once):
    """A channel skips from a try to the earliest cycle at which a command could issue (from
    bounds that only grow), or a request arrive, or a refresh fall due. Trying every CK cycle
    instead must issue the same commands at the same cycles. With every request arriving at
    once the buffers run deep."""
    addr, write, arrival, ctl = trace
    if at_once:
        arrival = np.zeros_like(arrival)
    skipping, done = _run(addr, write, arrival, ctl)
    every = MemorySystem.from_hardware(HW, log_commands=20_000, controller=ctl)
    every.try_every_cycle = True
    assert np.array_equal(done, every.feed(addr, write, arrival, final=True))
    assert np.array_equal(skipping.command_log(), every.command_log())
    assert skipping.stats().as_dict() == every.stats().as_dict()


@st.composite
def sparse_traces(draw):
    """Random traces with up to three long pauses (whole refresh periods of idle channels)."""
    addr, write, arrival, ctl = draw(traces())
    extra = np.zeros(len(addr), np.int64)
    pause = draw(st.sampled_from([20_000, 150_000, 1_000_000]))  # CK cycles
    for at in draw(st.lists(st.integers(0, len(addr) - 1), max_size=3)):
        extra[at:] += pause
    return addr, write, arrival + extra, ctl


def _serve_idle(addr, write, arrival, ctl, skip):
    ms = MemorySystem.from_hardware(HW, controller=ctl, skip_idle=skip)
    return ms, ms.feed(addr, write, arrival, final=True)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sparse_traces())
def test_skipping_idle_refresh_periods_changes_nothing(trace):
    """A channel idle until its next request (or until the slowest channel ends) watches one
    refresh period; if it leaves the channel as it found it, moved on by the period, whole
    periods are skipped and their commands counted. Every completion and statistic must be
    what simulating them gives."""
    addr, write, arrival, ctl = trace
    skipping, done = _serve_idle(addr, write, arrival, ctl, True)
    simulating, done2 = _serve_idle(addr, write, arrival, ctl, False)
    assert np.array_equal(done, done2)
    assert skipping.stats().as_dict() == simulating.stats().as_dict()
    assert simulating.idle_periods_skipped == 0


@pytest.mark.parametrize("frontend", ["in_order", "per_channel"])
@pytest.mark.parametrize("refresh", ["all_bank", "per_bank"])
def test_long_idle_stretches_are_skipped_not_simulated(refresh, frontend):
    """Two reads 10 million CK apart (a sparse trace): the refreshes between them are counted
    as simulating them counts them, from skipped periods."""
    ctl = dataclasses.replace(HW.controller, refresh=refresh, frontend=frontend)
    addr = np.array([0, 4096, 0], np.uint64)
    arrival = np.array([0, 5_000_000, 10_000_000], np.int64)
    write = np.array([0, 1, 0], np.int64)
    skipping, done = _serve_idle(addr, write, arrival, ctl, True)
    simulating, done2 = _serve_idle(addr, write, arrival, ctl, False)
    assert np.array_equal(done, done2)
    assert skipping.stats().as_dict() == simulating.stats().as_dict()
    t = HW.memory.timing
    period = t.nREFI // 16 * 16 if refresh == "per_bank" else t.nREFI  # CK
    # every channel idles about 10 M CK, all but a few periods of it skipped
    assert skipping.idle_periods_skipped >= 0.9 * skipping.org.channels * 10_000_000 // period


def test_a_read_a_queued_write_serves_is_not_held_back_by_its_full_read_buffer():
    """In-order front end, a one-entry read buffer kept full: a read of the address a queued
    write holds, arriving later, is served from that write the cycle after it arrives, when
    trying every cycle and when skipping alike. (Found by the test above: the skipping engine
    took its full buffer for a hold-up and admitted it only at the channel's next command.)"""
    n = 46
    addr = np.zeros(n, np.uint64)
    write = np.zeros(n, np.int64)
    write[12] = 1
    arrival = np.zeros(n, np.int64)
    arrival[-2:] = (33, 73)
    ctl = ControllerConfig(read_buffer=1, write_buffer=2, write_high_watermark=0.8,
                           write_low_watermark=0.2, refresh="all_bank", frontend="in_order")
    skipping, done = _run(addr, write, arrival, ctl)
    every = MemorySystem.from_hardware(HW, log_commands=20_000, controller=ctl)
    every.try_every_cycle = True
    assert np.array_equal(done, every.feed(addr, write, arrival, final=True))
    assert skipping.stats().forwarded_reads > 0
    assert done[-1] == arrival[-1] + 1


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([2**14, 2**20, 2**30]),
       st.sampled_from([0.0, 0.3, 0.5]), st.sampled_from(["open", "closed"]),
       st.sampled_from(["all_bank", "per_bank"]), st.sampled_from(["frfcfs", "frfcfs_hit_guard"]))
def test_bank_tallies_pick_what_one_pass_picks(seed, region, write_share, page, refresh,
                                               scheduler):
    """On deep buffers FR-FCFS works from per-bank tallies, and its scan skips the oldest
    requests the last scans passed over while no class they hold is ready; without tallies
    (zero-sized) it scans every request. Both must schedule the same commands. Requests all
    arrive at once, so the buffers run deep (as in the replay's windows)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(600, 3000))
    addr = rng.integers(0, region // 32, n).astype(np.uint64) * np.uint64(32)
    write = (rng.random(n) < write_share).astype(np.int64)
    arrival = np.zeros(n, np.int64)
    ctl = ControllerConfig(read_buffer=E.DEEP_BUFFERS * 2, write_buffer=E.DEEP_BUFFERS * 4,
                           page_policy=page, refresh=refresh, mapping=HW.controller.mapping,
                           scheduler=scheduler)
    tallied, done = _run(addr, write, arrival, ctl)
    scanned = MemorySystem.from_hardware(HW, log_commands=20_000, controller=ctl)
    assert tallied._bank_queued.size > 0
    scanned._bank_queued = scanned._bank_queued[:0]
    scanned._bank_hits = scanned._bank_hits[:0]
    assert np.array_equal(done, scanned.feed(addr, write, arrival, final=True))
    assert np.array_equal(tallied.command_log(), scanned.command_log())
    assert check_log(tallied.command_log(), tallied.timing) == []


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([2**10, 2**14, 2**20]),
       st.sampled_from([8, 32, 256]), st.sampled_from([0, 2, 8]))
def test_write_filter_forwards_what_a_full_look_forwards(seed, region, depth, spacing):
    """A read looks for a queued write to forward from only where the hashed write filter
    could hold one to its address; with a single slot it looks through every queued write
    whenever two or more are queued. Both must forward the same reads and schedule the same
    commands."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(500, 3000))
    addr = rng.integers(0, region // 32, n).astype(np.uint64) * np.uint64(32)
    write = (rng.random(n) < 0.5).astype(np.int64)
    arrival = np.arange(n, dtype=np.int64) * spacing // 4
    ctl = ControllerConfig(read_buffer=depth, write_buffer=2 * depth,
                           mapping=HW.controller.mapping)
    hashed, done = _run(addr, write, arrival, ctl)
    assert hashed._write_filter.shape[1] > 1
    full = MemorySystem.from_hardware(HW, log_commands=20_000, controller=ctl)
    full._write_filter = full._write_filter[:, :1]
    assert np.array_equal(done, full.feed(addr, write, arrival, final=True))
    assert hashed.stats().forwarded_reads == full.stats().forwarded_reads
    assert np.array_equal(hashed.command_log(), full.command_log())
    assert not hashed._write_filter.any()  # every write counted in was counted out


def test_a_filter_slot_holding_one_write_answers_for_it():
    """A slot keeps the XOR of its writes' fingerprints: holding one write it tells that
    write's address from another's of the same slot without a look; holding two it sends
    every read of the slot to look."""
    f = np.zeros((1, 8, 2), np.int16)
    mine = 64
    other = next(a for a in range(96, 1 << 20, 32)
                 if E._write_slot(f, a) == E._write_slot(f, mine)
                 and E._fingerprint(a) != E._fingerprint(mine))
    E._count_write(f, 0, mine, 1)
    assert E._write_maybe_queued(f, 0, mine) and not E._write_maybe_queued(f, 0, other)
    E._count_write(f, 0, other, 1)
    assert E._write_maybe_queued(f, 0, mine) and E._write_maybe_queued(f, 0, other)
    E._count_write(f, 0, mine, -1)
    assert E._write_maybe_queued(f, 0, other) and not E._write_maybe_queued(f, 0, mine)
    E._count_write(f, 0, other, -1)
    assert not f.any()


@settings(deadline=None)
@given(st.integers(0, 7), st.lists(st.tuples(st.booleans(), st.integers(0, 99)), max_size=60))
def test_request_rings_keep_age_order(head, steps):
    """Buffers are rings closed from the shorter side: appends and removals anywhere, wrapping
    round, leave the requests in arrival order, as a plain list would."""
    bufs = np.zeros((1, 3, E.N_FIELDS, 8), np.int64)
    counts = np.zeros((1, 3), np.int64)
    heads = np.full((1, 3), head, np.int64)
    model, serial = [], 0
    for append, pick in steps:
        n = int(counts[0, E.ABUF])
        if append and n < 8:
            slot = (heads[0, E.ABUF] + n) & 7  # the front end's write, through the RBUF copy
            bufs[0, E.RBUF, E.F_ID, slot] = serial
            E._append(bufs, counts, heads, 0, E.ABUF, E.RBUF, slot)
            model.append(serial)
            serial += 1
        elif n:
            i = pick % n
            E._remove(bufs, counts, heads, 0, E.ABUF, (heads[0, E.ABUF] + i) & 7)
            del model[i]
        h, n = heads[0, E.ABUF], counts[0, E.ABUF]
        assert [int(bufs[0, E.ABUF, E.F_ID, (h + i) & 7]) for i in range(n)] == model


def test_checker_catches_a_broken_edge():
    addr = np.arange(64, dtype=np.uint64) * 32 * 8  # one channel, consecutive columns
    ms, _ = _run(addr, np.zeros(64, np.int64), np.zeros(64, np.int64), HW.controller)
    log = ms.command_log()
    assert check_log(log, ms.timing) == []
    act = np.nonzero(log[:, 2] == C.ACT)[0][0]
    rd = np.nonzero((log[:, 2] == C.RD) & (log[:, 4] == log[act, 4]))[0][0]
    broken = log.copy()
    broken[rd, 0] = broken[act, 0] + ms.timing.nRCDRD - 1   # one CK too early
    broken = broken[np.argsort(broken[:, 0], kind="stable")]
    assert any("tRCD" in v for v in check_log(broken, ms.timing))
    two_reads = log[log[:, 2] == C.RD][:2].copy()
    two_reads[1, 0] = two_reads[0, 0] + 1
    assert any("tCCD" in v for v in check_log(two_reads, ms.timing))


@pytest.mark.parametrize("frontend", ["in_order", "per_channel"])
@pytest.mark.parametrize("mode, interval", [("all_bank", "nREFI"), ("per_bank", "nREFIpb")])
def test_refresh_count_follows_simulated_time(mode, interval, frontend):
    """Refresh that never fires was a real bug in a peer simulator. Per-channel front ends run
    each channel on its own clock: one with no requests still refreshes to the end."""
    ctl = dataclasses.replace(HW.controller, refresh=mode, frontend=frontend)
    n = 2000
    arrival = np.arange(n, dtype=np.int64) * 100          # sparse: 200,000 CK of time
    addr = np.arange(n, dtype=np.uint64) * 32
    if frontend == "per_channel":  # one channel's requests only
        addr = addr[MemorySystem.from_hardware(HW, controller=ctl).decode(addr)["channel"] == 0]
        arrival = arrival[:len(addr)] * (n // len(addr))
        n = len(addr)
    ms, _ = _run(addr, np.zeros(n, np.int64), arrival, ctl)
    s = ms.stats()
    t = ms.timing
    refi = t.nREFI if mode == "all_bank" else t.nREFI // 16
    expected_per_channel = s.cycles / refi
    per_channel = s.refreshes / ms.org.channels
    assert abs(per_channel - expected_per_channel) <= 1, interval
    assert check_log(ms.command_log(), t) == []


@pytest.mark.parametrize("postpone", [0, 8])
def test_refresh_keeps_up_with_a_write_stream(postpone):
    """Per-bank refresh waits for its bank to fall idle, which a write stream never lets it
    do while the bank's row has writes queued (each write pushes the precharge nWR further
    out): refreshes fell three in four behind, to be made up in a burst at the end. Once more
    are owed than the controller postpones, the bank due takes no more writes until it is
    refreshed, so the count follows simulated time throughout."""
    hw = load_hardware("t4")
    ctl = dataclasses.replace(hw.controller, refresh_postpone=postpone)
    n = 400_000
    addr = np.arange(n, dtype=np.uint64) * 32
    ms = MemorySystem.from_hardware(hw, controller=ctl)
    for part in np.array_split(np.arange(n), 4):  # all handed over at once, looked at in parts
        ms.feed(addr[part], np.ones(len(part), np.int64), np.zeros(len(part), np.int64),
                final=False, want_completion=False)
        assert ms._chan[:, E.C_PENDING_REF].max() <= postpone + 1
    ms.feed(addr[:0], np.ones(0, np.int64), final=True)
    s = ms.stats()
    due = s.cycles / (ms.timing.nREFI // 16)
    assert abs(s.refreshes / ms.org.channels - due) <= postpone + 1
    assert s.bandwidth_GBps > 0.98 * s.peak_bandwidth_GBps


def test_a_bank_held_for_its_refresh_is_skipped_to_as_tried_every_cycle():
    """The deep GPU queues full of writes, every refresh holding its bank at once: trying
    every CK cycle issues the same commands at the same cycles as skipping."""
    hw = load_hardware("t4")
    ctl = dataclasses.replace(hw.controller, refresh_postpone=0)
    n = 6000
    addr = np.arange(n, dtype=np.uint64) * 32
    logs = []
    for every_cycle in (False, True):
        ms = MemorySystem.from_hardware(hw, log_commands=4 * n, controller=ctl)
        ms.try_every_cycle = every_cycle
        ms.feed(addr, np.ones(n, np.int64), np.zeros(n, np.int64), final=True)
        logs.append(ms.command_log())
    assert (logs[0][:, 2] == E.REFPB).sum() > 0
    assert np.array_equal(logs[0], logs[1])
    assert check_log(logs[0], ms.timing) == []


def test_sequential_is_not_slower_than_random():
    n = 20_000
    seq = np.arange(n, dtype=np.uint64) * 32
    rng = np.random.default_rng(7)
    rand = rng.integers(0, 2**30 // 32, n).astype(np.uint64) * 32
    for ctl in (HW.controller, ControllerConfig()):
        a = MemorySystem.from_hardware(HW, controller=ctl)
        a.feed(seq, np.zeros(n, np.int64), final=True)
        b = MemorySystem.from_hardware(HW, controller=ctl)
        b.feed(rand, np.zeros(n, np.int64), final=True)
        assert a.stats().bandwidth_GBps >= b.stats().bandwidth_GBps


def test_hit_guard_keeps_rows_open_that_oldest_ready_first_closes():
    """Two read streams on the Titan RTX at its datasheet's 14 Gb/s, where nRTP equals nCCDL:
    Ramulator 2's FR-FCFS (oldest ready command first) precharges a bank for an older request
    in the very cycle the next read of its open row could issue, and reopens the row later;
    the hit guard (the GPU memory path's scheduler) serves the open row's requests first."""
    hw = load_hardware("titan-rtx")
    n = 100_000
    i = np.arange(n, dtype=np.uint64) * np.uint64(32)
    addr = np.stack([i, np.uint64(256 * 2**20) + i], axis=1).ravel()
    share = {}
    for scheduler in ("frfcfs", "frfcfs_hit_guard"):
        ctl = dataclasses.replace(hw.controller, scheduler=scheduler)
        ms = MemorySystem.from_hardware(hw, controller=ctl)
        ms.feed(addr, np.zeros(len(addr), np.int64), final=True)
        s = ms.stats()
        share[scheduler] = s.bandwidth_GBps / s.peak_bandwidth_GBps
    assert GPU_CONTROLLER.scheduler == "frfcfs_hit_guard"
    assert share["frfcfs_hit_guard"] > 0.97
    assert share["frfcfs"] < share["frfcfs_hit_guard"] - 0.03


def test_default_mapping_reaches_nccds_on_a_stream():
    """Interleaving bank groups lets a stream run at the burst rate, not at nCCDL."""
    n = 100_000
    addr = np.arange(n, dtype=np.uint64) * 32
    robaracoch = validation_system()
    robaracoch.feed(addr, np.zeros(n, np.int64), final=True)
    default = MemorySystem.from_hardware(HW, controller=ControllerConfig())
    default.feed(addr, np.zeros(n, np.int64), final=True)
    assert default.stats().bandwidth_GBps > 1.2 * robaracoch.stats().bandwidth_GBps
    assert default.stats().bandwidth_GBps > 0.85 * default.stats().peak_bandwidth_GBps


@pytest.mark.parametrize("fields", [
    ("column:3", "channel", "bankgroup", "column", "bank", "row"),
    ("bank:1", "channel:1", "column", "channel", "bank", "row", "bankgroup"),
])
def test_split_mapping_fields_decode_every_address_to_its_own_place(fields):
    """A field split into parts ('column:3' its lowest 3 bits, the plain name the rest) still
    gives each 32 B access of the memory its own channel, bank, row and column."""
    from simulator.config.address_mapping import AddressMapping
    from simulator.config.organization import Organization
    from simulator.dram.mapping import decode

    org = Organization(channels=4, bank_groups=2, banks_per_group=2, rows=8, row_bytes=512)
    mapping = AddressMapping(fields=fields, hash=(("bank", "row"),))
    addr = np.arange(org.capacity_bytes // 32, dtype=np.uint64) * 32
    f = decode(mapping, addr, org)
    place = (((f["channel"] * 2 + f["bankgroup"]) * 2 + f["bank"]) * 8 + f["row"]) * 16 \
        + f["column"]
    assert sorted(place.tolist()) == list(range(len(addr)))
    if fields[0] == "column:3":  # 8 accesses (256 B) on a channel, then the next channel
        assert f["channel"][:24].tolist() == [0] * 8 + [1] * 8 + [2] * 8
        assert f["column"][:10].tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 0, 1]
        assert f["bankgroup"][32] == 1 and f["column"][32] == 0  # past all 4 channels
        assert f["column"][64] == 8  # the column's upper part, past both bank groups


def test_hash_into_a_count_not_a_power_of_two_adds_wherever_the_field_sits():
    """A hash into 24 channels adds the row modulo 24, also when the channel is not the
    mapping's first part (the decode once took the fold-or-add choice from the wrong part,
    and with a split column first left such channels unhashed)."""
    from simulator.config.address_mapping import AddressMapping
    from simulator.config.organization import Organization
    from simulator.dram.mapping import decode

    org = Organization(channels=24, bank_groups=2, banks_per_group=2, rows=64, row_bytes=512)
    fields = ("column:3", "channel", "bankgroup", "column", "bank", "row")
    addr = np.random.default_rng(2).integers(0, org.capacity_bytes // 32, 5000).astype(
        np.uint64) * np.uint64(32)
    plain = decode(AddressMapping(fields=fields, hash=()), addr, org)
    hashed = decode(AddressMapping(fields=fields, hash=(("channel", "row"),)), addr, org)
    assert (hashed["channel"] == (plain["channel"] + plain["row"]) % 24).all()
    assert (hashed["channel"] != plain["channel"]).any()


def test_banks_per_group_must_be_a_power_of_two():
    """The engine finds a bank's group by a shift: other counts are refused, not mis-grouped."""
    from simulator.config.organization import Organization

    ms = MemorySystem.from_hardware(HW)
    for per_group, ok in ((2, True), (3, False)):
        org = Organization(channels=2, bank_groups=2, banks_per_group=per_group, rows=8,
                           row_bytes=512)
        if ok:
            MemorySystem(org, ms.timing, ms.controller, ms.data_rate_gbps)
        else:
            with pytest.raises(ValueError, match="power of two"):
                MemorySystem(org, ms.timing, ms.controller, ms.data_rate_gbps)


def test_rx_6900_xt_channels_are_address_bits_8_to_11():
    """The Linux driver's Navi 21 mapping (hardware/rx-6900-xt.json): 256 B per channel,
    16 channels, unhashed."""
    hw = load_hardware("rx-6900-xt")
    ms = MemorySystem.from_hardware(hw)
    addr = np.random.default_rng(5).integers(0, 2**34 // 32, 10_000).astype(np.uint64) * 32
    assert (ms.decode(addr)["channel"] == (addr >> np.uint64(8)) % 16).all()
    assert hw.controller.read_buffer == GPU_CONTROLLER.read_buffer


@pytest.mark.parametrize("frontend", ["in_order", "per_channel"])
def test_streaming_in_chunks_equals_one_feed(frontend):
    n = 30_000
    rng = np.random.default_rng(3)
    addr = rng.integers(0, 2**24 // 32, n).astype(np.uint64) * 32
    write = (rng.random(n) < 0.3).astype(np.int64)
    ctl = dataclasses.replace(HW.controller, frontend=frontend)
    whole = MemorySystem.from_hardware(HW, controller=ctl)
    expected = whole.feed(addr, write, final=True)
    parts = MemorySystem.from_hardware(HW, controller=ctl)
    done = np.concatenate([parts.feed(addr[chunk], write[chunk], final=k == 6)
                           for k, chunk in enumerate(np.array_split(np.arange(n), 7))])
    assert parts.stats().as_dict() == whole.stats().as_dict()
    # a request still queued when its feed returns completes in a later one, which reports
    # only its own requests
    later = done == -1
    assert 0 < later.sum() < n // 2 and np.array_equal(done[~later], expected[~later])


def test_read_after_write_is_forwarded():
    ms = validation_system()
    addr = np.array([4096, 4096], np.uint64)
    done = ms.feed(addr, np.array([1, 0], np.int64), np.array([0, 1], np.int64), final=True)
    assert ms.stats().forwarded_reads == 1 and done[1] == 2


def test_gddr6_cards_build_a_memory_system():
    for name in ("t4", "a40", "rtx-2080-ti", "l4", "rtx-a6000"):
        hw = load_hardware(name)
        ms = MemorySystem.from_hardware(hw)
        assert ms.org.channels == hw.memory.bus_width_bits // 16
        assert ms.org.capacity_bytes == hw.memory.capacity_bytes
        n = 4000
        ms.feed(np.arange(n, dtype=np.uint64) * 32, np.zeros(n, np.int64), final=True)
        assert 0 < ms.stats().bandwidth_GBps <= hw.memory.peak_bandwidth_GBps


def test_hbm_is_refused_with_a_clear_error():
    from simulator.errors import InputError

    with pytest.raises(InputError, match="GDDR6"):
        MemorySystem.from_hardware(load_hardware("a100-40gb"))


def test_feeding_after_a_drain_carries_the_clock_on():
    """The replay hands over one op's requests, waits for them, then the next op's."""
    ms = validation_system()
    first = ms.feed(np.arange(1000, dtype=np.uint64) * 32, np.zeros(1000, np.int64), final=True)
    end = ms.stats().cycles
    assert first.max() == end
    second = ms.feed(np.arange(1000, 2000, dtype=np.uint64) * 32, np.zeros(1000, np.int64),
                     np.full(1000, end, np.int64), final=True)
    t = ms.timing
    assert second.min() >= end + t.nCL + t.nBL
    assert ms.stats().requests == 2000 and ms.stats().cycles == second.max()


@pytest.mark.parametrize("frontend", ["in_order", "per_channel"])
def test_after_idle_a_system_serves_as_a_fresh_one(frontend):
    """The sampled replay serves each window from idle(): the same requests then take the same
    cycles, counted from the clock, as on a new system, whatever came before (open rows,
    refresh timer, reads still in flight)."""
    addr = np.arange(3000, dtype=np.uint64) * 96
    write = (np.arange(3000) % 3 == 0).astype(np.int64)
    ctl = dataclasses.replace(HW.controller, frontend=frontend)
    fresh = MemorySystem.from_hardware(HW, controller=ctl)
    expected = fresh.feed(addr, write, final=True)
    used = MemorySystem.from_hardware(HW, controller=ctl)
    used.feed(np.arange(5000, dtype=np.uint64) * 4096, np.zeros(5000, np.int64), final=True)
    last = used.last_completion_ck
    used.idle()
    start = used.now_ck
    assert start >= last
    done = used.feed(addr, write, np.full(len(addr), start, np.int64), final=True)
    assert np.array_equal(done - start, expected)


@settings(max_examples=20, deadline=None)
@given(st.sampled_from([("t4", 256), ("t4", 384), ("a40", 384)]), st.integers(0, 2**32 - 1))
def test_address_decode_matches_its_definition(card, seed):
    """Each field takes its count's worth of the address in turn; each hash entry XORs every
    log2(n)-bit slice of its source into a power-of-two target, else adds modulo the count.
    Written out per address, against the vectorized decode (bit fields, lookup tables)."""
    from simulator.config.organization import organization
    from simulator.dram.mapping import decode

    hw = load_hardware(card[0])
    hw = dataclasses.replace(hw, memory=dataclasses.replace(hw.memory, bus_width_bits=card[1]))
    org = organization(hw.memory, hw.path)
    mapping = hw.controller.mapping
    counts = mapping.counts(org)
    rng = np.random.default_rng(seed)
    addr = rng.integers(0, org.capacity_bytes // 32, 300).astype(np.uint64) * np.uint64(32)
    got = decode(mapping, addr, org)
    for i, a in enumerate(addr.tolist()):
        rest, want = a // 32, {}
        for name in mapping.fields:
            want[name], rest = rest % counts[name], rest // counts[name]
        for target, source in mapping.hash:
            n = counts[target]
            if n & (n - 1) == 0:
                folded, v = 0, want[source]
                while n > 1 and v:
                    folded ^= v % n
                    v //= n
                want[target] ^= folded
            else:
                want[target] = (want[target] + want[source]) % n
        assert {k: int(got[k][i]) for k in want} == want


def _gpu_system(frontend: str) -> MemorySystem:
    t4 = load_hardware("t4")
    return MemorySystem.from_hardware(
        t4, controller=dataclasses.replace(t4.controller, frontend=frontend))


def test_front_ends_agree_while_no_buffer_fills():
    """The front ends differ only in what a full buffer holds back: with requests arriving
    slower than the channels serve them, every request completes at the same cycle."""
    rng = np.random.default_rng(11)
    n = 20_000
    addr = rng.integers(0, 2**28 // 32, n).astype(np.uint64) * 32
    write = (rng.random(n) < 0.4).astype(np.int64)
    arrival = np.sort(rng.integers(0, 4 * n, n)).astype(np.int64)
    runs = [(ms, ms.feed(addr, write, arrival, final=True))
            for ms in (_gpu_system("in_order"), _gpu_system("per_channel"))]
    (a, done_a), (b, done_b) = runs
    assert np.array_equal(done_a, done_b)
    assert a.stats().as_dict() == b.stats().as_dict()


def test_a_full_channel_holds_back_only_its_own_requests_per_channel():
    """A burst to one channel fills its read buffer; a read to another channel behind it waits
    for room in the first with an in-order front end, not with per-channel ones."""
    probe = _gpu_system("in_order")
    addr = np.arange(200_000, dtype=np.uint64) * 32
    ch = probe.decode(addr)["channel"]
    burst = addr[ch == 0][:2000]
    other = addr[ch == 1][:1]
    reqs = np.concatenate([burst, other])
    reads = np.zeros(len(reqs), np.int64)
    unloaded = probe.feed(other, reads[:1], final=True)[0]
    held = _gpu_system("in_order").feed(reqs, reads, final=True)[-1]
    free = _gpu_system("per_channel").feed(reqs, reads, final=True)[-1]
    assert free == unloaded
    assert held > 10 * unloaded


def test_engine_threads_do_not_change_results(monkeypatch):
    """Per-channel front ends share the channels among threads; the schedule must not depend
    on how many."""
    rng = np.random.default_rng(5)
    n = 60_000
    addr = rng.integers(0, 2**26 // 32, n).astype(np.uint64) * 32
    write = (rng.random(n) < 0.3).astype(np.int64)
    results = []
    for threads in (1, 2, 3):
        monkeypatch.setattr(system, "_threads", threads)
        ms = _gpu_system("per_channel")
        assert ms._threads == threads
        done = ms.feed(addr[: n // 2], write[: n // 2], final=False)  # all at once: buffers fill
        done = np.concatenate([done, ms.feed(addr[n // 2:], write[n // 2:], final=True)])
        results.append((done, ms.stats().as_dict()))
    for done, stats in results[1:]:
        assert np.array_equal(done, results[0][0]) and stats == results[0][1]
