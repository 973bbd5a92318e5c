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

    def decode(self, addresses: np.ndarray, org: Organization) -> dict[str, np.ndarray]:
        """Vectorized decode of byte addresses (uint64) into field arrays (int64)."""
        counts = self.counts(org)
        rest = addresses.astype(np.uint64) // np.uint64(ACCESS_BYTES)
        out: dict[str, np.ndarray] = {}
        for name in self.fields:
            n = counts[name]
            if n & (n - 1) == 0:  # a bit field: masks and shifts, far cheaper than division
                out[name] = (rest & np.uint64(n - 1)).astype(np.int64)
                rest = rest >> np.uint64(n.bit_length() - 1)
            else:
                out[name] = (rest % np.uint64(n)).astype(np.int64)
                rest = rest // np.uint64(n)
        for target, source in self.hash:
            n = counts[target]
            if n & (n - 1) == 0:
                out[target] = out[target] ^ _fold_table(n, counts[source])[out[source]]
            else:
                out[target] = (out[target] + out[source]) % n
        return out
