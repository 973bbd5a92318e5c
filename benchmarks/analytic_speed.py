"""Wall time of the analytic pipeline (trace generation, memory profile, roofline) per workload.

    python benchmarks/analytic_speed.py [repeats]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from simulator.config.hardware import load_hardware  # noqa: E402
from simulator.config.workload import load_workload, workload_names  # noqa: E402
from simulator.pipeline import analyze  # noqa: E402


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    hw = load_hardware("t4")
    print(f"{'workload':<14} {'ops':>7} {'median s':>10} {'min s':>10}  "
          f"(analytic, t4, {repeats} runs)")
    for name in workload_names():
        spec = load_workload(name)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            r = analyze(spec, hw, fidelity="analytic")
            times.append(time.perf_counter() - t0)
        print(f"{name:<14} {len(r.trace.ops):>7} {statistics.median(times):>10.4f} "
              f"{min(times):>10.4f}")


if __name__ == "__main__":
    main()
