"""The L2 cache as the replay sees it: which of an op's bytes must come from DRAM.

A model at tensor granularity, not a tag array: the L2 holds the most recently touched storages
(least recently used goes first), up to its capacity. An op's read of a storage that is still
resident is served by the L2; the rest goes to DRAM. Writes allocate in the L2 (write-back):
a storage's dirty lines reach DRAM once while it stays resident, however often it is
rewritten (an in-place op, a kernel called again on the buffer the allocator hands back), and
are charged to the write that dirtied them. A storage larger than the cache streams through
it and leaves nothing reusable (an LRU scan evicts its own head before the next op reads it).
On AMD cards the memory-side Infinity Cache counts as part of this capacity.

An op's own allocations compete with what it reads. While it streams its inputs it allocates
its outputs (and the input bytes that missed); those evict the least recently used lines
first: whatever else the cache held, then the inputs' own oldest lines, which are the ones it
reads next, and from there on every read misses. So the resident inputs are hit only until
the op has allocated the room the rest of the cache held: a share min(1, room / allocated)
of them. A 33.5 MB score matrix on a 48 MB L2 is two-fifths hit by the elementwise op that
reads it and writes as much, not wholly.

Within one tiled GEMM or convolution, operand tiles are re-read from DRAM when the operands do
not fit: a blocked kernel whose tiles fill a third of the cache each moves at least
2 x M x N x K / b elements, with b = sqrt(capacity / (3 x element size)) (the Hong-Kung bound
with square tiles). Reads are raised to that when it exceeds the operands' own size.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass

from simulator.config.hardware import Hardware
from simulator.gpu.compute import TILED_KINDS
from simulator.units import GB
from simulator.workload.trace import DTYPE_BYTES, Access, Op

# When no L2 bandwidth is measured for a card: this multiple of its DRAM peak, the L40's
# measured ratio (about 5.25 TB/s over 864 GB/s: gpu-benches' gpu-l2-cache and its DRAM
# stream on the L40, github.com/te42kyfo/gpu-benches at 1c36d50).
ESTIMATED_L2_TO_DRAM_BANDWIDTH = 6.0


@dataclass(frozen=True)
class AccessTraffic:
    access: Access
    dram_bytes: int        # bytes the op moves between L2 and DRAM for this access
    is_write: bool


@dataclass(frozen=True)
class OpTraffic:
    accesses: tuple[AccessTraffic, ...]
    l2_bytes: int          # every byte the op reads or writes passes through the L2

    @property
    def dram_read_bytes(self) -> int:
        return sum(a.dram_bytes for a in self.accesses if not a.is_write)

    @property
    def dram_write_bytes(self) -> int:
        return sum(a.dram_bytes for a in self.accesses if a.is_write)

    @property
    def dram_bytes(self) -> int:
        return self.dram_read_bytes + self.dram_write_bytes


def l2_bandwidth_Bps(hw: Hardware) -> tuple[float, bool]:
    """(bytes per second, measured?)."""
    if hw.l2_bandwidth_GBps:
        return hw.l2_bandwidth_GBps * GB, True
    return ESTIMATED_L2_TO_DRAM_BANDWIDTH * hw.peak_bandwidth_Bps, False


def tiled_read_bytes(op: Op, capacity: int) -> int:
    """Least DRAM reads of a blocked GEMM or convolution with this cache (0 when unknown)."""
    if op.kind not in TILED_KINDS or not op.flops or capacity <= 0:
        return 0
    elem = DTYPE_BYTES[op.reads[0].tensor.dtype] if op.reads else 4
    block = math.sqrt(capacity / (3 * elem))
    return int(op.flops * elem / block)


class L2Cache:
    def __init__(self, capacity_bytes: int):
        self.capacity = capacity_bytes
        self._resident: OrderedDict[int, int] = OrderedDict()  # storage id -> bytes held
        self._held = 0
        self._dirty: set[int] = set()  # resident storages written since they came in

    def _touch(self, sid: int, nbytes: int) -> None:
        self._held -= self._resident.pop(sid, 0)
        if nbytes > self.capacity:  # streamed through: it evicted everything, and its own
            self._resident.clear()   # head before its tail arrived
            self._dirty.clear()
            self._held = 0
            return
        self._resident[sid] = nbytes
        self._held += nbytes
        while self._held > self.capacity:
            gone, evicted = self._resident.popitem(last=False)
            self._dirty.discard(gone)
            self._held -= evicted

    def _hit_share(self, op: Op) -> float:
        """The share of its resident input bytes an op reads before its own allocations
        evict them (the module docstring)."""
        inputs = {a.tensor.storage.id for a in op.reads}
        held = sum(n for sid, n in self._resident.items() if sid in inputs)
        read = sum(a.nbytes for a in op.reads)
        resident = sum(min(self._resident.get(a.tensor.storage.id, 0), a.nbytes)
                       for a in op.reads)
        allocated = sum(a.nbytes for a in op.writes) + max(read - resident, 0)
        room = self.capacity - held
        return 1.0 if allocated <= room else max(room, 0) / allocated

    def filter(self, op: Op) -> OpTraffic:
        out = []
        share = self._hit_share(op)
        seen: set[int] = set()  # a second pass over a storage the op just read (batch norm)
        for a in op.reads:
            sid = a.tensor.storage.id
            if sid in seen and a.tensor.storage.nbytes <= self.capacity:
                hit = a.nbytes * share
            else:
                hit = min(self._resident.get(sid, 0), a.nbytes) * share
            seen.add(sid)
            out.append(AccessTraffic(a, a.nbytes - int(hit), False))
        tiled = tiled_read_bytes(op, self.capacity)
        compulsory = sum(t.dram_bytes for t in out)
        if tiled > compulsory and compulsory:
            scale = tiled / compulsory
            out = [AccessTraffic(t.access, int(t.dram_bytes * scale), False) for t in out]
        for a in op.reads:
            self._touch(a.tensor.storage.id, max(a.nbytes, self._resident.get(
                a.tensor.storage.id, 0)))
        for a in op.writes:
            sid = a.tensor.storage.id
            rewritten = sid in self._dirty and self._resident.get(sid, 0) >= a.nbytes
            out.append(AccessTraffic(a, 0 if rewritten else a.nbytes, True))
            self._touch(sid, max(a.nbytes, self._resident.get(sid, 0)))
            if sid in self._resident:
                self._dirty.add(sid)
        return OpTraffic(tuple(out), op.bytes_moved)


def cache_capacity(hw: Hardware) -> int:
    return hw.l2_bytes + hw.last_level_cache_bytes
