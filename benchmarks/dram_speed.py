"""Speed of the GDDR6 engine on the reference traces, on this machine.

Prints: the first-call compile time (empty numba cache), engine throughput in requests per second
(trace parsing included, compiled code cached), and the whole `python -m simulator dram` process
wall time, median of 3, against the targets: 3.5 M req/s seq_read, 1 M req/s rand_read, and the
whole seq_read process under half of Ramulator 2.1's 2.91 s.

    python benchmarks/dram_speed.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reference_traces import ensure  # noqa: E402

HW = ROOT / "hardware/validation/ramulator2-gddr6-8ch.json"
RAMULATOR_S = {"seq_read": 2.91, "rand_read": 11.17, "triad": 9.33}
TARGET_RPS = {"seq_read": 3.5e6, "rand_read": 1.0e6}

INPROCESS = """
import sys, time
from pathlib import Path
import numpy as np
from simulator.config.hardware import load_hardware
from simulator.dram.system import MemorySystem
from simulator.dram.tracefile import read_blocks
hw = load_hardware(sys.argv[1])
if len(sys.argv) > 3:  # warm: load the compiled code first, so only parse + engine is timed
    MemorySystem.from_hardware(hw).run_trace(Path(sys.argv[3]))
t0 = time.perf_counter()
s = MemorySystem.from_hardware(hw).run_trace(Path(sys.argv[2]))
print(time.perf_counter() - t0, s.requests)
"""


def _inprocess(trace: Path, env=None, warm_with: Path | None = None) -> tuple[float, int]:
    args = [sys.executable, "-c", INPROCESS, str(HW), str(trace)]
    if warm_with:
        args.append(str(warm_with))
    out = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, check=True,
                         env=env).stdout.split()
    return float(out[0]), int(out[1])


def small_trace() -> Path:
    path = Path(tempfile.gettempdir()) / "gddr6-sim-warm.trace"
    if not path.exists():
        path.write_text("0x0 READ 0\n0x40 WRITE 0\n")
    return path


def main() -> None:
    traces = ensure()
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        small = Path(cache) / "tiny.trace"
        small.write_text("0x0 READ 0\n")
        cold, _ = _inprocess(small, env)
        warm, _ = _inprocess(small, env)
    print(f"first call in a fresh process, empty numba cache (compiling): {cold:.2f} s; "
          f"from the cache (numba start-up): {warm:.3f} s")
    _inprocess(traces["seq_read"])  # fill the project's own cache
    print(f"\n{'trace':<10} {'engine+parse s':>15} {'M req/s':>9} {'target':>8}   "
          f"{'process s':>9} {'Ramulator s':>11} {'speed-up':>8}")
    for name, path in traces.items():
        times, n = [], 0
        for _ in range(3):
            t, n = _inprocess(path, warm_with=small_trace())
            times.append(t)
        t = statistics.median(times)
        walls = []
        for _ in range(3):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "simulator", "dram", str(path), "--hardware",
                            str(HW), "--json"], cwd=ROOT, check=True, capture_output=True)
            walls.append(time.perf_counter() - t0)
        wall = statistics.median(walls)
        target = TARGET_RPS.get(name)
        print(f"{name:<10} {t:>15.3f} {n / t / 1e6:>9.2f} "
              f"{(f'{target / 1e6:.1f}') if target else '-':>8}   {wall:>9.2f} "
              f"{RAMULATOR_S[name]:>11.2f} {RAMULATOR_S[name] / wall:>7.1f}x")
    print("\ntarget for the whole seq_read process: < 1.455 s (half of Ramulator's 2.91 s)")


if __name__ == "__main__":
    main()
