"""DRAM service for the replay: an op's requests through the GDDR6 engine, in full or sampled.

`cycle` keeps one `MemorySystem` for the step, so open rows, queues and refresh timers carry
from op to op as on the card; `sampled` starts each window and each op it simulates in full
from an idle one, so a result depends only on the memory system and the requests. Requests
arrive at the cycle the SMs reach their progress (pace), or as fast as the queues take them
when the op is memory-bound.

`sampled` measures what the DRAM sustains on windows of each large op's requests, each handed
over at once: its steady rate over eight queue-fulls (streams meeting in the banks make the
rate wander over a few queue-fulls), after a warm-up that fills the queues (the write queue to
its high watermark) and before as long a cool-down, so that neither filling nor draining counts
(where the op has a scattered access, a warm-up long enough that four times as long changes the
measured rate by under 1 %). The op's progress is cut into equal strata, one window in each at
a random but fixed place (windows at fixed fractions of the op fell in step with the bank
conflicts that come and go along large arrays, and missed them): two strata, or up to eight
where they cost a sixteenth of the op's requests (two windows that happen to agree can hide
what the others would see). While the error bound is over 2 % of the DRAM time, each stratum is
halved, keeping its window, and the new halves get one each: up to 16 windows, or as many as
cost half the op's requests. A shorter probe window comes first, where the op's requests at the
peak rate would take under half the SMs' time: when it shows the DRAM well hidden under the
SMs' time (under half), the op needs no more than the tail its last requests leave after the
pace, fed at that pace. Ops with fewer requests than two windows are simulated in full, unless
they are at least twice a probe's size and their probe shows the DRAM well hidden. Each stratum
takes its share of the requests at its window's rate; the op takes the longer of the SMs' pace
and that sum, plus the first window's fill and drain overhead. The op's reported error bound is
a 95 % confidence interval of the sum: its variance from collapsed strata (each pair of
neighbouring strata's variance estimated from their difference), with Student's t for as many
degrees of freedom as pairs. Ops whose traffic has the same shape (repeated layers) reuse the
probe and, unless each takes windows of its own (`share_shapes` False: `run --own-windows`),
the windows already measured. The engine's clock runs only while it simulates (the gaps between
windows are not replayed, nor the refreshes in them), so its counts cover simulated time.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
from scipy.special import stdtrit

from simulator.dram.system import Counters, MemorySystem
from simulator.replay.traffic import OpRequests, Requests, RequestScratch
from simulator.threads import LazyPool

CHUNK_REQUESTS = 1 << 20     # cycle fidelity feeds big ops in chunks of this many requests
WINDOW_REQUESTS = 1 << 14    # sampled fidelity: requests measured per window, at least ...
MEASURED_QUEUE_FULLS = 8     # ... and this many queue-fulls
FIRST_STRATA = (2, 8)        # windows per op at first, one per stratum of its progress: as
FIRST_SHARE = 1 / 16         # many of these as cost this share of its requests; then ...
MAX_WINDOWS = 16             # ... twice as many strata at a time, up to this many, ...
REFINE_ABOVE = 0.02          # ... until the error bound is within 2 %
CONFIDENCE = 0.95            # the error bound's confidence level
HIDDEN_BELOW = 0.5           # no windows when the probe puts the DRAM under half the SMs' time
PROBE_QUEUE_FULLS = 2        # a first, short window: enough to see the DRAM is well hidden
WARM_STEPS = 4               # a window's warm-up is long enough when this many times as long
SETTLED_WITHIN = 0.01        # ... moves the rate of the same measured requests less than this
MEMO_ENTRIES = 4096          # results kept for reuse, about 1 kB each


@dataclass(frozen=True)
class Service:
    """What the DRAM did for one op."""

    span_ck: float           # op start to last completion, CK cycles
    error_ck: float          # bound on span_ck's extrapolation error (0 when simulated in full)
    counters: Counters       # what the engine counted for the op (extrapolated when sampled)
    simulated_requests: int


class _ChunkBuffers:
    """One chunk's requests and arrival cycles, in buffers kept from chunk to chunk."""

    def __init__(self):
        self.requests = RequestScratch()
        self._arrival = np.empty(0, np.int64)

    def prepare(self, reqs: OpRequests, p0: float, p1: float, start_ck: int, pace_ck: float
                ) -> tuple[Requests, np.ndarray]:
        """The requests in progress [p0, p1) and their arrivals, start + floor(progress *
        pace) CK cycles."""
        r = reqs.between(p0, p1, self.requests)
        if len(self._arrival) < len(r):
            self._arrival = np.empty(len(r), np.int64)
        out = self._arrival[:len(r)]
        scaled = np.multiply(r.progress, pace_ck, out=out.view(np.float64))
        np.copyto(out, np.floor(scaled, out=scaled), casting="unsafe")
        out += start_ck
        return r, out


