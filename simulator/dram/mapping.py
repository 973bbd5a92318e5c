"""Physical address -> (channel, bank group, bank, row, column), as plain data.

A mapping lists the fields from least to most significant above the 32 B access offset
(Ramulator's RoBaRaCoCh is ["channel", "column", "bankgroup", "bank", "row"]). Each field takes
its count's worth of the address by division, so channel counts that are not powers of two
(24 channels on a 384-bit bus) interleave by modulo, and power-of-two ones are bit fields.
`hash` entries fold a source field into a target, as GPUs do to spread strided streams: XOR
of all the source's bits, log2(count) at a time, where the target count is a power of two;
addition modulo the count otherwise.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from numba import njit

from simulator.dram.organization import ACCESS_BYTES, Organization

FIELDS = ("channel", "bankgroup", "bank", "row", "column")
RAMULATOR_ROBARACOCH = ("channel", "column", "bankgroup", "bank", "row")
# Default: consecutive accesses rotate channels, then bank groups (so a stream alternates groups
# and reaches nCCDS), then columns of one row, then banks; channel and bank hashed with the row.
DEFAULT_FIELDS = ("channel", "bankgroup", "column", "bank", "row")
DEFAULT_HASH = (("channel", "row"), ("bankgroup", "row"), ("bank", "row"))


def _fold(values: np.ndarray, n: int) -> np.ndarray:
    """XOR of every log2(n)-bit slice of the values: all their bits take part, as in GPU
    address hashes, so arrays a power of two apart do not land in the same channel and bank."""
    bits = n.bit_length() - 1
    out = np.zeros_like(values)
    rest = values.copy()
    while bits and rest.any():
        out ^= rest & (n - 1)
        rest >>= bits
    return out


@functools.lru_cache(maxsize=64)
def _fold_table(n: int, count: int) -> np.ndarray:
    """`_fold` of every value below count, to look up (rows are far fewer than requests)."""
    table = _fold(np.arange(count, dtype=np.int64), n)
    table.flags.writeable = False  # shared by every decode
    return table


@dataclass(frozen=True)
class AddressMapping:
    fields: tuple[str, ...] = DEFAULT_FIELDS
    hash: tuple[tuple[str, str], ...] = DEFAULT_HASH

    def counts(self, org: Organization) -> dict[str, int]:
        return {"channel": org.channels, "bankgroup": org.bank_groups,
                "bank": org.banks_per_group, "row": org.rows, "column": org.columns}

    def decode(self, addresses: np.ndarray, org: Organization,
               out: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Decode of byte addresses (uint64) into field arrays (int64): views of `out`, an
        int64 (len(FIELDS), at least len(addresses)) scratch when given (fresh pages cost a
        fault each)."""
        out = (np.empty((len(FIELDS), len(addresses)), np.int64) if out is None
               else out[:, :len(addresses)])
        _decode(np.ascontiguousarray(addresses, np.uint64).view(np.int64) // ACCESS_BYTES,
                *self._plan(org), out)
        return dict(zip(FIELDS, out, strict=True))

    @functools.lru_cache(maxsize=64)  # noqa: B019 - mappings and organizations are few
    def _plan(self, org: Organization) -> tuple[np.ndarray, ...]:
        """The decode as arrays for `_decode`, made once per organization: field order,
        counts and log2 counts (FIELDS order), hash targets and sources, fold tables."""
        counts = self.counts(org)
        by_name = np.array([counts[name] for name in FIELDS], np.int64)
        # log2 of each power-of-two count (a bit field), -1 where the count is not one
        shifts = np.array([n.bit_length() - 1 if n & (n - 1) == 0 else -1
                           for n in by_name.tolist()], np.int64)
        order = np.array([FIELDS.index(name) for name in self.fields], np.int64)
        targets = np.array([FIELDS.index(t) for t, _ in self.hash], np.int64)
        sources = np.array([FIELDS.index(s) for _, s in self.hash], np.int64)
        width = max([counts[s] for _, s in self.hash], default=1)
        tables = np.zeros((len(self.hash), width), np.int64)  # rows unused where modulo
        for j, (target, source) in enumerate(self.hash):
            n = counts[target]
            if n & (n - 1) == 0:
                tables[j, :counts[source]] = _fold_table(n, counts[source])
        plan = (order, by_name, shifts, targets, sources, tables)
        for a in plan:
            a.flags.writeable = False  # shared by every decode
        return plan


@njit(cache=True, nogil=True, error_model="numpy")
def _decode(access, order, counts, shifts, targets, sources, tables, out):
    """out[f, i]: field f (FIELDS order) of access i; see AddressMapping. A field is the
    access divided by the counts below it, modulo its own: masks and shifts while every count
    so far is a power of two. One pass per field and per hash, each a simple loop."""
    n = access.shape[0]
    below = 1  # the product of the counts of the fields below
    shift = 0  # its log2, while every one is a power of two (else -1)
    for j in range(order.shape[0]):
        f = order[j]
        c = counts[f]
        if shift >= 0 and shifts[f] >= 0:
            for i in range(n):
                out[f, i] = (access[i] >> shift) & (c - 1)
            shift += shifts[f]
        else:
            shift = -1
            for i in range(n):
                out[f, i] = (access[i] // below) % c
        below *= c
    for j in range(targets.shape[0]):
        t, s = targets[j], sources[j]
        if shifts[t] >= 0:
            for i in range(n):
                out[t, i] ^= tables[j, out[s, i]]
        else:
            for i in range(n):
                out[t, i] = (out[t, i] + out[s, i]) % counts[t]
