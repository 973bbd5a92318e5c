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

A row kernel that reads each row more than once (layer norm: moments, then normalize;
softmax over long rows: max, sum, write; their backwards) gives each row to one block and
reads it again moments after the first pass. Whether the row is still cached then is a
matter of reuse distance, not of the tensor's size: between a row's two reads the other
blocks in flight bring their own rows in. With the card holding R blocks at once
(gpu/occupancy.py) and W = R x the bytes of one row of every re-read operand, the distance is
u x W, u spread evenly over [ROW_REUSE_SPREAD] (blocks are at every stage of their rows), and
a re-read misses where u x W exceeds the cache: a share clip((u1 - C / W) / (u1 - u0), 0, 1).
The spread is fitted (`benchmarks/fit_row_reuse.py`) on NeuSight's layer norm and long-row
softmax against ReLU on the same tensors, on a Tesla P4, P100, V100 and two A100s, where the
re-reads range from all hits to all misses; it holds on the T4 and the L4, which it did not
see. The first pass, and a re-read of a tensor the L2 holds whole, follow the rules above. A
re-read that finds its row cached adds no L2 time: on the T4 and the L4, layer norms whose
rows stay cached take what ReLU takes on the same tensor (the SM's L1 holds the rows of its
own blocks).

Within one tiled GEMM or convolution, operand tiles are re-read from DRAM when the operands do
not fit: a blocked kernel whose tiles fill a third of the cache each moves at least
2 x M x N x K / b elements, with b = sqrt(capacity / (3 x element size)) (the Hong-Kung bound
with square tiles). Reads are raised to that when it exceeds the operands' own size.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from simulator.config.hardware import Hardware
from simulator.gpu.compute import TILED_KINDS
from simulator.gpu.occupancy import resident_blocks
from simulator.units import GB
from simulator.workload.trace import DTYPE_BYTES, Access, Op

# When no L2 bandwidth is measured for a card: this multiple of its DRAM peak, the L40's
# measured ratio (about 5.25 TB/s over 864 GB/s: gpu-benches' gpu-l2-cache and its DRAM
# stream on the L40, github.com/te42kyfo/gpu-benches at 1c36d50).
ESTIMATED_L2_TO_DRAM_BANDWIDTH = 6.0
# A row re-read's reuse distance as multiples of the bytes of the rows in flight: spread evenly
# between these two (fitted by benchmarks/fit_row_reuse.py; the module docstring)
ROW_REUSE_SPREAD = (0.221, 3.015)


def row_reread_miss(inflight_bytes: float, capacity: int,
                    spread: tuple[float, float] = ROW_REUSE_SPREAD) -> float:
    """The share of a row kernel's re-reads that miss a cache of `capacity` bytes while
    `inflight_bytes` of rows are in flight (the module docstring; `spread`: another one, as
    the fit tries)."""
    if inflight_bytes <= 0:
        return 0.0
    if capacity <= 0:
        return 1.0
    u0, u1 = spread
    return min(1.0, max(0.0, (u1 - capacity / inflight_bytes) / (u1 - u0)))


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
    def __init__(self, capacity_bytes: int,
                 blocks_in_flight: Callable[[int], int | None] | None = None):
        """`blocks_in_flight`: the blocks of so many threads the card holds at once (None
        where not known: a row's re-read then hits, as on a card whose L2 holds the rows)."""
        self.capacity = capacity_bytes
        self.blocks_in_flight = blocks_in_flight
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

    def _row_reread_miss(self, op: Op) -> float:
        """The share of the op's row re-reads (`Access.passes`) that miss (the module
        docstring)."""
        rows = [a for a in op.reads if a.passes > 1]
        if not rows or self.blocks_in_flight is None:
            return 0.0
        blocks = self.blocks_in_flight(max(a.block_threads for a in rows))
        if blocks is None:
            return 0.0
        row_bytes = sum(a.tensor.shape[-1] * DTYPE_BYTES[a.tensor.dtype] if a.tensor.shape
                        else a.nbytes for a in rows)
        return row_reread_miss(blocks * row_bytes, self.capacity)

    def filter(self, op: Op) -> OpTraffic:
        out = []
        share = self._hit_share(op)
        reread_miss = self._row_reread_miss(op)
        refetched = 0  # what a row kernel's later passes fetch from DRAM again
        seen: set[int] = set()  # a second pass over a storage the op just read (batch norm)
        for a in op.reads:
            sid = a.tensor.storage.id
            held_whole = a.tensor.storage.nbytes <= self.capacity
            if sid in seen and held_whole:
                hit = a.nbytes * share
            else:
                hit = min(self._resident.get(sid, 0), a.nbytes) * share
            seen.add(sid)
            # a row kernel's later passes: what the first pass left of the row in the cache
            # (a tensor the cache holds whole is still there; else the reuse distance decides)
            again = (a.passes - 1) * a.nbytes
            missed_again = 0 if held_whole else int(again * reread_miss)
            refetched += missed_again
            out.append(AccessTraffic(a, a.nbytes - int(hit) + missed_again, False))
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
        # what the later passes fetch from DRAM crosses the L2 again; what they find cached
        # costs no time a kernel shows (the T4's and L4's layer norms whose rows stay cached
        # take what ReLU takes on the same tensor: benchmarks/fit_row_reuse.py)
        return OpTraffic(tuple(out), op.bytes_moved + refetched)


def cache_capacity(hw: Hardware) -> int:
    return hw.l2_bytes + hw.last_level_cache_bytes


def l2_cache(hw: Hardware, capacity: int | None = None) -> L2Cache:
    """The card's L2 as the replay sees it (`capacity`: another size, for a what-if)."""
    return L2Cache(cache_capacity(hw) if capacity is None else capacity,
                   lambda threads: resident_blocks(hw, threads))
