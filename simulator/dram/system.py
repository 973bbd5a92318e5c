"""A GDDR6 memory system you can feed request streams to: the API the replay and `dram` use.

    ms = MemorySystem.from_hardware(load_hardware("t4"))
    done = ms.feed(addresses, is_write, arrival_ck, final=True)   # completion cycle per request
    ms.stats()                                                     # DramStats
"""

from __future__ import annotations

import math
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simulator import notice
from simulator.config.address_mapping import FIELDS
from simulator.config.controller import ControllerConfig
from simulator.config.hardware import Hardware
from simulator.config.organization import ACCESS_BYTES, Organization, organization
from simulator.config.timing import GDDR6Timing, refresh_interval_ck, refresh_problem
from simulator.dram import commands as C
from simulator.dram import engine as E
from simulator.dram import mapping
from simulator.dram.tracefile import read_blocks
from simulator.errors import InputError
from simulator.threads import LazyPool, usable_cpus
from simulator.units import BITS_PER_BYTE, tck_ns

# Micron's GDDR6 "average device power" per bit moved, as the hardware files cite it
# (micron.com/products/ultra-bandwidth-solutions); a hardware file may state its own
# `memory.energy_pj_per_bit`.
DEFAULT_GDDR6_PJ_PER_BIT = 7.5
# With per-channel front ends the channels run apart, shared out among threads; a thread is
# worth starting for this many requests of a feed
REQUESTS_PER_THREAD = 1 << 13

_threads: int | None = None


def engine_threads() -> int:
    """Threads the engine shares channels among: usable_cpus(), unless set_engine_threads said
    otherwise (a sweep's worker processes share the CPUs out)."""
    return _threads or usable_cpus()


def set_engine_threads(n: int) -> None:
    global _threads
    _threads = max(1, int(n))


_pool = LazyPool("gddr6", engine_threads)


@dataclass(frozen=True)
class DramStats:
    """What one run measured. Cycle counts are CK cycles (CK = data rate / 8)."""

    requests: int
    reads: int
    writes: int
    cycles: int
    tck_ns: float
    peak_bandwidth_GBps: float
    read_latency_cycles: dict[str, float]
    commands: dict[str, int]
    row_hits: int
    row_misses: int
    row_conflicts: int
    forwarded_reads: int
    refreshes: int
    channel_busy_cycles: np.ndarray      # data-bus cycles per channel
    bank_accesses: np.ndarray            # (channels, banks) column commands
    refresh_cycles: int                  # channel-cycles spent in refresh (sum over channels)
    turnaround_cycles: int               # estimated channel-cycles lost to RD<->WR switches
    energy_pj_per_bit: float
    burst_cycles: int                    # CK cycles one burst holds the data bus (nBL)

    @property
    def time_ns(self) -> float:
        return self.cycles * self.tck_ns

    @property
    def bytes(self) -> int:
        return self.requests * ACCESS_BYTES

    @property
    def bandwidth_GBps(self) -> float:
        return self.bytes / self.time_ns if self.cycles else 0.0

    @property
    def row_hit_rate(self) -> float:
        n = self.row_hits + self.row_misses + self.row_conflicts
        return self.row_hits / n if n else 0.0

    @property
    def energy_pJ(self) -> float:
        return self.bytes * BITS_PER_BYTE * self.energy_pj_per_bit

    def as_dict(self) -> dict:
        ch = len(self.channel_busy_cycles)
        span = max(self.cycles, 1)
        lat_ck = self.read_latency_cycles
        return {
            "requests": self.requests, "reads": self.reads, "writes": self.writes,
            "cycles": self.cycles, "clock": "CK", "tck_ns": self.tck_ns,
            "time_ns": self.time_ns, "bytes": self.bytes,
            "bandwidth_GBps": self.bandwidth_GBps,
            "peak_bandwidth_GBps": self.peak_bandwidth_GBps,
            "percent_of_peak": 100 * self.bandwidth_GBps / self.peak_bandwidth_GBps,
            "read_latency_ns": {k: v * self.tck_ns for k, v in lat_ck.items()},
            "read_latency_cycles": lat_ck,
            "row_hit_rate": self.row_hit_rate,
            "row_hits": self.row_hits, "row_misses": self.row_misses,
            "row_conflicts": self.row_conflicts,
            "reads_forwarded_from_write_buffer": self.forwarded_reads,
            "refreshes": self.refreshes,
            "refresh_time_share": self.refresh_cycles / (span * ch),
            "turnaround_time_share": self.turnaround_cycles / (span * ch),
            "commands": self.commands,
            "channel_utilization": (self.channel_busy_cycles / span).tolist(),
            "bank_utilization": (self.bank_accesses * self.burst_cycles / span).tolist(),
            "energy_pJ": self.energy_pJ,
            "energy_model": f"{self.energy_pj_per_bit} pJ per bit moved (device average power)",
        }


