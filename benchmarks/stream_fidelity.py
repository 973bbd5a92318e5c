"""workloads/stream.json replayed on the cards it was measured on, beside the measurements
(te42kyfo/gpu-benches@1c36d50 gpu-stream/, BabelStream; the kernel mapping is in
tests/reference_figures.py).

    python benchmarks/stream_fidelity.py [--fidelity sampled|cycle]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout's simulator, not an older installed copy
sys.path.insert(0, str(ROOT / "tests"))

from reference_figures import (  # noqa: E402
    STREAM_INIT_MEASURED,
    STREAM_INIT_PROXY,
    STREAM_MEASURED,
    stream_hardware,
)

from simulator.config.workload import load_workload  # noqa: E402
from simulator.pipeline import analyze  # noqa: E402
from simulator.units import GB  # noqa: E402

TOLERANCE = 0.05


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fidelity", default="sampled", choices=("sampled", "cycle"))
    args = ap.parse_args()
    print(f"BabelStream kernels over 3 x 2^25 doubles, {args.fidelity} replay, ECC off as "
          "measured; GB/s = BabelStream's bytes / kernel time (launch gap included)")
    print(f"{'card':<12} {'kernel':<6} {'simulated':>10} {'measured':>9} {'error':>8}  "
          f"{'% of peak':>9}")
    worst, misses = 0.0, []
    for card, measured in STREAM_MEASURED.items():
        t = time.perf_counter()
        r = analyze(ROOT / "workloads/stream.json", stream_hardware(card),
                    fidelity=args.fidelity)
        wall = time.perf_counter() - t
        peak = r.hardware.memory.peak_bandwidth_GBps
        for o in r.estimate.ops:
            got = o.op.bytes_moved / o.time_s / GB
            want = measured[o.op.name]
            err = got / want - 1
            worst = max(worst, abs(err))
            if abs(err) > TOLERANCE:
                misses.append(f"{card} {o.op.name}")
            print(f"{card:<12} {o.op.name:<6} {got:>10.1f} {want:>9.1f} {err * 100:>+7.1f} %  "
                  f"{got / peak * 100:>8.1f} %")
        print(f"{'':<12} ({wall:.1f} s wall for the five kernels)")
    print(f"worst error {worst * 100:.1f} %; outside {TOLERANCE * 100:.0f} %: "
          + (", ".join(misses) if misses else "none"))
    print("\nStores only (the `init` kernel, a = s, over the same arrays) against gpu-benches' "
          "init kernel")
    init = store_only()
    targets = {c: (c, v) for c, v in STREAM_INIT_MEASURED.items()} | STREAM_INIT_PROXY
    for card, (measured_on, want) in targets.items():
        r = analyze(init, stream_hardware(card), fidelity=args.fidelity)
        o = r.estimate.ops[0]
        got = o.op.bytes_moved / o.time_s / GB
        peak = r.hardware.memory.peak_bandwidth_GBps
        print(f"{card:<12} {'init':<6} {got:>10.1f} {want:>9.1f} {(got / want - 1) * 100:>+7.1f} %"
              f"  {got / peak * 100:>8.1f} %" + ("" if measured_on == card
                                                 else f"  (measured on the {measured_on})"))


def store_only():
    """workloads/stream.json with the store-only kernel alone."""
    spec = load_workload(ROOT / "workloads/stream.json")
    return dataclasses.replace(spec, model={**spec.model, "kernels": ["init"]})


if __name__ == "__main__":
    main()
