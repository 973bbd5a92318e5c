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
tensor; gathers touch runs of lines at pseudo-random places (seeded by op and tensor, so replays
repeat), a run being what each index reads in one piece (an embedding row), a line where the
trace does not say.

Inline ECC (the check bits kept in the DRAM itself, in a carve-out above the data) costs
bandwidth as well as capacity: NVIDIA's CUDA C++ Best Practices Guide (section "Theoretical
Bandwidth Calculation") states that fetching the ECC bits for each memory transaction costs
GDDR cards about 20 % of their effective bandwidth, more for some access patterns. Each
128 B line the L2 moves takes one 32 B burst of check bits with it, in the same direction
(a write of a line's 8 B of check bits is a masked burst), at the check sector that covers
the line: one burst in four more, a fifth of the bus's time on a stream. Each burst is
addressed at its line's 8 B within the sector, so a read of a line's check bits is served from
a queued write of the same line's, never from a masked write of another line's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from simulator.config.hardware import ECC_DATA_PER_CHECK_SECTOR, Hardware
from simulator.config.organization import ACCESS_BYTES
from simulator.gpu.l2 import OpTraffic
from simulator.workload.trace import Pattern

LINE_BYTES = 128  # one L2 line: four 32 B sectors
_BURSTS_PER_LINE = LINE_BYTES // ACCESS_BYTES
# inline ECC: bytes of data one 32 B check sector covers (2 B of check bits per 32 B), and the
# share of the bursts that carry check bits (one with every line)
_CHECK_SECTOR_COVERS = ECC_DATA_PER_CHECK_SECTOR * ACCESS_BYTES
_LINES_PER_CHECK_SECTOR = _CHECK_SECTOR_COVERS // LINE_BYTES
_CHECK_BYTES_PER_LINE = LINE_BYTES // ECC_DATA_PER_CHECK_SECTOR
_CHECK_BURST_SHARE = 1 / (_BURSTS_PER_LINE + 1)
_SEQUENTIAL, _STRIDED, _GATHER = 0, 1, 2  # the patterns as _fill takes them
_PATTERN_CODE = {Pattern.SEQUENTIAL: _SEQUENTIAL, Pattern.STRIDED: _STRIDED,
                 Pattern.GATHER: _GATHER}
_GATHER_HASH = 0x9E3779B1  # a multiplicative hash of the line number spreads a gather's lines


def check_burst_share(hw: Hardware) -> float:
    """The share of the DRAM's bursts that carry inline ECC's check bits (0 without it): what
    a busy data bus moves of the step's own bytes is the rest."""
    return _CHECK_BURST_SHARE if hw.memory.ecc_reserved_bytes else 0.0


@dataclass(frozen=True)
class Requests:
    address: np.ndarray    # uint64 byte addresses, 32 B aligned (a check burst at its line's 8 B)
    is_write: np.ndarray   # int64 0/1
    progress: np.ndarray   # float64 in [0, 1): where in the op each request falls

    def __len__(self) -> int:
        return len(self.address)


class OpRequests:
    """The requests of one op, produced a progress range at a time so a 30-million-request
    optimizer op never sits in memory whole. `ecc_base`: where inline ECC's check bits start
    (data addresses lie below it); None when the card runs no inline ECC."""

    def __init__(self, op_index: int, traffic: OpTraffic, address_of: np.ndarray,
                 capacity_bytes: int, list_length: int = 0, ecc_base: int | None = None):
        self.traffic = traffic
        self.capacity = capacity_bytes
        self.ecc_base = -1 if ecc_base is None else ecc_base
        self._parts = []
        sizes = [a.access.nbytes for a in traffic.accesses]
        period = list_length or _list_period([a.access.tensor.shape for a in traffic.accesses])
        # whole lists, then any lone tensor beside them (a found-inf flag): a list of its own
        listed = len(sizes) // period * period
        totals = [max(sum(sizes[j:j + period]), 1) for j in range(0, listed, period)]
        self.count = 0
        for i, a in enumerate(traffic.accesses):
            n = -(-a.dram_bytes // ACCESS_BYTES)
            if n == 0:
                continue
            self.count += n + (_checks(0, n) if self.ecc_base >= 0 else 0)
            first = i - i % period if i < listed else i
            # where the access sits in its list and where its DRAM requests sit in the access,
            # in the op's own bytes (so lists stay in step whatever the L2 caught): an L2 hit
            # is the head of the access, in time and in addresses (the misses are its tail, so
            # an op that writes in place still reads each line before it writes it); a tiled
            # re-read spreads over it
            before = sum(sizes[first:i])
            head = max(a.access.nbytes - a.dram_bytes, 0)
            skip = head // ACCESS_BYTES * ACCESS_BYTES
            step = ACCESS_BYTES * min(1.0, a.access.nbytes / a.dram_bytes)
            storage = a.access.tensor.storage
            base = max(int(address_of[storage.id]), 0) + skip
            size = max((storage.nbytes - skip) // ACCESS_BYTES * ACCESS_BYTES, ACCESS_BYTES)
            seed = (op_index << 20) ^ storage.id
            total = totals[i // period] if i < listed else max(sizes[i], 1)
            run_lines = max(-(-a.access.run_bytes // LINE_BYTES), 1)
            self._parts.append((n, before + skip, step, total, base, size,
                                a.access.pattern, int(a.is_write), seed, run_lines))

    @property
    def scattered(self) -> bool:
        """Does a gather or strided access take part: lines at scattered places, each its own
        row visit, which FR-FCFS passes over while other requests hit open rows?"""
        return any(part[6] is not Pattern.SEQUENTIAL for part in self._parts)

    @property
    def identity(self) -> tuple:
        """What fixes every request the op makes (equal identities, equal requests)."""
        return self.capacity, self.ecc_base, tuple(self._parts)

    def between(self, p0: float, p1: float, scratch: RequestScratch | None = None) -> Requests:
        """Requests whose progress lies in [p0, p1), in progress order. With `scratch` they
        are views of its buffers, valid until its next use (fresh pages cost a fault each)."""
        parts = []
        for n, start, step, total, base, size, pattern, is_write, seed, run in self._parts:
            lo = max(0, math.ceil((p0 * total - start) / step))
            hi = min(n, math.ceil((p1 * total - start) / step))
            if hi > lo:
                parts.append((lo, hi, n, size, _PATTERN_CODE[pattern], seed, base, is_write,
                              run, start, step, total))
        count = sum(hi - lo for lo, hi, *_ in parts)
        if self.ecc_base >= 0:
            count += sum(_checks(lo, hi) for lo, hi, *_ in parts)
        scratch = scratch or RequestScratch()
        address, is_write, progress, spare = scratch.arrays(count)
        if not parts:
            return Requests(address.view(np.uint64), is_write, progress)
        ints = np.array([p[:9] for p in parts], np.int64)
        floats = np.array([p[9:] for p in parts], np.float64)
        if not _fill(ints, floats, self.capacity, self.ecc_base, address, is_write, progress):
            # accesses interleave by progress: a stable sort keeps each one's order
            order = np.argsort(progress, kind="stable")
            address, is_write, progress = _permuted(order, address, is_write, progress, spare)
        return Requests(address.view(np.uint64), is_write, progress)


class RequestScratch:
    """Buffers that `OpRequests.between` fills, kept from call to call."""

    def __init__(self):
        self._buf = np.empty((6, 0), np.int64)

    def arrays(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(address, is_write, progress, and spare rows for a permuted copy), n long."""
        if self._buf.shape[1] < n:
            self._buf = np.empty((6, n), np.int64)
        b = self._buf[:, :n]
        return b[0], b[1], b[2].view(np.float64), b[3:]


def _checks(lo: int, hi: int) -> int:
    """Check-bit bursts among an access's requests lo to hi - 1: one where each line starts."""
    return -(-hi // _BURSTS_PER_LINE) - -(-lo // _BURSTS_PER_LINE)


@njit(cache=True, nogil=True, error_model="numpy")
def _fill(ints, floats, capacity, ecc_base, address, is_write, progress):
    """Each access's requests lo to hi - 1 in turn: address (byte, int64), 0/1 write, and
    progress; with `ecc_base` >= 0, each line's first request is followed by the burst of its
    check bits. Returns whether the progress never decreases (no sort needed)."""
    q = 0
    ordered = True
    last = -1.0
    for j in range(ints.shape[0]):
        lo, hi, n, size = ints[j, 0], ints[j, 1], ints[j, 2], ints[j, 3]
        pattern, seed, base, write = ints[j, 4], ints[j, 5], ints[j, 6], ints[j, 7]
        run_lines = ints[j, 8]
        start, step, total = floats[j, 0], floats[j, 1], floats[j, 2]
        lines_in_tensor = max(size // LINE_BYTES, 1)
        runs_in_tensor = max(lines_in_tensor // run_lines, 1)
        n_lines = max(-(-n // _BURSTS_PER_LINE), 1)
        seq = (lo * ACCESS_BYTES) % size  # a sequential access's offset, stepped (no division)
        for k in range(lo, hi):
            if pattern == _SEQUENTIAL:
                offset = seq
                seq = seq + ACCESS_BYTES if seq + ACCESS_BYTES < size else 0
            else:
                line, sector = k // _BURSTS_PER_LINE, k % _BURSTS_PER_LINE
                if pattern == _STRIDED:  # lines spread evenly over the tensor
                    where = (line * lines_in_tensor) // n_lines
                else:                    # gather: runs of lines at hashed places
                    run = ((line // run_lines + seed) * _GATHER_HASH) % runs_in_tensor
                    where = run * run_lines + line % run_lines
                offset = (where * LINE_BYTES + sector * ACCESS_BYTES) % size
            byte = base + offset
            byte = byte if byte < capacity else byte % capacity
            p = (start + k * step) / total
            if p < last:
                ordered = False
            last = p
            address[q] = byte
            is_write[q] = write
            progress[q] = p
            q += 1
            if ecc_base >= 0 and k % _BURSTS_PER_LINE == 0:
                address[q] = ecc_base + byte // _CHECK_SECTOR_COVERS * ACCESS_BYTES + \
                    byte // LINE_BYTES % _LINES_PER_CHECK_SECTOR * _CHECK_BYTES_PER_LINE
                is_write[q] = write
                progress[q] = p
                q += 1
    return ordered


@njit(cache=True, nogil=True)
def _permuted(order, address, is_write, progress, spare):
    """The requests in `order`, into the spare rows (int64; the third viewed as float64)."""
    a, w, p = spare[0], spare[1], spare[2].view(np.float64)
    for i in range(order.shape[0]):
        j = order[i]
        a[i] = address[j]
        w[i] = is_write[j]
        p[i] = progress[j]
    return a, w, p


def _list_period(shapes: list[tuple[int, ...]]) -> int:
    """Length of the tensor lists a foreach kernel walks: the shortest period (2 or more) that
    the accesses' shapes repeat with; 1 when they do not repeat."""
    n = len(shapes)
    for m in range(2, n // 2 + 1):
        if n % m == 0 and all(shapes[i] == shapes[i % m] for i in range(m, n)):
            return m
    return 1
