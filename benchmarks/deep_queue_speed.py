"""Speed of the GDDR6 engine on the replay's own traffic: the GPU controller's deep queues.

Records what a sampled replay of a workload hands the engine (its windows and the small ops it
simulates in full), then times the engine alone on exactly those requests: each batch fed to a
fresh-from-idle T4 memory system with the GPU controller (256 reads and 512 writes queued per
channel), best of 3. dram_speed.py measures the reference system's shallow 32-entry buffers;
this is the path the replay and sweeps spend their time in.

    python benchmarks/deep_queue_speed.py [--workload transformer] [--hardware t4]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from simulator.config.hardware import load_hardware  # noqa: E402
from simulator.dram.system import MemorySystem  # noqa: E402
from simulator.gpu.memory_path import controller  # noqa: E402
from simulator.pipeline import analyze  # noqa: E402

REPEATS = 3


def record(workload: str, hardware: str) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The batches a sampled replay feeds the engine, arrivals relative to its clock then."""
    batches = []
    feed = MemorySystem.feed

    def recording(self, addresses, is_write, arrival=None, final=True, want_completion=True):
        rel = (np.zeros(len(addresses), np.int64) if arrival is None
               else np.asarray(arrival, np.int64) - self.now_ck)
        batches.append((np.array(addresses, np.uint64), np.array(is_write, np.int64), rel))
        return feed(self, addresses, is_write, arrival, final, want_completion)

    MemorySystem.feed = recording
    try:
        analyze(workload, hardware, fidelity="sampled")
    finally:
        MemorySystem.feed = feed
    return batches


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", default="transformer")
    ap.add_argument("--hardware", default="t4")
    args = ap.parse_args()
    hw = load_hardware(args.hardware)
    batches = record(args.workload, args.hardware)
    n = sum(len(a) for a, _, _ in batches)
    times = []
    for _ in range(REPEATS):
        ms = MemorySystem.from_hardware(hw, controller=controller(hw))
        t = time.perf_counter()
        for addresses, is_write, rel in batches:
            ms.idle()
            ms.feed(addresses, is_write, rel + ms.now_ck, final=True, want_completion=False)
        times.append(time.perf_counter() - t)
    best = min(times)
    print(f"{args.workload} on {args.hardware}, GPU controller: {len(batches)} batches, "
          f"{n:,} requests ({int(sum(w.sum() for _, w, _ in batches)):,} writes)")
    print(f"engine (decode included), best of {REPEATS}: {best:.2f} s, "
          f"{n / best / 1e6:.2f} M req/s")


if __name__ == "__main__":
    main()
