"""Speed of the GDDR6 engine on the reference traces, on this machine.

Prints the first-call compile time (empty numba cache), then per trace, in one warm process,
the median of 5 runs of: trace parsing alone, the engine alone (requests per second), and the
whole `python -m simulator dram` process (median of 5 wall times, start-up, parsing and JSON
output included), against the targets: 3.5 M req/s on seq_read, 1 M req/s on rand_read, and the
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
REPEATS = 5

FIRST_CALL = """
import sys, time
from pathlib import Path
from simulator.config.hardware import load_hardware
from simulator.dram.system import MemorySystem
hw = load_hardware(sys.argv[1])
t0 = time.perf_counter()
MemorySystem.from_hardware(hw).run_trace(Path(sys.argv[2]))
print(time.perf_counter() - t0)
"""


def first_call_seconds(env: dict, trace: Path) -> float:
    out = subprocess.run([sys.executable, "-c", FIRST_CALL, str(HW), str(trace)], cwd=ROOT,
                         capture_output=True, text=True, check=True, env=env).stdout
    return float(out)


def in_process(path: Path) -> tuple[float, float, int]:
    import numpy as np

    from simulator.config.hardware import load_hardware
    from simulator.dram.system import MemorySystem
    from simulator.dram.tracefile import read_blocks

    hw = load_hardware(HW)
    parse, engine = [], []
    n = 0
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        blocks = list(read_blocks(path))
        parse.append(time.perf_counter() - t0)
        addr = np.concatenate([b.address for b in blocks])
        write = np.concatenate([b.is_write for b in blocks])
        cycle = np.concatenate([b.cycle for b in blocks])
        system = MemorySystem.from_hardware(hw)
        t0 = time.perf_counter()
        system.feed(addr, write, cycle, final=True, want_completion=False)
        engine.append(time.perf_counter() - t0)
        n = len(addr)
    return statistics.median(parse), statistics.median(engine), n


def main() -> None:
    traces = ensure()
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        small = Path(cache) / "tiny.trace"
        small.write_text("0x0 READ 0\n0x40 WRITE 0\n")
        cold = first_call_seconds(env, small)
        warm = first_call_seconds(env, small)
    print(f"first call in a fresh process, empty numba cache (compiling): {cold:.2f} s; "
          f"the same call from the cache (numba start-up): {warm:.3f} s")
    print(f"\n{'trace':<10} {'parse s':>8} {'engine s':>9} {'M req/s':>8} {'target':>7}   "
          f"{'process s':>9} {'Ramulator s':>11} {'speed-up':>8}")
    for name, path in traces.items():
        parse, engine, n = in_process(path)
        walls = []
        for _ in range(REPEATS):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "simulator", "dram", str(path), "--hardware",
                            str(HW), "--json"], cwd=ROOT, check=True, capture_output=True)
            walls.append(time.perf_counter() - t0)
        wall = statistics.median(walls)
        target = TARGET_RPS.get(name)
        print(f"{name:<10} {parse:>8.3f} {engine:>9.3f} {n / engine / 1e6:>8.2f} "
              f"{(f'{target / 1e6:.1f}') if target else '-':>7}   {wall:>9.2f} "
              f"{RAMULATOR_S[name]:>11.2f} {RAMULATOR_S[name] / wall:>7.1f}x")
    print("\nmedians of 5; target for the whole seq_read process: < 1.455 s "
          "(half of Ramulator's 2.91 s)")


if __name__ == "__main__":
    main()
