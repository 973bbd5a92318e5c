"""Wall time of a sampled sweep of the seed Transformer on a T4 grid, by worker count.

    python benchmarks/sweep_speed.py [--points N] [--workers 1,2] [--fidelity sampled]

The grid is data rate x bus width x L2 size (5 x 5 x 4 = 100 points); --points runs the first N
of them, and the figure for all 100 is extrapolated from the time per point. The points of one
memory system (its four L2 sizes) run on one worker, which reuses their DRAM windows, so runs
of whole groups (multiples of 4 points) extrapolate fairly.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from simulator.sweep import execute  # noqa: E402
from simulator.sweep.execute import run_sweep  # noqa: E402
from simulator.sweep.spec import build  # noqa: E402

AXES = {"data_rate_gbps": [8, 10, 12, 14, 16], "bus_width_bits": [128, 192, 256, 320, 384],
        "l2_bytes": [2 << 20, 4 << 20, 8 << 20, 16 << 20]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=100)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--fidelity", default="sampled")
    args = ap.parse_args()
    spec = build("bench", "t4", ["transformer"], AXES, args.fidelity, "benchmark")
    total = len(spec.points())
    print(f"{total}-point grid ({' x '.join(f'{k} {len(v)}' for k, v in AXES.items())}), "
          f"transformer on t4 variants, {args.fidelity}; running {args.points} points")
    for workers in map(int, args.workers.split(",")):
        execute._DRAM_MEMO.clear()  # each run starts cold (pool workers fork this process)
        execute._RUNS.clear()
        limited = spec if args.points >= total else _first(spec, args.points)
        with tempfile.TemporaryDirectory() as out:
            t = time.perf_counter()
            rows = run_sweep(limited, Path(out), workers=workers)
            wall = time.perf_counter() - t
        failed = sum(r["error"] is not None for r in rows)
        per = wall / len(rows)
        print(f"workers {workers}: {len(rows)} points in {wall:.1f} s ({per:.2f} s per point, "
              f"{failed} failed); {total} points would take {per * total:.0f} s", flush=True)


def _first(spec, n):
    """The spec cut to its first n points (the first values of the slowest-varying axes)."""
    import dataclasses

    axes, left = {}, n
    for k, v in reversed(list(spec.axes.items())):
        take = min(len(v), max(1, left))
        axes[k] = v[:take]
        left = -(-left // take)
    return dataclasses.replace(spec, axes=dict(reversed(list(axes.items()))))


if __name__ == "__main__":
    main()
