"""An op's DRAM traffic as 32 B requests at the addresses the allocator gave its tensors.

A kernel streams all its operands at once, each at the pace of its share of the work, so the
accesses are interleaved by progress: the request k of an access with n requests sits at
progress k / n of the op. A multi-tensor (foreach) kernel instead walks its tensor lists in
step, tensor after tensor: its accesses repeat a sequence of shapes, and a request's progress
is its byte's place in its own list. Progress counts the op's own bytes, so an in-place op
still reads each element before it writes it back, whatever part of a list the L2 caught.
The replay hands requests over in progress order and, when the SMs set the pace, at the
cycle that progress is reached.

Patterns: sequential accesses run from the tensor's start (wrapping round when a tiled kernel
re-reads more than the tensor holds); strided ones touch 128 B lines spread evenly over the
tensor; gathers touch lines at pseudo-random places (seeded by op and tensor, so runs repeat).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from simulator.dram.organization import ACCESS_BYTES
from simulator.gpu.l2 import OpTraffic
from simulator.workload.trace import Pattern

LINE_BYTES = 128  # one L2 line: four 32 B sectors
_BURSTS_PER_LINE = LINE_BYTES // ACCESS_BYTES


@dataclass(frozen=True)
class Requests:
    address: np.ndarray    # uint64 byte addresses, 32 B aligned
    is_write: np.ndarray   # int64 0/1
    progress: np.ndarray   # float64 in [0, 1): where in the op each request falls

    def __len__(self) -> int:
        return len(self.address)


class OpRequests:
    """The requests of one op, produced a progress range at a time so a 30-million-request
    optimizer op never sits in memory whole."""

    def __init__(self, op_index: int, traffic: OpTraffic, address_of: np.ndarray,
                 capacity_bytes: int):
        self.traffic = traffic
        self.capacity = capacity_bytes
        self._parts = []
        sizes = [a.access.nbytes for a in traffic.accesses]
        period = _list_period([a.access.tensor.shape for a in traffic.accesses])
        lists = len(sizes) // period
        totals = [max(sum(sizes[j * period:(j + 1) * period]), 1) for j in range(lists)]
        self.count = 0
        for i, a in enumerate(traffic.accesses):
            n = -(-a.dram_bytes // ACCESS_BYTES)
            if n == 0:
                continue
            self.count += n
            first = i - i % period
            # where the access sits in its list and where its DRAM requests sit in the access,
            # in the op's own bytes (so lists stay in step whatever the L2 caught): an L2 hit
            # is the head of the access; a tiled re-read spreads over it
            before = sum(sizes[first:i])
            head = max(a.access.nbytes - a.dram_bytes, 0)
            step = ACCESS_BYTES * min(1.0, a.access.nbytes / a.dram_bytes)
            storage = a.access.tensor.storage
            base = max(int(address_of[storage.id]), 0)
            size = max(storage.nbytes // ACCESS_BYTES * ACCESS_BYTES, ACCESS_BYTES)
            seed = (op_index << 20) ^ storage.id
            self._parts.append((n, before + head, step, totals[i // period], base, size,
                                a.access.pattern, int(a.is_write), seed))

    @property
    def identity(self) -> tuple:
        """What fixes every request the op makes (equal identities, equal requests)."""
        return self.capacity, tuple(self._parts)

    def between(self, p0: float, p1: float) -> Requests:
        """Requests whose progress lies in [p0, p1), in progress order."""
        addrs, writes, progress = [], [], []
        for n, start, step, total, base, size, pattern, is_write, seed in self._parts:
            lo = max(0, math.ceil((p0 * total - start) / step))
            hi = min(n, math.ceil((p1 * total - start) / step))
            if hi <= lo:
                continue
            k = np.arange(lo, hi, dtype=np.int64)
            offset = _offsets(k, n, size, pattern, seed)
            addrs.append((base + offset) % self.capacity)
            writes.append(np.full(len(k), is_write, np.int64))
            progress.append((start + k * step) / total)
        if not addrs:
            return Requests(np.zeros(0, np.uint64), np.zeros(0, np.int64), np.zeros(0))
        p = np.concatenate(progress)
        order = np.argsort(p, kind="stable")
        return Requests(np.concatenate(addrs)[order].astype(np.uint64),
                        np.concatenate(writes)[order], p[order])


def _list_period(shapes: list[tuple[int, ...]]) -> int:
    """Length of the tensor lists a foreach kernel walks: the shortest period (2 or more) that
    the accesses' shapes repeat with; 1 when they do not repeat."""
    n = len(shapes)
    for m in range(2, n // 2 + 1):
        if n % m == 0 and all(shapes[i] == shapes[i % m] for i in range(m, n)):
            return m
    return 1


def _offsets(k: np.ndarray, n: int, size: int, pattern: Pattern, seed: int) -> np.ndarray:
    """Byte offsets within the tensor of requests k (of n)."""
    if pattern is Pattern.SEQUENTIAL:
        return (k * ACCESS_BYTES) % size
    line, sector = k // _BURSTS_PER_LINE, k % _BURSTS_PER_LINE
    lines_in_tensor = max(size // LINE_BYTES, 1)
    if pattern is Pattern.STRIDED:
        n_lines = max(-(-n // _BURSTS_PER_LINE), 1)
        where = (line * lines_in_tensor) // n_lines
    else:  # gather: a multiplicative hash of the line number spreads the lines
        where = ((line + seed) * 0x9E3779B1) % lines_in_tensor
    return (where * LINE_BYTES + sector * ACCESS_BYTES) % size
