"""Speed of the GDDR6 engine on the replay's own traffic: the GPU controller's deep queues.

Records what a replay of a workload hands the engine, then times the engine alone on exactly
those requests: each batch fed to a fresh-from-idle memory system with the GPU controller (256
reads and 512 writes queued per channel), best of 3. With `--fidelity sampled` (the default)
the batches are its windows and the small ops it simulates in full; with `--fidelity cycle`,
every `--every`-th feed of the step (chunks of up to 1 M requests at the SMs' pace; the step
takes about 30 s to record). dram_speed.py measures the reference system's shallow 32-entry
buffers; this is the path the replay and sweeps spend their time in.

It also prints a digest of every request's completion cycle: a change to the engine that should
not change its results must leave the digest as it was (for the same arguments).

    python benchmarks/deep_queue_speed.py [--workload transformer] [--hardware t4]
        [--fidelity sampled|cycle] [--every N] [--threads N]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from simulator.config.hardware import load_hardware  # noqa: E402
from simulator.dram import system  # noqa: E402
from simulator.dram.system import MemorySystem  # noqa: E402
from simulator.pipeline import analyze  # noqa: E402

REPEATS = 3
SMALLEST_CYCLE_FEED = 1000  # cycle feeds below this many requests are not kept


def record(workload: str, hardware: str, fidelity: str = "sampled", every: int = 1
           ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The batches a replay feeds the engine (every `every`-th), arrivals relative to its
    clock then."""
    batches = []
    feed = MemorySystem.feed
    seen = [0]

    def recording(self, addresses, is_write, arrival=None, final=True, want_completion=True):
        keep = fidelity == "sampled" or len(addresses) >= SMALLEST_CYCLE_FEED
        if keep and seen[0] % every == 0:
            rel = (np.zeros(len(addresses), np.int64) if arrival is None
                   else np.asarray(arrival, np.int64) - self.now_ck)
            batches.append((np.array(addresses, np.uint64), np.array(is_write, np.int64), rel))
        seen[0] += keep
        return feed(self, addresses, is_write, arrival, final, want_completion)

    MemorySystem.feed = recording
    try:
        analyze(workload, hardware, fidelity=fidelity)
    finally:
        MemorySystem.feed = feed
    return batches


def serve(hw, batches, want_completion: bool) -> tuple[float, str]:
    """Seconds to feed every batch to a fresh memory system, each from idle and run to its
    end, and the digest of the completion cycles (empty without them)."""
    ms = MemorySystem.from_hardware(hw)
    digest = hashlib.sha1()
    t = time.perf_counter()
    for addresses, is_write, rel in batches:
        ms.idle()
        done = ms.feed(addresses, is_write, rel + ms.now_ck, final=True,
                       want_completion=want_completion)
        digest.update(done.tobytes())
    return time.perf_counter() - t, digest.hexdigest()[:12] if want_completion else ""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", default="transformer")
    ap.add_argument("--hardware", default="t4")
    ap.add_argument("--fidelity", choices=("sampled", "cycle"), default="sampled",
                    help="the replay whose feeds are recorded")
    ap.add_argument("--every", type=int, default=1, help="keep every N-th feed")
    ap.add_argument("--threads", type=int, default=0,
                    help="engine threads (default: the CPUs this process may use)")
    args = ap.parse_args()
    if args.every < 1 or args.threads < 0:
        ap.error("--every takes 1 or more, --threads 0 (all CPUs) or more")
    if args.threads:
        system.set_engine_threads(args.threads)
    hw = load_hardware(args.hardware)
    batches = record(args.workload, args.hardware, args.fidelity, args.every)
    n = sum(len(a) for a, _, _ in batches)
    best = min(serve(hw, batches, False)[0] for _ in range(REPEATS))
    _, digest = serve(hw, batches, True)
    print(f"{args.workload} on {args.hardware}, GPU controller, {args.fidelity} feeds"
          f"{f' (every {args.every}th)' if args.every > 1 else ''}: {len(batches)} batches, "
          f"{n:,} requests ({int(sum(w.sum() for _, w, _ in batches)):,} writes)")
    print(f"engine (decode included), {system.engine_threads()} thread(s), best of {REPEATS}: "
          f"{best:.2f} s, {n / best / 1e6:.2f} M req/s; completion digest {digest}")


if __name__ == "__main__":
    main()
