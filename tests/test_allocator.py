"""The caching-allocator model: PyTorch's rounding, pools, splitting and merging."""

import numpy as np
import pytest

from simulator.config.workload import load_workload
from simulator.workload.allocator import (
    LARGE_BUFFER,
    SMALL_BUFFER,
    CachingAllocator,
    place,
    rounded,
)
from simulator.workload.generate import build_trace
from simulator.workload.memory import profile


def test_rounding_and_segments():
    assert rounded(1) == 512 and rounded(512) == 512 and rounded(513) == 1024
    a = CachingAllocator()
    x = a.malloc(1000)               # small pool: one 2 MiB segment
    assert a.reserved == SMALL_BUFFER and a.allocated == 1024
    y = a.malloc(4000)               # split from the same segment
    assert a.reserved == SMALL_BUFFER and y == x + 1024
    z = a.malloc(3 << 20)            # large pool, under 10 MiB: a 20 MiB segment
    assert a.reserved == SMALL_BUFFER + LARGE_BUFFER
    v = a.malloc(12 << 20)           # best fit: split from the 17 MiB left of that segment
    assert a.reserved == SMALL_BUFFER + LARGE_BUFFER and v == z + (3 << 20)
    w = a.malloc((18 << 20) + 5)      # 10 MiB or more: rounded up to 2 MiB, its own segment
    assert a.reserved == SMALL_BUFFER + LARGE_BUFFER + (20 << 20)
    for addr in (x, y, z, v, w):
        a.free(addr)
    assert a.allocated == 0
    assert a.malloc(1000) == x       # freed blocks merged and reused, best fit


def test_reuse_after_free_reserves_nothing_new():
    a = CachingAllocator()
    addrs = [a.malloc(5 << 20) for _ in range(3)]
    reserved = a.reserved
    for addr in addrs:
        a.free(addr)
    a.malloc(14 << 20)               # fits in the merged 20 MiB segment
    assert a.reserved == reserved


@pytest.mark.parametrize("name", ["cnn", "transformer", "gpt2-small"])
def test_placement_of_a_step(name):
    trace = build_trace(load_workload(name))
    live = profile(trace).peak_bytes
    placed = place(trace)
    assert live <= placed.allocated_peak <= placed.reserved_peak
    assert placed.allocated_peak < 1.05 * live + (2 << 20)
    assert 0 <= placed.fragmentation < 1
    # every allocated tensor has an address; live tensors never overlap at the peak
    addresses = placed.address[placed.address >= 0]
    assert len(addresses) > 0 and (np.diff(np.sort(placed.reserved_timeline)) >= 0).all()
