"""DRAM service for the replay: an op's requests through the GDDR6 engine, in full or sampled.

Both fidelities share one `MemorySystem`, so open rows, queues and refresh timers carry from
op to op as on the card. Requests arrive at the cycle the SMs reach their progress (pace), or
as fast as the queues take them when the op is memory-bound.

`sampled` simulates eight windows of each large op, one in the middle of each eighth of its
progress (stratified sampling), each handed over at once, and measures what the DRAM sustains
on that stretch of the op's requests: its steady rate over 32768 requests, after a queue-full
of warm-up and before a queue-full of cool-down, so that neither filling nor draining the
queues counts. Each eighth then takes its share of the requests / its rate; the op takes the
longer of the SMs' pace and the eighths' sum, plus the first window's fill and drain
overhead. Two standard errors of that sum (collapsed strata: the variance of each pair of
neighbouring eighths estimated from their difference) is the op's reported error bound.
Ops whose traffic has the same shape (repeated layers) reuse the first one's result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from simulator.dram.system import Counters, MemorySystem
from simulator.replay.traffic import OpRequests

CHUNK_REQUESTS = 1 << 20     # cycle fidelity feeds big ops in chunks of this many requests
WINDOW_REQUESTS = 1 << 15    # sampled fidelity: requests measured per window ...
WINDOWS = 8                  # ... and windows per op, one in each eighth of its progress
FULL_BELOW = 2 * WINDOWS * WINDOW_REQUESTS  # sampled simulates ops this small in full


@dataclass(frozen=True)
class Service:
    """What the DRAM did for one op."""

    span_ck: float           # op start to last completion, CK cycles
    error_ck: float          # bound on span_ck's extrapolation error (0 when simulated in full)
    counters: Counters       # what the engine counted for the op (extrapolated when sampled)
    simulated_requests: int


def _arrivals(progress: np.ndarray, start_ck: int, pace_ck: float) -> np.ndarray:
    return start_ck + np.floor(progress * pace_ck).astype(np.int64)


class CycleMemory:
    """Every request of every op through the engine."""

    name = "cycle"

    def __init__(self, ms: MemorySystem):
        self.ms = ms

    def serve(self, reqs: OpRequests, start_ck: int, pace_ck: float, key: object) -> Service:
        before = self.ms.counters()
        n = reqs.count
        if n == 0:
            return Service(0.0, 0.0, before - before, 0)
        chunks = max(1, math.ceil(n / CHUNK_REQUESTS))
        for c in range(chunks):
            r = reqs.between(c / chunks, (c + 1) / chunks)
            self.ms.feed(r.address, r.is_write, _arrivals(r.progress, start_ck, pace_ck),
                         final=c == chunks - 1, want_completion=False)
        return Service(self.ms.last_completion_ck - start_ck, 0.0,
                       self.ms.counters() - before, n)


class SampledMemory(CycleMemory):
    name = "sampled"

    def __init__(self, ms: MemorySystem):
        super().__init__(ms)
        self._seen: dict[object, tuple[float, float, Counters]] = {}
        self._peak_rate = ms.org.channels / ms.timing.nBL  # requests per CK, every bus busy
        c = ms.controller
        self._queue_slots = ms.org.channels * (c.read_buffer + c.write_buffer)

    def serve(self, reqs: OpRequests, start_ck: int, pace_ck: float, key: object) -> Service:
        n = reqs.count
        if key in self._seen:
            span, err, counts = self._seen[key]
            return Service(span, err, counts, 0)
        if n < FULL_BELOW:
            s = super().serve(reqs, start_ck, pace_ck, key)
            self._seen[key] = (s.span_ck, s.error_ck, s.counters)
            return s
        before = self.ms.counters()
        warm = self._queue_slots
        w = (2 * warm + WINDOW_REQUESTS) / n
        times, simulated = [], 0
        overhead = 0.0
        for i in range(WINDOWS):
            p0 = min(max((i + 0.5) / WINDOWS - w / 2, 0.0), 1.0 - w)
            r = reqs.between(p0, p0 + w)
            t0 = max(self.ms.now_ck, start_ck)
            done = self.ms.feed(r.address, r.is_write, np.full(len(r), t0, np.int64),
                                final=True)
            # the measured completions are those after a queue-full of warm-up and before the
            # last queue-full (which drains with nothing behind it)
            done.sort()
            a, b = min(warm, len(r) - 1), max(len(r) - 1 - warm, 0)
            rate = min((b - a) / max(done[b] - done[a], 1), self._peak_rate)
            times.append(n / WINDOWS / rate)   # this stratum's share of the op, CK
            if i == 0:
                overhead = max(done[-1] - t0 - len(r) / rate, 0.0)
            simulated += len(r)
        dram_ck = float(sum(times))
        span = overhead + max(pace_ck, dram_ck)
        # two standard errors, with the variance of the sum from collapsed strata: neighbouring
        # eighths in pairs, each pair's variance estimated by its squared difference
        variance = sum((times[j] - times[j + 1]) ** 2 for j in range(0, WINDOWS, 2))
        err = 2 * math.sqrt(variance) if dram_ck > pace_ck else 0.0
        counts = _scaled(self.ms.counters() - before, n / simulated)
        counts.channel_busy[:] = np.minimum(counts.channel_busy, span)
        self._seen[key] = (span, err, counts)
        return Service(span, err, counts, simulated)


def _scaled(c: Counters, factor: float) -> Counters:
    return Counters(*(getattr(c, f) * factor for f in c.__dataclass_fields__))
