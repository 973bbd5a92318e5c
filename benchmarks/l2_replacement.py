"""How much of a pass larger than the L2 a kernel called again and again still finds cached:
NeuSight's T4 elementwise ops against the model's LRU and against random replacement.

    python benchmarks/l2_replacement.py [--sample N]

NeuSight timed each op on one input and output, call after call (`collect.py`: 25 calls, the
fastest 5), so an op whose input and output together exceed the T4's 4 MB L2 (x times it)
finds part of them still cached from the call before. The model's L2 (simulator/gpu/l2.py) is
LRU, which keeps none of a cyclic pass larger than itself; a cache that evicts at random keeps
h = e^(-x (1 - h)) of it (a line survives one call's evictions, x (1 - h) capacities' worth).
Per bucket of x: the share of the bytes the measurement implies the L2 served,
h = (t_cold - t) / (t_cold - t_hit), from the model's times with no cache and with every byte
a hit; the random-replacement fixed point; the model's median error; and the error with the
random-replacement share in place of the model's hits (t_cold - h (t_cold - t_hit)). Each case
is timed as benchmarks/measured_fidelity.py times NeuSight's operators (timed_alone). Data:
benchmarks/measured/t4_fp32_vector_ops.csv.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import measured_fidelity as mf  # noqa: E402

from simulator.config.hardware import load_hardware  # noqa: E402
from simulator.gpu.l2 import cache_capacity  # noqa: E402
from simulator.workload.trace import Phase  # noqa: E402

NOT_ELEMENTWISE = ("softmax", "ln")  # the vector ops that pass over their rows more than once
BUCKETS = ((0.4, 0.8), (0.8, 1.0), (1.0, 1.2), (1.2, 1.5), (1.5, 2.0), (2.0, 3.0), (3.0, 4.0))


def random_replacement_hits(x: float) -> float:
    """The fixed point of h = e^(-x (1 - h)) below 1 (1 where the pass fits)."""
    if x <= 1.0:
        return 1.0
    h = 0.0
    for _ in range(500):
        h = math.exp(-x * (1.0 - h))
    return h


def run(sample: int = 300, buckets: tuple = BUCKETS) -> dict:
    """Per bucket of x: cases, the measured hit share, random replacement's, and the median
    errors of the model (LRU) and of random replacement's share."""
    hw = load_hardware("t4")
    cap = cache_capacity(hw)
    no_cache = dataclasses.replace(hw, l2_bytes=0, last_level_cache_bytes=0)
    every_hit = dataclasses.replace(hw, l2_bytes=1 << 40)
    cases = []
    for row in mf.read_rows("t4_fp32_vector_ops.csv"):
        if row["op"] not in NOT_ELEMENTWISE:
            tensors = 3 if row["op"] in mf.BINARY else 2  # inputs and output of each call
            x = tensors * 4 * int(row["rows"]) * int(row["cols"]) / cap
            if buckets[0][0] <= x < buckets[-1][1]:
                cases.append((x, row))
    cases = random.Random("l2-replacement").sample(cases, min(sample, len(cases)))
    rows = []
    for x, row in cases:
        trace = mf.vector_trace(row)
        ops = [o for o in trace.ops if o.phase is Phase.FORWARD]
        model, cold, hit = (mf.timed_alone(trace, ops, h, "sampled")
                            for h in (hw, no_cache, every_hit))
        random_repl = cold - random_replacement_hits(x) * (cold - hit)
        rows.append((x, float(row["latency_ms"]) * 1e-3, model, cold, hit, random_repl))
    out = {"l2_bytes": cap, "cases": len(rows), "buckets": []}
    for lo, hi in buckets:
        b = [r for r in rows if lo <= r[0] < hi]
        if not b:
            continue
        implied = [(cold - t) / (cold - hit) for _, t, _, cold, hit, _ in b
                   if cold - hit > 2e-6]
        out["buckets"].append({
            "x": (lo, hi), "cases": len(b),
            "measured_hits": statistics.median(implied) if implied and hi > 1.0 else None,
            "random_replacement_hits": random_replacement_hits((lo + hi) / 2),
            "model_error": statistics.median(r[2] / r[1] - 1 for r in b),
            "random_replacement_error": statistics.median(r[5] / r[1] - 1 for r in b)})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sample", type=int, default=300, help="cases, a seeded sample")
    args = ap.parse_args()
    doc = run(args.sample)
    print(f"T4 ({doc['l2_bytes'] / 2**20:.0f} MiB L2), elementwise ops called again and again, "
          f"{doc['cases']} cases; x = input and output bytes over the L2's")
    print(f"{'x':>9} {'cases':>6} {'measured h':>11} {'random repl. h':>15} "
          f"{'error, model (LRU)':>19} {'error, random repl.':>20}")
    for b in doc["buckets"]:
        h = "-" if b["measured_hits"] is None else f"{b['measured_hits']:.2f}"
        print(f"{b['x'][0]:.1f}-{b['x'][1]:.1f} {b['cases']:>6} {h:>11} "
              f"{b['random_replacement_hits']:>15.2f} {b['model_error']:>+19.1%} "
              f"{b['random_replacement_error']:>+20.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
