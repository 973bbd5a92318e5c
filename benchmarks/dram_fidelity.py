"""The GDDR6 engine beside Ramulator 2.1 on the reference traces (benchmarks/reference_traces.py).

    python benchmarks/dram_fidelity.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reference_traces import ensure  # noqa: E402

from simulator.config.hardware import load_hardware  # noqa: E402
from simulator.dram.system import MemorySystem  # noqa: E402

HW = ROOT / "hardware/validation/ramulator2-gddr6-8ch.json"
# cycles, GB/s, latency mean/p50/p99 (CK), row-hit rate, REFab, ACT, RD, WR
REFERENCE = {
    "seq_read": (354_007, 158.59, 117.1, 110, 416, 0.9830, 848, 16_992, 1_000_000, 0),
    "rand_read": (1_578_532, 35.56, 277.4, 249, 753, 0.0004, 3_784, 999_576, 1_000_000, 0),
    "triad": (1_209_564, 46.41, 469.2, 490, 941, 0.8743, 2_896, 125_662, 666_668, 333_334),
}
LABELS = ("cycles (CK)", "bandwidth (GB/s)", "latency mean (CK)", "latency p50 (CK)",
          "latency p99 (CK)", "row-hit rate", "REFab", "ACT", "RD", "WR")


def main() -> None:
    hw = load_hardware(HW)
    traces = ensure()
    print("limits: bandwidth within 5 %, mean read latency within 15 % of Ramulator 2.1")
    for name, ref in REFERENCE.items():
        s = MemorySystem.from_hardware(hw).run_trace(traces[name])
        lat = s.read_latency_cycles
        ours = (s.cycles, s.bandwidth_GBps, lat["mean"], lat["p50"], lat["p99"], s.row_hit_rate,
                s.commands["REFab"], s.commands["ACT"], s.commands["RD"], s.commands["WR"])
        print(f"\n{name}")
        print(f"  {'figure':<20} {'simulator':>14} {'Ramulator 2.1':>14} {'error':>9}")
        for label, a, b in zip(LABELS, ours, ref, strict=True):
            err = f"{(a / b - 1) * 100:+.2f} %" if b else "-"
            fmt = ",.4f" if isinstance(a, float) and a < 1 else ",.2f" if isinstance(a, float) \
                else ","
            print(f"  {label:<20} {a:>14{fmt}} {b:>14,} {err:>9}")


if __name__ == "__main__":
    main()