@dataclass(frozen=True)
class Counters:
    """Cumulative counts at one moment (channel_busy: data-bus CK cycles per channel)."""

    requests: int
    row_misses: int
    row_conflicts: int
    rw_switches: int
    same_bankgroup: int       # column commands following one to the same bank group
    refresh_cycles: float     # channel-CK cycles refresh held banks (per-bank counted 1/banks)
    channel_busy: np.ndarray

    def _combine(self, other: Counters, op) -> Counters:
        return Counters(*(op(getattr(self, f), getattr(other, f))
                          for f in self.__dataclass_fields__))

    def __sub__(self, other: Counters) -> Counters:
        return self._combine(other, lambda a, b: a - b)

    def __add__(self, other: Counters) -> Counters:
        return self._combine(other, lambda a, b: a + b)

    def scaled(self, factor: float) -> Counters:
        """Every count times `factor` (extrapolating a sample to the whole)."""
        return Counters(*(getattr(self, f) * factor for f in self.__dataclass_fields__))


def turnaround_cycles_per_switch(t: GDDR6Timing) -> float:
    """Data-bus CK cycles one read<->write switch costs beyond a burst: the mean of the
    RD->WR (nCL + 1) and WR->RD (nCWL + nBL + nWTRS) gaps, less the burst itself."""
    return ((t.nCL + 1) + (t.nCWL + t.nBL + t.nWTRS)) / 2 - t.nBL


def _percentiles(hist: np.ndarray) -> dict[str, float]:
    n = int(hist.sum())
    if n == 0:
        return {"mean": 0.0, "p50": 0.0, "p99": 0.0, "max": 0.0}
    values = np.arange(len(hist))
    cum = np.cumsum(hist)
    nz = np.nonzero(hist)[0]
    return {"mean": float((hist * values).sum() / n),
            "p50": float(np.searchsorted(cum, math.ceil(0.50 * n))),
            "p99": float(np.searchsorted(cum, math.ceil(0.99 * n))),
            "max": float(nz[-1])}


def configuration(org: Organization, timing: GDDR6Timing, controller: ControllerConfig) -> str:
    """What decides how the engine serves requests, in CK cycles: memory systems with the same
    string give the same results (the data rate only turns cycles into seconds)."""
    return repr((org, timing, controller))


def _first_call(entry) -> AbstractContextManager:
    """The engine's first call in a process loads it from numba's cache, or on a first run
    compiles it (seconds): a wait past notice.SLOW_S says so."""
    return nullcontext() if entry.signatures else notice.if_slow(notice.COMPILING_ENGINE)


