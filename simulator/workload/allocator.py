"""PyTorch's CUDA caching allocator, modelled: where each tensor lives, and what is reserved.

The rules (c10/cuda/CUDACachingAllocator.cpp): sizes round up to 512 B; requests of at most
1 MiB come from a small pool of 2 MiB segments, larger ones from a large pool whose segments are
20 MiB for requests under 10 MiB and the request rounded up to 2 MiB otherwise; the smallest
free block that fits is used (best fit) and split when the rest is worth keeping (any rest in the
small pool, more than 1 MiB in the large pool); freed blocks go back to their pool and merge with
free neighbours of the same segment; segments are never returned (no empty_cache). One stream.

The step runs twice: the first warms the cache as a real first iteration does, the second is
measured, so `reserved` is the steady state a training loop sees.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from simulator.workload.memory import lifetimes
from simulator.workload.trace import Category, Tensor, Trace

MIN_BLOCK = 512
SMALL_SIZE = 1 << 20
SMALL_BUFFER = 2 << 20
LARGE_BUFFER = 20 << 20
MIN_LARGE_ALLOC = 10 << 20
ROUND_LARGE = 2 << 20
SEGMENT_ALIGN = 2 << 20  # where the model places each new segment in the address space


def rounded(nbytes: int) -> int:
    return max(MIN_BLOCK, -(-nbytes // MIN_BLOCK) * MIN_BLOCK)


def segment_size(size: int) -> int:
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return -(-size // ROUND_LARGE) * ROUND_LARGE


@dataclass
class _Block:
    addr: int
    size: int
    segment: int
    free: bool
    prev: _Block | None = None
    next: _Block | None = None


class CachingAllocator:
    def __init__(self, base_address: int = 0):
        self._free: dict[bool, list[tuple[int, int]]] = {True: [], False: []}  # small? -> sorted
        self._blocks: dict[int, _Block] = {}
        self._small_segment: dict[int, bool] = {}
        self._next_segment = base_address
        self.reserved = 0
        self.allocated = 0

    def malloc(self, nbytes: int) -> int:
        size = rounded(nbytes)
        small = size <= SMALL_SIZE
        pool = self._free[small]
        i = bisect.bisect_left(pool, (size, -1))
        if i < len(pool):
            _, addr = pool.pop(i)
            block = self._blocks[addr]
        else:  # cudaMalloc a new segment
            seg = segment_size(size)
            addr = self._next_segment
            self._next_segment += -(-seg // SEGMENT_ALIGN) * SEGMENT_ALIGN
            self.reserved += seg
            block = _Block(addr, seg, segment=addr, free=True)
            self._blocks[addr] = block
            self._small_segment[addr] = small
        rest = block.size - size
        if (small and rest >= MIN_BLOCK) or (not small and rest > SMALL_SIZE):
            tail = _Block(block.addr + size, rest, block.segment, True, prev=block,
                          next=block.next)
            if block.next is not None:
                block.next.prev = tail
            block.next = tail
            block.size = size
            self._blocks[tail.addr] = tail
            bisect.insort(pool, (tail.size, tail.addr))
        block.free = False
        self.allocated += block.size
        return block.addr

    def free(self, addr: int) -> None:
        block = self._blocks[addr]
        self.allocated -= block.size
        block.free = True
        pool = self._free[self._small_segment[block.segment]]
        for other in (block.prev, block.next):
            if other is not None and other.free:
                pool.remove((other.size, other.addr))
                first, second = (other, block) if other is block.prev else (block, other)
                first.size += second.size
                first.next = second.next
                if second.next is not None:
                    second.next.prev = first
                del self._blocks[second.addr]
                block = first
        bisect.insort(pool, (block.size, block.addr))


@dataclass(frozen=True)
class Placement:
    """Where the measured (second) step's tensors live, and what the allocator held."""

    address: np.ndarray        # per tensor id: device byte address (-1: never allocated)
    allocated_peak: int        # bytes in live blocks, rounded to 512 B, at the worst moment
    reserved_peak: int         # bytes of segments the allocator holds (cudaMalloc'd)
    reserved_timeline: np.ndarray   # after each op
    allocated_timeline: np.ndarray  # after each op

    @property
    def fragmentation(self) -> float:
        """Share of reserved bytes not in live blocks when reservation peaks."""
        return 1 - self.allocated_peak / self.reserved_peak if self.reserved_peak else 0.0


STEP_START = (Category.INPUT,)
PERSISTENT_ACROSS_STEPS = (Category.PARAMETER, Category.OPTIMIZER_STATE, Category.BUFFER)


def place(trace: Trace, base_address: int = 0) -> Placement:
    n_ops = len(trace.ops)
    first, last = lifetimes(trace)
    tensors = [t for t in trace.tensors if t.alias_of is None and first[t.id] < n_ops]
    allocs: list[list[Tensor]] = [[] for _ in range(n_ops)]
    frees: list[list[int]] = [[] for _ in range(n_ops)]
    for t in tensors:
        if first[t.id] >= 0:
            allocs[first[t.id]].append(t)
        if last[t.id] < n_ops:
            frees[last[t.id]].append(t.id)
    a = CachingAllocator(base_address)
    address = np.full(len(trace.tensors), -1, dtype=np.int64)
    kept = set(trace.held_gradients)  # .grad tensors zero_grad fills instead of freeing
    across = [t for t in tensors if t.category in PERSISTENT_ACROSS_STEPS or t.id in kept]
    for t in across:  # parameters, optimizer state and buffers exist before the loop
        address[t.id] = a.malloc(t.nbytes)
    across_ids = {t.id for t in across}
    held: list[int] = []  # what the previous step left allocated: .grad, logits, loss
    reserved = np.zeros(n_ops, np.int64)
    allocated = np.zeros(n_ops, np.int64)
    peak_alloc = 0
    for step in range(2):
        for tid in held:  # zero_grad(set_to_none=True); the loop's variables move on
            a.free(address[tid])
        held = []
        for t in tensors:
            if t.category in STEP_START:
                address[t.id] = a.malloc(t.nbytes)
        for i in range(n_ops):
            for t in allocs[i]:
                address[t.id] = a.malloc(t.nbytes)
            if step == 1:
                peak_alloc = max(peak_alloc, a.allocated)
            for tid in frees[i]:
                a.free(address[tid])
            reserved[i] = a.reserved
            allocated[i] = a.allocated
        held = [t.id for t in tensors if last[t.id] >= n_ops and t.id not in across_ids]
    return Placement(address, peak_alloc, a.reserved, reserved, allocated)