# the next chunk's requests are prepared here while the engine runs this one (its work is
# compiled code and numpy that release the GIL, so it overlaps the engine's threads)
_prefetcher = LazyPool("replay-prefetch", lambda: 1)


class CycleMemory:
    """Every request of every op through the engine."""

    name = "cycle"

    def __init__(self, ms: MemorySystem):
        self.ms = ms
        self._buffers = (_ChunkBuffers(), _ChunkBuffers())  # one fed, one being prepared

    def shares(self, reqs: OpRequests, key: object) -> object:
        """What the op's result is kept under: ops with the same share it."""
        return reqs.identity

    def serve(self, reqs: OpRequests, start_ck: int, pace_ck: float, key: object) -> Service:
        before = self.ms.counters()
        n = reqs.count
        if n == 0:
            return Service(0.0, 0.0, before - before, 0)
        chunks = max(1, math.ceil(n / CHUNK_REQUESTS))
        ready = self._buffers[0].prepare(reqs, 0.0, 1 / chunks, start_ck, pace_ck)
        for c in range(chunks):
            # the next chunk is prepared while the engine runs this one
            nxt = (_prefetcher.submit(self._buffers[(c + 1) % 2].prepare, reqs, (c + 1) / chunks,
                             (c + 2) / chunks, start_ck, pace_ck) if c + 1 < chunks else None)
            r, arrival = ready
            try:
                self.ms.feed(r.address, r.is_write, arrival, final=c == chunks - 1,
                             want_completion=False)
            finally:
                ready = nxt.result() if nxt else None  # (its buffers are free only after)
        return Service(self.ms.last_completion_ck - start_ck, 0.0,
                       self.ms.counters() - before, n)


