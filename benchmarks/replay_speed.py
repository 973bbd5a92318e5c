"""Wall time and agreement of the replay fidelities on the shipped workloads (T4 by default).

    python benchmarks/replay_speed.py [--cycle cnn,transformer] [--hardware t4] [WORKLOAD ...]

Prints, per workload: analytic, sampled and (where asked) cycle step time, each with its wall
time, the sampled error bound, and sampled against cycle. Cycle fidelity replays every 32 B
burst, so it is only run on the workloads named with --cycle; its row also gives the CPU time
the process used over the wall time (the cores it kept busy) and, on Linux, the share of the
machine's CPU time its host took for others while it ran (steal): on a shared machine the wall
time moves with that, not with the code.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from simulator.config.hardware import load_hardware  # noqa: E402
from simulator.config.workload import load_workload, workload_names  # noqa: E402
from simulator.pipeline import analyze  # noqa: E402


def _timed(spec, hw, fidelity):
    t = time.perf_counter()
    r = analyze(spec, hw, fidelity=fidelity)
    return r.estimate, time.perf_counter() - t


def _cpu_ticks() -> tuple[int, int] | None:
    """(steal, all) CPU ticks of the machine so far, from /proc/stat; None where there is none."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return (ticks[7] if len(ticks) > 7 else 0), sum(ticks[:8])


def _timed_cycle(spec, hw):
    """The cycle replay with its wall time, cores kept busy and the machine's steal share."""
    ticks, cpu = _cpu_ticks(), time.process_time()
    estimate, wall = _timed(spec, hw, "cycle")
    cores = (time.process_time() - cpu) / wall
    after = _cpu_ticks()
    steal = ((after[0] - ticks[0]) / max(after[1] - ticks[1], 1)
             if ticks is not None and after is not None else float("nan"))
    return estimate, wall, cores, steal


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("workloads", nargs="*")
    ap.add_argument("--hardware", default="t4")
    ap.add_argument("--cycle", default="cnn,transformer",
                    help="comma-separated workloads to also replay at cycle fidelity")
    args = ap.parse_args()
    hw = load_hardware(args.hardware)
    cycle = set(filter(None, args.cycle.split(",")))
    analyze("cnn", hw, fidelity="sampled")  # numba's compile or cache load, not counted
    print(f"hardware {hw.name}; step times in ms, wall times in s")
    print(f"{'workload':<12} {'analytic':>9} {'wall':>6} {'sampled':>9} {'+-bound':>8} "
          f"{'wall':>6} {'requests':>11} {'cycle':>9} {'wall':>7} {'sampled-cycle':>13} "
          f"{'cores':>5} {'steal':>6}")
    for name in args.workloads or workload_names():
        spec = load_workload(name)
        a, a_wall = _timed(spec, hw, "analytic")
        s, s_wall = _timed(spec, hw, "sampled")
        row = (f"{name:<12} {a.step_time_s * 1e3:>9.3f} {a_wall:>6.2f} "
               f"{s.step_time_s * 1e3:>9.3f} {s.replay.error_bound_s * 1e3:>8.3f} "
               f"{s_wall:>6.1f} {s.replay.simulated_requests:>11,}")
        if name in cycle:
            c, c_wall, cores, steal = _timed_cycle(spec, hw)
            row += (f" {c.step_time_s * 1e3:>9.3f} {c_wall:>7.1f} "
                    f"{(s.step_time_s / c.step_time_s - 1) * 100:>+12.2f}% "
                    f"{cores:>5.2f} {steal * 100:>5.1f}%")
        print(row, flush=True)


if __name__ == "__main__":
    main()
