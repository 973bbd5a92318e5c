"""Decoding physical addresses into channel, bank group, bank, row and column, by the card's
AddressMapping (simulator/config/address_mapping.py says what a mapping states)."""

from __future__ import annotations

import functools

import numpy as np
from numba import njit

from simulator.config.address_mapping import FIELDS, AddressMapping, parts
from simulator.config.organization import ACCESS_BYTES, Organization

_ACCESS_SHIFT = ACCESS_BYTES.bit_length() - 1  # log2 of the access size (32 B: BL16 x 16 bits)


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



def decode(mapping: AddressMapping, addresses: np.ndarray, org: Organization,
           out: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Decode of byte addresses (uint64) into field arrays (int64): views of `out`, an
    int64 (len(FIELDS), at least len(addresses)) scratch when given (fresh pages cost a
    fault each)."""
    out = (np.empty((len(FIELDS), len(addresses)), np.int64) if out is None
           else out[:, :len(addresses)])
    _decode(np.ascontiguousarray(addresses, np.uint64).view(np.int64), *_plan(mapping, org),
            out)
    return dict(zip(FIELDS, out, strict=True))


@functools.lru_cache(maxsize=64)
def _plan(mapping: AddressMapping, org: Organization) -> tuple[np.ndarray, ...]:
    """The decode as arrays for `_decode`, made once per organization: per part (least
    significant first) its field, size, step and log2 size; the fields' counts (FIELDS
    order); hash targets and sources, fold tables."""
    mapping.check(org)
    counts = mapping.counts(org)
    by_name = np.array([counts[name] for name in FIELDS], np.int64)
    # each part: its field, its count of values, and the field's value of one of its steps
    split = mapping.split_counts()
    order, sizes, steps, step = [], [], [], dict.fromkeys(FIELDS, 1)
    for name, bits in parts(mapping.fields):
        size = 1 << bits if bits else counts[name] // split[name]
        order.append(FIELDS.index(name))
        sizes.append(size)
        steps.append(step[name])
        step[name] *= size
    # log2 of each power-of-two part size (a bit field), -1 where the size is not one
    shifts = np.array([n.bit_length() - 1 if n & (n - 1) == 0 else -1 for n in sizes],
                      np.int64)
    order = np.array(order, np.int64)
    sizes = np.array(sizes, np.int64)
    steps = np.array(steps, np.int64)
    targets = np.array([FIELDS.index(t) for t, _ in mapping.hash], np.int64)
    sources = np.array([FIELDS.index(s) for _, s in mapping.hash], np.int64)
    width = max([counts[s] for _, s in mapping.hash], default=1)
    tables = np.zeros((len(mapping.hash), width), np.int64)  # rows unused where modulo
    for j, (target, source) in enumerate(mapping.hash):
        n = counts[target]
        if n & (n - 1) == 0:
            tables[j, :counts[source]] = _fold_table(n, counts[source])
    plan = (order, sizes, steps, shifts, by_name, targets, sources, tables)
    for a in plan:
        a.flags.writeable = False  # shared by every decode
    return plan


@njit(cache=True, nogil=True, error_model="numpy")
def _decode(access, order, sizes, steps, shifts, counts, targets, sources, tables, out):
    """out[f, i]: field f (FIELDS order) of the access at byte address access[i]; see
    AddressMapping. A part is the access index (the address over the access size) divided by
    the sizes of the parts below it, modulo its own, times its step within its field. Taken
    in turn: a power-of-two part is a shift and a mask of what the parts below leave; one
    that is not (24 channels) divides it, once per access, leaving the quotient for the
    parts above (dividing the address anew for each part above cost a division each, and
    made a 24-channel decode 5 times a 16-channel one). One pass per part and per hash, each
    a simple loop."""
    n = access.shape[0]
    rest = access        # what the parts below leave, shifted right by `shift`
    shift = _ACCESS_SHIFT
    divided = False      # whether `rest` is scratch (after a part that is not a power of two)
    for j in range(order.shape[0]):
        f = order[j]
        c = sizes[j]
        step = steps[j]
        if shifts[j] >= 0:
            if step == 1:  # the field's lowest part, or its only one
                for i in range(n):
                    out[f, i] = (rest[i] >> shift) & (c - 1)
            else:
                for i in range(n):
                    out[f, i] += ((rest[i] >> shift) & (c - 1)) * step
            shift += shifts[j]
        else:
            if not divided:  # the quotients into scratch, first needed here
                quotient = np.empty(n, np.int64)
                for i in range(n):
                    quotient[i] = rest[i] >> shift
                rest = quotient
                divided = True
            else:
                for i in range(n):
                    rest[i] >>= shift
            if step == 1:
                for i in range(n):
                    v = rest[i]
                    rest[i] = v // c
                    out[f, i] = v % c
            else:
                for i in range(n):
                    v = rest[i]
                    rest[i] = v // c
                    out[f, i] += (v % c) * step
            shift = 0
    for j in range(targets.shape[0]):
        t, s = targets[j], sources[j]
        if counts[t] & (counts[t] - 1) == 0:  # a power of two: XOR fold (its table)
            for i in range(n):
                out[t, i] ^= tables[j, out[s, i]]
        else:
            for i in range(n):
                out[t, i] = (out[t, i] + out[s, i]) % counts[t]