class SampledMemory(CycleMemory):
    name = "sampled"

    def __init__(self, ms: MemorySystem, memo: dict | None = None, share_shapes: bool = True):
        """`share_shapes`: ops of one traffic shape share windows, measured at the first
        one's addresses (repeated layers' tensors sit elsewhere and can meet other bank
        conflicts: 1.5 % off per op at most where measured, within the bound per step); False gives
        each op windows of its own, at 3-20 times the cost (`run --own-windows`)."""
        super().__init__(ms)
        self._share_shapes = share_shapes
        # results of windows and small ops by their exact input, shared by whoever passes the
        # same dict (a sweep's worker, across points): each starts from an idle memory system,
        # so a result depends on nothing but the memory system and its requests
        self._memo = {} if memo is None else memo
        self._config = ms.configuration
        # (traffic key, pace) -> (span, error bound, counters) of ops simulated in full
        self._seen: dict[object, tuple[float, float, Counters]] = {}
        self._sampled: dict[object, _Strata] = {}   # `shares` -> windows so far
        self._shapes: dict[object, _Strata] = {}    # traffic key -> its probe
        self._tails: dict[object, float] = {}       # (traffic key, pace) -> _tail
        self._peak_rate = ms.org.channels / ms.timing.nBL  # requests per CK, every bus busy
        c = ms.controller
        # warm-up (and cool-down): enough requests to fill the read queues and, at one write in
        # two, the write queues to their high watermark, so the write batches run steadily
        self._warm = ms.org.channels * (c.read_buffer + 2 * c.write_buffer)
        # measured: eight queue-fulls (at least WINDOW_REQUESTS), long enough to average over
        # the patterns in which streams meet in the banks as they advance
        self._queue = ms.org.channels * (c.read_buffer + c.write_buffer)
        self._measured = max(WINDOW_REQUESTS, MEASURED_QUEUE_FULLS * self._queue)
        self._probed = PROBE_QUEUE_FULLS * self._queue  # measured by a probe
        self._window_requests = self._window_size()

    def _measure(self, reqs: OpRequests, centre: float, measured: int, warm: int = 0
                 ) -> tuple[float, int, float, Counters]:
        """(steady requests per CK, requests simulated, fill and drain overhead in CK, what
        the engine counted) of a window of the op's requests centred on `centre`, all handed
        over at once to an idle memory system. `warm`: the requests handed over before the
        measured ones (a queue-full's worth unless given); as many as a queue-full follow."""
        warm = warm or self._warm
        cool = self._warm
        n = reqs.count
        w = min((warm + measured + cool) / n, 1.0)
        p0 = min(max(centre - (warm + measured / 2) / n, 0.0), 1.0 - w)
        memo_key = (self._config, reqs.identity, p0, p0 + w, warm)
        if memo_key in self._memo:
            return self._memo[memo_key]
        r = reqs.between(p0, p0 + w, self._buffers[0].requests)
        wanted = min(warm + measured + cool, n)
        while len(r) < wanted and w < 1.0:
            # the requests bunch in part of the op's progress (an access whose head the L2
            # holds has its DRAM requests in its tail): widen the window until it holds them
            w = min(2 * w, 1.0)
            p0 = min(max(centre - w / 2, 0.0), 1.0 - w)
            r = reqs.between(p0, p0 + w, self._buffers[0].requests)
        self.ms.idle()
        before = self.ms.counters()
        t0 = self.ms.now_ck
        done = self.ms.feed(r.address, r.is_write, np.full(len(r), t0, np.int64), final=True)
        # the measured completions are those after the warm-up and before the last queue-full
        # (which drains with nothing behind it): the a-th and b-th to complete
        a, b = min(warm, len(r) - 1), max(len(r) - 1 - cool, 0)
        done = np.partition(done, (a, b))
        rate = min((b - a) / max(done[b] - done[a], 1), self._peak_rate)
        fill = max(done.max() - t0 - len(r) / rate, 0.0)
        return self._remember(memo_key, (rate, len(r), fill, self.ms.counters() - before))

    def _remember(self, key: tuple, result):
        if len(self._memo) >= MEMO_ENTRIES:
            self._memo.clear()
        self._memo[key] = result
        return result

    def shares(self, reqs: OpRequests, key: object) -> object:
        """What the op's windows are kept under: its own requests, or its traffic shape where
        shapes share (a sweep's points)."""
        return key if self._share_shapes else reqs.identity

    def serve(self, reqs: OpRequests, start_ck: int, pace_ck: float, key: object) -> Service:
        """`key` names the op's traffic shape (kinds, sizes, patterns). Ops of one shape share
        the probe (is the DRAM well hidden under the SMs' pace? bank conflicts that move the
        rate by tens of per cent do not change that) and, simulated in full, the first result
        at the same pace. Windows are the op's own (`shares`)."""
        n = reqs.count
        probed = 0
        small = n < FIRST_STRATA[0] * self._window_requests  # two windows would cost as much
        if self._may_hide(n, pace_ck) and (not small or n >= 2 * (2 * self._warm + self._probed)):
            # a probe (costing under half the op) first: is its DRAM time well hidden?
            shape = self._shapes.setdefault(key, _Strata())
            probed = self._probe(shape, reqs)
            if self._hidden(shape, n, pace_ck):
                return self._hidden_service(shape, reqs, pace_ck, key, n / shape.probe, probed)
        if small:
            return self._full(reqs, pace_ck, key, probed)
        state = self._sampled.setdefault(self.shares(reqs, key), _Strata())
        probed += self._settle(state, reqs)
        # no steady state within two windows
        if n < FIRST_STRATA[0] * self._window_size(state.warm):
            return self._full(reqs, pace_ck, key, probed)
        simulated = probed + self._refine(state, reqs, pace_ck)
        if not state.strata:  # the first window showed the DRAM well hidden
            return self._hidden_service(state, reqs, pace_ck, key, self._dram_ck(state, n),
                                        simulated)
        dram_ck, err = _stratified(state.rates, state.strata, n)
        return self._service(state, n, pace_ck, dram_ck, err, simulated)

    def _hidden_service(self, state: _Strata, reqs: OpRequests, pace_ck: float, key: object,
                        dram_ck: float, simulated: int) -> Service:
        """An op whose DRAM time is well hidden under the SMs' pace: the pace and then the
        tail its last requests leave (`_tail`), in place of a window's fill and drain."""
        tail, cost = self._tail(reqs, pace_ck, key)
        return self._service(state, reqs.count, pace_ck, dram_ck, 0.0, simulated + cost, tail)

    def _tail(self, reqs: OpRequests, pace_ck: float, key: object) -> tuple[float, int]:
        """(CK from the end of the SMs' pace to the op's last completion, requests simulated
        now) for an op whose DRAM keeps up with the SMs: its last requests, a window's
        warm-up's worth (enough to fill the queues), fed at the op's pace to an idle memory
        system. Reads come first while writes wait below the write buffer's high watermark,
        so the writes queued at the end drain after the last arrival: on the T4 the
        transformer's weight gradients ended 0.5-0.7 us after their pace at `cycle`, 1 %,
        where a window handed over at once had left 0.03 us. Once per traffic shape and
        pace, as the probe (`run --own-windows` included)."""
        seen = (key, round(pace_ck))
        if seen in self._tails:
            return self._tails[seen], 0
        n = reqs.count
        w = min(self._warm / n, 1.0)
        memo_key = (self._config, reqs.identity, "tail", pace_ck)
        if memo_key not in self._memo:
            self.ms.idle()
            # arrivals as the op's own (CycleMemory's): from where it would have started, so
            # those before now wait for it
            start = self.ms.now_ck - math.floor((1.0 - w) * pace_ck)
            r, arrival = self._buffers[0].prepare(reqs, 1.0 - w, 1.0, start, pace_ck)
            self.ms.feed(r.address, r.is_write, arrival, final=True, want_completion=False)
            self._remember(memo_key, max(self.ms.last_completion_ck - (start + pace_ck), 0.0))
            cost = len(r)
        else:
            cost = 0
        self._tails[seen] = self._memo[memo_key]
        return self._tails[seen], cost

    @staticmethod
    def _service(state: _Strata, n: int, pace_ck: float, dram_ck: float, err: float,
                 simulated: int, overhead: float | None = None) -> Service:
        """The op's span: the longer of the SMs' pace and the DRAM time, plus `overhead` (the
        first window's fill and drain unless given); the engine's counts scaled to its n
        requests."""
        span = (state.overhead if overhead is None else overhead) + max(pace_ck, dram_ck)
        counts = state.counts.scaled(n / state.simulated)
        busy = np.minimum(counts.channel_busy, span)
        return Service(span, err if dram_ck > pace_ck else 0.0,
                       dataclasses.replace(counts, channel_busy=busy), simulated)

    def _full(self, reqs: OpRequests, pace_ck: float, key: object, probed: int) -> Service:
        """Every request of the op at its pace, from an idle memory system, once per traffic
        shape and pace."""
        full = (key, round(pace_ck))
        if full not in self._seen:
            memo_key = (self._config, reqs.identity, pace_ck)
            if memo_key not in self._memo:
                self.ms.idle()
                self._remember(memo_key, super().serve(reqs, self.ms.now_ck, pace_ck, key))
            s = self._memo[memo_key]
            self._seen[full] = (s.span_ck, s.error_ck, s.counters)
            return dataclasses.replace(s, simulated_requests=s.simulated_requests + probed)
        span, err, counts = self._seen[full]
        return Service(span, err, counts, probed)

    def _may_hide(self, n: int, pace_ck: float) -> bool:
        """Could a probe show n requests well hidden under the pace? Not when even every
        bus busy (the peak rate) would take longer than that."""
        return n / self._peak_rate <= HIDDEN_BELOW * pace_ck

    def _probe(self, state: _Strata, reqs: OpRequests) -> int:
        """Measure the short probe window unless already done; the requests simulated now."""
        if state.probe:
            return 0
        state.probe, window = self._window(state, reqs, 0.5, self._probed)
        return window

    @staticmethod
    def _hidden(state: _Strata, n: int, pace_ck: float) -> bool:
        """Did the probe show n requests' DRAM time well hidden under the SMs' pace?"""
        return bool(state.probe) and n / state.probe <= HIDDEN_BELOW * pace_ck

    def _settle(self, state: _Strata, reqs: OpRequests) -> int:
        """Find how long a warm-up the op's windows need (state.warm) unless known. A
        queue-full fills the queues, but requests for scattered rows that FR-FCFS passes over
        while a stream's requests hit open rows (the embedding gradients' scattered writes)
        clog them over many queue-fulls: measured from a queue-full, those ops' windows ran
        8 % faster than the whole op, their bound 0.5 %. So where an op has a scattered
        (gather or strided) access, the first window's measured requests are measured again
        after WARM_STEPS times the warm-up; while their rates differ by over SETTLED_WITHIN,
        the warm-up grows by that factor, until the longer window would not fit in the op
        (then state.warm is past its size: simulate it in full). Sequential streams visit
        each row for many requests and take a queue-full (checking them too cost a third of
        a sweep's time and moved no op beyond its bound). Returns the requests simulated
        now."""
        if state.warm:
            return 0
        if not reqs.scattered:
            state.warm = self._warm
            return 0
        n, measured = reqs.count, self._measured
        warm, simulated = self._warm, 0
        # the requests of the op's first window, with the usual warm-up: that window, kept,
        # is counted where it is taken, unless a longer warm-up is needed
        strata = _first_strata(n // self._window_size(state.warm))
        centre = _jitter(strata, 0) / strata
        rate, first, _, _ = self._measure(reqs, centre, measured, warm)
        while True:
            longer = WARM_STEPS * warm
            if self._window_size(longer) > n:
                state.warm = n  # no window of the op reaches a steady state
                return simulated + first
            longer_rate, window, _, _ = self._measure(reqs, centre, measured, longer)
            simulated += window
            if abs(longer_rate - rate) <= SETTLED_WITHIN * longer_rate:
                state.warm = warm
                return simulated + (first if warm > self._warm else 0)
            warm, rate = longer, longer_rate

    def _window_size(self, warm: int = 0) -> int:
        """Requests in a window: its warm-up (a queue-full's unless given), the measured ones
        and a queue-full's cool-down."""
        return (warm or self._warm) + self._measured + self._warm

    def _refine(self, state: _Strata, reqs: OpRequests, pace_ck: float) -> int:
        """Measure windows until the DRAM time is either well hidden under the SMs' pace (one
        window says so) or known within REFINE_ABOVE: one window in each of 2 to 8 equal
        strata of the op's progress (FIRST_STRATA; as many as cost FIRST_SHARE of its
        requests), then twice as many strata (each keeps its window, its new half gets one) up
        to MAX_WINDOWS, or as many as cost half the op's requests. Returns the requests
        simulated now."""
        n = reqs.count
        simulated = 0
        windows = n // self._window_size(state.warm)   # the op's requests, in windows
        strata = _first_strata(windows)
        most = max(strata, min(MAX_WINDOWS, windows // 2))
        while True:
            for j in range(strata):
                if state.rates and self._dram_ck(state, n) <= HIDDEN_BELOW * pace_ck:
                    return simulated
                if _window_in(state.rates, strata, j) is None:
                    centre = (j + _jitter(strata, j)) / strata
                    state.rates[centre], window = self._window(state, reqs, centre,
                                                               self._measured)
                    simulated += window
            state.strata = strata
            dram_ck, err = _stratified(state.rates, strata, n)
            if err <= REFINE_ABOVE * dram_ck or 2 * strata > most:
                return simulated
            strata *= 2

    @staticmethod
    def _dram_ck(state: _Strata, n: int) -> float:
        """The DRAM time of n requests from the windows so far, each at its own rate."""
        return n * sum(1 / r for r in state.rates.values()) / len(state.rates)

    def _window(self, state: _Strata, reqs: OpRequests, centre: float, measured: int
                ) -> tuple[float, int]:
        """Measure one window and add what it cost to the state; (rate, requests)."""
        rate, window, fill, counted = self._measure(reqs, centre, measured, state.warm)
        state.overhead = state.overhead or fill
        state.simulated += window
        state.counts = counted if state.counts is None else state.counts + counted
        return rate, window


@dataclasses.dataclass
class _Strata:
    """What one traffic shape's probe, or one op's (or shape's) windows, measured so far."""

    rates: dict[float, float] = dataclasses.field(default_factory=dict)  # centre -> req per CK
    strata: int = 0                # strata that each hold a window (0: not all measured)
    probe: float = 0.0             # req per CK of the short probe window
    overhead: float = 0.0          # the first window's fill and drain, CK
    warm: int = 0                  # requests before each window's measured ones (0: not known)
    simulated: int = 0
    counts: Counters | None = None


def _first_strata(windows: int) -> int:
    """Strata to start with, for an op of this many windows' worth of requests."""
    return max(FIRST_STRATA[0], min(FIRST_STRATA[1], _power_of_two_upto(
        int(FIRST_SHARE * windows))))


def _power_of_two_upto(n: int) -> int:
    """The largest power of two not above n (1 for n < 1)."""
    return 1 << (max(n, 1).bit_length() - 1)


def _jitter(strata: int, j: int) -> float:
    """Where in stratum j of `strata` its window sits, as a fraction of the stratum: random
    but fixed, so that windows do not fall in step with a pattern that repeats along the op
    (bank conflicts that recur with the address bits the hash folds) and a run repeats."""
    return float(np.random.default_rng((strata, j)).random())


def _window_in(rates: dict[float, float], strata: int, j: int) -> float | None:
    """The rate of the window centred in stratum j of `strata`, if one is."""
    for centre, rate in rates.items():
        if j <= centre * strata < j + 1:
            return rate
    return None


def _stratified(rates: dict[float, float], strata: int, n: int) -> tuple[float, float]:
    """(time, bound) in CK of n requests split evenly among the strata, each at the rate of
    its window. The bound is the half-width of a CONFIDENCE interval: the variance of the sum
    from collapsed strata (strata in neighbouring pairs, each pair's variance estimated by its
    squared difference), with Student's t for as many degrees of freedom as pairs (two windows
    that happen to agree say little)."""
    times = [n / strata / _window_in(rates, strata, j) for j in range(strata)]
    variance = sum((times[j] - times[j + 1]) ** 2 for j in range(0, strata - 1, 2))
    return float(sum(times)), float(stdtrit(strata // 2, 0.5 + CONFIDENCE / 2)) * math.sqrt(
        variance)
