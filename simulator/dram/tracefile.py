"""Streaming reader for DRAMsim3-format address traces: `0x<hex address> READ|WRITE <cycle>`.

The file is read in binary blocks and parsed by a compiled scanner into numpy arrays, a block at
a time, so a 10-million-line trace never exists as Python objects.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numba import njit

from simulator.errors import InputError, open_input

BLOCK_BYTES = 1 << 24
LINE_FORMAT = "0x<hex address> READ|WRITE <cycle>"  # one request a line

_OK, _BAD = 0, 1


@njit(cache=True)
def _is_space(c):
    return c == 32 or c == 9 or c == 13


@njit(cache=True)
def _parse(buf, n, addr, write, cycle, line_no, first_line):
    """Parse whole lines of buf[:n]. Returns (requests, bytes consumed, bad line number or -1)."""
    i = 0
    k = 0
    line = first_line
    while i < n:
        # find the end of this line; an unterminated tail waits for the next block
        j = i
        while j < n and buf[j] != 10:
            j += 1
        if j >= n:
            return k, i, -1
        p = i
        while p < j and _is_space(buf[p]):
            p += 1
        if p == j or buf[p] == 35:  # blank line or '#' comment
            i = j + 1
            line += 1
            continue
        # address: 0x followed by hex digits
        if not (p + 2 < j and buf[p] == 48 and (buf[p + 1] == 120 or buf[p + 1] == 88)):
            return k, i, line
        p += 2
        a = np.uint64(0)
        digits = 0
        while p < j and not _is_space(buf[p]):
            c = buf[p]
            if 48 <= c <= 57:
                v = c - 48
            elif 97 <= c <= 102:
                v = c - 87
            elif 65 <= c <= 70:
                v = c - 55
            else:
                return k, i, line
            a = a * np.uint64(16) + np.uint64(v)
            digits += 1
            p += 1
        if digits == 0 or digits > 16:
            return k, i, line
        while p < j and _is_space(buf[p]):
            p += 1
        # operation
        q = p
        while q < j and not _is_space(buf[q]):
            q += 1
        word = q - p
        is_w = -1
        if word == 4 and (buf[p] | 32) == 114 and (buf[p + 1] | 32) == 101 and \
                (buf[p + 2] | 32) == 97 and (buf[p + 3] | 32) == 100:
            is_w = 0
        elif word == 5 and (buf[p] | 32) == 119 and (buf[p + 1] | 32) == 114 and \
                (buf[p + 2] | 32) == 105 and (buf[p + 3] | 32) == 116 and (buf[p + 4] | 32) == 101:
            is_w = 1
        if is_w < 0:
            return k, i, line
        p = q
        while p < j and _is_space(buf[p]):
            p += 1
        # cycle
        cyc = 0
        digits = 0
        while p < j and 48 <= buf[p] <= 57:
            cyc = cyc * 10 + (buf[p] - 48)
            digits += 1
            p += 1
        while p < j and _is_space(buf[p]):
            p += 1
        if digits == 0 or digits > 18 or p != j:
            return k, i, line
        addr[k] = a
        write[k] = is_w
        cycle[k] = cyc
        line_no[k] = line
        k += 1
        i = j + 1
        line += 1
    return k, i, -1


@dataclass
class TraceBlock:
    address: np.ndarray   # uint64 byte addresses
    is_write: np.ndarray  # int8
    cycle: np.ndarray     # int64 arrival, CK cycles
    line: np.ndarray      # int64 1-based line numbers, for error messages


def _bad_line(path: Path, line: int) -> InputError:
    with path.open("rb") as f:
        for n, raw in enumerate(f, 1):
            if n == line:
                text = raw.decode("utf-8", "replace").rstrip("\r\n")
                break
        else:
            text = ""
    shown = text if len(text) <= 80 else text[:77] + "..."
    return InputError(f"expected '{LINE_FORMAT}', got {shown!r}", file=f"{path}:{line}")


def _check_order(path: Path, last: np.int64, cycle: np.ndarray, line_no: np.ndarray) -> None:
    """Requests arrive in trace order, so a cycle below the one before would be a request
    from the past: refused, naming its line (a simulator that takes it at once, as DRAMsim3's
    trace reader does, times it from a clock it never had)."""
    back = np.flatnonzero(np.diff(cycle, prepend=last) < 0)
    if len(back):
        i = int(back[0])
        before = int(cycle[i - 1]) if i else int(last)
        raise InputError(f"expected arrival cycles that never decrease (CK, in trace order), got "
                         f"{int(cycle[i])} after {before}", file=f"{path}:{int(line_no[i])}")


def read_blocks(path: Path, block_bytes: int = BLOCK_BYTES) -> Iterator[TraceBlock]:
    """The trace's requests, a block at a time. A file without one (blank lines and comments
    only) is refused: its statistics would be zeros, not figures."""
    requests = 0
    last = np.int64(-1)  # the cycle of the request before this block's first
    with open_input(path, "an address trace file", binary=True) as f:
        carry = b""
        line = 1
        while True:
            data = f.read(block_bytes)
            eof = not data
            chunk = carry + data
            if eof:
                if not chunk.strip():
                    break
                if not chunk.endswith(b"\n"):
                    chunk += b"\n"
            buf = np.frombuffer(chunk, dtype=np.uint8)
            cap = chunk.count(b"\n") + 1
            addr = np.empty(cap, np.uint64)
            write = np.empty(cap, np.int8)
            cycle = np.empty(cap, np.int64)
            line_no = np.empty(cap, np.int64)
            k, used, bad = _parse(buf, len(buf), addr, write, cycle, line_no, line)
            if bad >= 0:
                raise _bad_line(path, bad)
            line += chunk.count(b"\n", 0, used)
            carry = chunk[used:]
            if k:
                _check_order(path, last, cycle[:k], line_no[:k])
                last = cycle[k - 1]
                requests += k
                yield TraceBlock(addr[:k], write[:k], cycle[:k], line_no[:k])
            if eof:
                break
    if not requests:
        raise InputError(f"expected at least one '{LINE_FORMAT}' line; the file has none "
                         "(blank lines and comments only)", file=str(path))