class MemorySystem:
    """Channels, banks, controllers and refresh of one GDDR6 memory system."""

    def __init__(self, org: Organization, timing: GDDR6Timing, controller: ControllerConfig,
                 data_rate_gbps: float, energy_pj_per_bit: float = DEFAULT_GDDR6_PJ_PER_BIT,
                 log_commands: int = 0, name: str = "", try_every_cycle: bool = False,
                 skip_idle: bool = True):
        """`try_every_cycle`: each channel tries every CK cycle, rather than skipping to the
        next cycle where it could issue; slow, the reference that the skipping must agree
        with to the command. `skip_idle`: skip whole refresh periods of channels idle until
        their next request, once one period is seen to repeat (per channel on per-channel
        front ends, all channels at once on the in-order one; not while logging commands or
        trying every cycle; tests compare with not skipping)."""
        self.org, self.timing, self.controller = org, timing, controller
        self.try_every_cycle = try_every_cycle
        self.data_rate_gbps = data_rate_gbps
        self.tck_ns = tck_ns(data_rate_gbps)
        self.energy_pj_per_bit = energy_pj_per_bit
        self.name = name
        n_ch, n_banks = org.channels, org.banks
        if org.banks_per_group & (org.banks_per_group - 1):
            raise ValueError(f"banks per group must be a power of two (the engine finds a "
                             f"bank's group by a shift), got {org.banks_per_group}")
        if n_banks > E.K_BANK + 1:
            raise ValueError(f"at most {E.K_BANK + 1} banks per channel (the engine keeps a "
                             f"channel's banks as bits of one int64), got {n_banks}")
        refresh = refresh_problem(timing, controller.refresh == "per_bank", n_banks)
        if refresh is not None:  # (hardware files are checked for this as they load)
            raise ValueError(f"expected {refresh}")
        self._bank_group_shift = org.banks_per_group.bit_length() - 1
        cap = max(controller.read_buffer, controller.write_buffer, controller.active_buffer)
        self._caps = np.array([controller.read_buffer, controller.write_buffer,
                               controller.active_buffer], np.int64)
        ring = 1 << max(cap - 1, 1).bit_length()  # each buffer is a ring of a power of two
        self._bufs = np.zeros((n_ch, 3, E.N_FIELDS, ring), np.int64)
        self._counts = np.zeros((n_ch, 3), np.int64)
        self._heads = np.zeros((n_ch, 3), np.int64)
        # per channel, read and write buffer, bank: requests queued, and those for its open row;
        # kept only where a buffer is deep enough for the scheduler to use them
        deep = max(controller.read_buffer, controller.write_buffer) >= E.DEEP_BUFFERS
        if deep and n_banks > E.CLASS_SHIFT:
            raise ValueError(f"at most {E.CLASS_SHIFT} banks per channel with buffers of "
                             f"{E.DEEP_BUFFERS} or more (FR-FCFS packs two bank masks into one "
                             f"int64), got {n_banks}")
        self._bank_queued = np.zeros((n_ch if deep else 0, 2, n_banks), np.int64)
        self._bank_hits = np.zeros((n_ch if deep else 0, 2, n_banks), np.int64)
        # per channel, queued writes (buffered or activated) per slot of their hashed address,
        # and the XOR of their fingerprints: a read looks for a write to forward from only
        # where its slot could hold one to its address
        writes = controller.write_buffer + controller.active_buffer
        self._write_filter = np.zeros(
            (n_ch, 1 << (E.WRITE_FILTER_PER_WRITE * writes - 1).bit_length(), 2),
            np.int16 if writes < 2**15 else np.int32)  # small: it is touched at random
        # counts and totals per engine thread (one row with an in-order front end)
        self._per_channel = controller.frontend == "per_channel"
        self._threads = min(engine_threads(), n_ch) if self._per_channel and not log_commands else 1
        # (rows of at least 128 B, as the threads' channels are contiguous blocks, so that
        # threads share no cache line)
        self._scal = np.zeros((self._threads, max(E.N_SCALARS, 16)), np.int64)
        self._fed = 0  # requests fed so far: the next feed's first id
        self._grouped = np.empty((0, E.N_GROUPED), np.int64)  # per-channel front ends' input
        self._fields = np.empty((len(FIELDS), 0), np.int64)  # decoded addresses
        self._keys = np.empty(0, np.int64)  # the in-order front end's input
        self._chan = np.zeros((n_ch, E.N_CHANNEL_COUNTERS), np.int64)
        # CK cycles between refresh commands per channel: REFab every tREFI, or a REFpb to
        # each bank in turn, 16 per tREFI
        self._refresh_every = refresh_interval_ck(timing, controller.refresh == "per_bank",
                                                  n_banks)
        self._rch = np.zeros((n_ch, E.N_CMD), np.int64)
        # per channel, command and bank: the bank's earliest cycle by the bank-group and bank
        # rules (the banks of a command side by side, for the scheduler's pass over them)
        self._rbank = np.zeros((n_ch, E.N_CMD, n_banks), np.int64)
        self._faw = np.zeros((n_ch, 5), np.int64)
        self._open_row = np.zeros((n_ch, n_banks), np.int64)
        self._cmd_count = np.zeros((n_ch, E.N_CMD), np.int64)
        self._bank_cols = np.zeros((n_ch, n_banks), np.int64)
        self._lat_hist = np.zeros((self._threads, E.LAT_BINS), np.int64)
        skip = skip_idle and not log_commands and not try_every_cycle
        # scratch rows for skipping idle periods: one a thread (per-channel front ends), one a
        # channel (the in-order front end watches them all at once)
        self._idle = np.zeros((max(self._threads, n_ch), E.idle_words(n_banks) if skip else 0),
                              np.int64)
        self._lat = np.full((3, C.N_COMMANDS, C.N_COMMANDS), E.NO_RULE, np.int64)
        for r in C.rules(timing):
            self._lat[r.level, r.prev, r.next] = max(self._lat[r.level, r.prev, r.next], r.latency)
        self._log = np.zeros((log_commands, 6), np.int64)
        self.idle()

    @property
    def configuration(self) -> str:
        return configuration(self.org, self.timing, self.controller)

    @classmethod
    def from_hardware(cls, hw: Hardware, log_commands: int = 0,
                      controller: ControllerConfig | None = None,
                      skip_idle: bool = True) -> MemorySystem:
        m = hw.memory
        if not m.replayable:
            raise InputError(f"the GDDR6 engine models GDDR6 memory; {hw.name} has {m.type}",
                             file=hw.path, path="$.memory.type")
        return cls(organization(m, hw.path), m.timing, controller or hw.controller,
                   m.data_rate_gbps, hw.energy_pj_per_bit or DEFAULT_GDDR6_PJ_PER_BIT,
                   log_commands, hw.name, skip_idle=skip_idle)

    @property
    def peak_bandwidth_GBps(self) -> float:
        return self.org.channels * 16 * self.data_rate_gbps / 8

    def decode(self, addresses: np.ndarray, out: np.ndarray | None = None
               ) -> dict[str, np.ndarray]:
        return mapping.decode(self.controller.mapping, addresses, self.org, out)

    def check_addresses(self, addresses: np.ndarray, where=None) -> None:
        """Reject addresses past the capacity; `where(i)` names the offending request."""
        cap = np.uint64(self.org.capacity_bytes)
        if len(addresses) == 0 or addresses.max() < cap:
            return  # (one pass, no mask: the replay checks every chunk it feeds)
        i = int(np.argmax(addresses >= cap))
        raise InputError(
            f"address {int(addresses[i]):#x} is beyond the capacity of "
            f"{self.org.capacity_bytes:,} B ({self.org.capacity_bytes:#x})"
            + (f" of {self.name}" if self.name else ""),
            file=where(i) if where else None)

    def feed(self, addresses: np.ndarray, is_write: np.ndarray, arrival: np.ndarray | None = None,
             final: bool = True, want_completion: bool = True) -> np.ndarray:
        """Hand over requests in order (arrival in CK cycles; an arrival already past waits for
        the current cycle). With `final` the system runs until every request handed over so far
        has completed; more may be fed afterwards, and the clock carries on. Returns each
        request's completion cycle (-1 where it completes in a later call)."""
        n = len(addresses)
        addresses = np.ascontiguousarray(addresses, dtype=np.uint64)
        is_write = np.ascontiguousarray(is_write, dtype=np.int64)
        arrival = (np.zeros(n, np.int64) if arrival is None
                   else np.ascontiguousarray(arrival, dtype=np.int64))
        self.check_addresses(addresses)
        if self._fields.shape[1] < n:  # kept from feed to feed, as the grouped requests
            self._fields = np.empty((len(FIELDS), n), np.int64)
        f = self.decode(addresses, self._fields)  # (the bank within its group: the engine
        # makes it the channel's bank index as it takes the request)
        completion = np.full(n if want_completion else 0, -1, np.int64)
        requests = (addresses.view(np.int64), is_write, arrival)
        id_base = self._fed
        self._fed += n
        self._scal[:, E.S_ID_BASE] = id_base
        if self._per_channel:
            with _first_call(E.run_channels):
                self._run_channels(requests, f["channel"], f["bankgroup"], f["bank"], f["row"],
                                   id_base, final, completion)
        else:
            self._scal[0, E.S_POS] = 0
            if len(self._keys) < n:  # kept from feed to feed, as the decoded fields
                self._keys = np.empty(n, np.int64)
            keys = self._keys[:n]
            E.pack_keys(is_write, f["bankgroup"], f["bank"], f["row"], self._bank_group_shift,
                        keys)
            with _first_call(E.run):
                E.run(*self._state(), self._scal[0], self._chan, *self._tables(),
                      self._lat_hist[0], self._lat, self._log, requests[0], keys, arrival,
                      f["channel"], n, final, completion, self._settings(),
                      self._idle[:self.org.channels])
        return completion

    def _state(self) -> tuple:
        return (self._bufs, self._counts, self._heads, self._bank_queued, self._bank_hits,
                self._write_filter)

    def _tables(self) -> tuple:
        return (self._rch, self._rbank, self._faw, self._open_row,
                self._cmd_count, self._bank_cols)

    def _settings(self) -> tuple:
        t, c = self.timing, self.controller
        # the watermarks as counts of writes: more than floor(high x buffer) is over the high
        # one, fewer than ceil(low x buffer) under the low one
        return (self._caps, math.floor(c.write_high_watermark * c.write_buffer),
                math.ceil(c.write_low_watermark * c.write_buffer),
                c.scheduler == "fcfs", c.page_policy == "closed", c.refresh == "per_bank",
                t.nBL, t.nCL + t.nBL, t.nFAW, self._refresh_every, self._bank_group_shift,
                self.org.banks, self.try_every_cycle,  # nCL + nBL: a read's latency from RD
                c.scheduler == "frfcfs_hit_guard", c.refresh_postpone)

    def _run_channels(self, requests: tuple, channel: np.ndarray, bankgroup: np.ndarray,
                      bank: np.ndarray, row: np.ndarray, id_base: int, final: bool,
                      completion: np.ndarray) -> None:
        """Per-channel front ends: the channels shared out among threads in contiguous blocks
        (threads then share no cache line of state), each thread grouping its channels'
        requests and running them. `bank` is within its group: grouping makes it the
        channel's bank index."""
        n, n_ch = len(channel), self.org.channels
        if len(self._grouped) < n:  # kept from feed to feed: fresh pages cost a fault each
            self._grouped = np.empty((n, E.N_GROUPED), np.int64)
        grouped = self._grouped
        starts = np.zeros(n_ch + 1, np.int64)
        np.cumsum(np.bincount(channel, minlength=n_ch), out=starts[1:])
        threads = min(self._threads, max(1, n // REQUESTS_PER_THREAD))
        state, tables, settings = self._state(), self._tables(), self._settings()

        def run(until: int, starts: np.ndarray) -> None:
            def share(k: int) -> None:
                lo, hi = k * n_ch // threads, (k + 1) * n_ch // threads
                if until < 0:
                    E.group_by_channel(lo, hi, channel, *requests, bankgroup, bank, row,
                                       self._bank_group_shift, id_base, grouped, starts,
                                       np.empty(n_ch, np.int64))
                E.run_channels(np.arange(lo, hi), *state, self._scal[k], self._chan, *tables,
                               self._lat_hist[k], self._lat, self._log, grouped, starts, final,
                               until, completion, settings, self._idle[k:k + 1])
            if threads == 1:
                share(0)
            else:
                for job in [_pool.submit(share, k) for k in range(threads)]:
                    job.result()

        run(-1, starts)
        if final:  # the channels that finished first keep their refreshes up to the last
            run(int(self._chan[:, E.C_CLK].max()), np.zeros(n_ch + 1, np.int64))

    def run_trace(self, path: Path) -> DramStats:
        """Stream a DRAMsim3-format trace file through the system."""
        blocks = read_blocks(path)
        block = next(blocks, None)
        while block is not None:
            nxt = next(blocks, None)
            self.check_addresses(block.address, lambda i, b=block: f"{path}:{int(b.line[i])}")
            self.feed(block.address, block.is_write, block.cycle, final=nxt is None,
                      want_completion=False)
            block = nxt
        return self.stats()

    @property
    def idle_periods_skipped(self) -> int:
        """Refresh periods of idle channels skipped rather than simulated (`skip_idle`)."""
        return int(self._scal[:, E.S_IDLE_SKIPPED].sum())

    def idle(self) -> None:
        """Return to the state of a system that has sat idle since its last completion: the
        clock moved on to it, rows closed, no timing rule pending, the refresh timer starting
        now, reads mode. What it serves next then depends on nothing fed before (the counts
        and statistics carry on)."""
        if self._counts.any():
            raise RuntimeError("idle() with requests still queued")
        now = max(self.now_ck, self.last_completion_ck)
        self._scal[:, E.S_CLK] = now
        self._chan[:, E.C_CLK] = now
        self._chan[:, E.C_NEXT_REF] = now + self._refresh_every
        for slot, value in ((E.C_PENDING_REF, 0), (E.C_REF_BANK, 0), (E.C_WR_MODE, 0),
                            (E.C_LAST_COL, -1), (E.C_LAST_BG, -1), (E.C_NEXT_TRY, now),
                            (E.C_ABUF_T, 0), (E.C_STALE + E.RBUF, 0), (E.C_STALE + E.WBUF, 0),
                            (E.C_PASSED + E.RBUF, 0), (E.C_PASSED + E.WBUF, 0)):
            self._chan[:, slot] = value
        for bounds in (self._rch, self._rbank):
            bounds.fill(0)
        self._faw.fill(-(1 << 40))
        self._faw[:, 4] = 0
        self._open_row.fill(-1)
        self._bank_hits.fill(0)

    @property
    def now_ck(self) -> int:
        """The engine's clock: the CK cycle it has simulated up to."""
        if self._per_channel:
            return int(self._chan[:, E.C_CLK].max())
        return int(self._scal[0, E.S_CLK])

    @property
    def last_completion_ck(self) -> int:
        """CK cycle at which the latest request so far completed."""
        return int(self._scal[:, E.S_LAST_DONE].max())

    def _total(self, slot: int) -> int:
        """A count summed over the engine's threads."""
        return int(self._scal[:, slot].sum())

    def counters(self) -> Counters:
        """Cumulative counts, so a caller can attribute the difference to what it fed between."""
        t = self.timing
        cc = self._cmd_count.sum(axis=0)
        return Counters(
            requests=self._total(E.S_DONE_READS) + self._total(E.S_DONE_WRITES),
            row_misses=int(self._chan[:, E.C_MISS].sum()),
            row_conflicts=int(self._chan[:, E.C_CONFLICT].sum()),
            rw_switches=int(self._chan[:, E.C_RW_SWITCH].sum()),
            same_bankgroup=int(self._chan[:, E.C_SAME_BG].sum()),
            refresh_cycles=float(cc[C.REFAB] * t.nRFCab
                                 + cc[C.REFPB] * t.nRFCpb / self.org.banks),
            channel_busy=self._chan[:, E.C_BUSY].copy())

    def command_log(self) -> np.ndarray:
        """(n, 6) int64 rows of (cycle CK, channel, command, bank group, bank, row), in time
        order (channels in order within a cycle)."""
        n = int(self._scal[0, E.S_LOG_N])  # one thread when commands are logged
        if n > len(self._log):
            raise RuntimeError(f"command log overflowed: {n} commands, room for {len(self._log)}")
        log = self._log[:n]
        # per-channel front ends log channel after channel: put the commands in time order
        return log[np.lexsort((log[:, 1], log[:, 0]))] if self._per_channel else log.copy()

    def stats(self) -> DramStats:
        t = self.timing
        cc = self._cmd_count.sum(axis=0)
        c = self.counters()
        reads = self._total(E.S_DONE_READS)
        return DramStats(
            requests=c.requests, reads=reads, writes=c.requests - reads,
            cycles=self.last_completion_ck, tck_ns=self.tck_ns,
            peak_bandwidth_GBps=self.peak_bandwidth_GBps,
            read_latency_cycles=_percentiles(self._lat_hist.sum(axis=0)),
            commands={"ACT": int(cc[C.ACT]), "PRE": int(cc[C.PRE] + cc[C.PREA]),
                      "RD": int(cc[C.RD] + cc[C.RDA]), "WR": int(cc[C.WR] + cc[C.WRA]),
                      "REF": int(cc[C.REFAB] + cc[C.REFPB]), "PREA": int(cc[C.PREA]),
                      "RDA": int(cc[C.RDA]), "WRA": int(cc[C.WRA]), "REFab": int(cc[C.REFAB]),
                      "REFpb": int(cc[C.REFPB])},
            row_hits=int(self._chan[:, E.C_HIT].sum()),
            row_misses=c.row_misses,
            row_conflicts=c.row_conflicts,
            forwarded_reads=self._total(E.S_FORWARDED),
            refreshes=int(cc[C.REFAB] + cc[C.REFPB]),
            channel_busy_cycles=c.channel_busy,
            bank_accesses=self._bank_cols.copy(),
            refresh_cycles=int(c.refresh_cycles),
            turnaround_cycles=int(c.rw_switches * turnaround_cycles_per_switch(t)),
            energy_pj_per_bit=self.energy_pj_per_bit,
            burst_cycles=t.nBL,
        )
