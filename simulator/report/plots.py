"""The plotted reports of a step: roofline, bandwidth over time, memory timeline (matplotlib).

Each function returns a matplotlib Figure built without pyplot, so no display and no global
backend change is needed (a notebook keeps its own); `fig.savefig` writes PNG or SVG.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from simulator.pipeline import RunResult
from simulator.units import GB, TERA, GiB
from simulator.workload.memory import CATEGORIES
from simulator.workload.trace import PHASES


def _figure(width: float, height: float):
    fig = Figure(figsize=(width, height))
    return fig, fig.subplots()

PHASE_COLORS = {"forward": "#1f77b4", "backward": "#d62728", "optimizer": "#2ca02c"}
# ops whose FLOPs FlopCounterMode does not count sit at this intensity on the log axis
NO_FLOPS_AI = 1e-3


def _positions(ops) -> tuple[np.ndarray, np.ndarray]:
    """(FLOP per DRAM byte, achieved FLOP/s) of each op; ops without FLOPs get 0 FLOP/s."""
    ai = np.array([o.op.flops / o.bytes_to_dram if o.op.flops and o.bytes_to_dram
                   else NO_FLOPS_AI for o in ops])
    perf = np.array([o.op.flops / o.time_s if o.time_s and o.op.flops else 0.0 for o in ops])
    return ai, perf


def roofline(r: RunResult):
    """Each op at (FLOP per DRAM byte, achieved FLOP/s), sized by its time, coloured by phase,
    under the DRAM and L2 ceilings and one compute ceiling per data type, with the ridge
    points. A replay also shows each op's analytic position (hollow), joined to its simulated
    one, so the distance is what DRAM, L2 and compute losses cost."""
    hw, est = r.hardware, r.estimate
    bw = hw.peak_bandwidth_Bps
    fig, ax = _figure(9, 6)
    ai, perf = _positions(est.ops)
    simulated = est.replay is not None
    if simulated:
        ai_a, perf_a = _positions(est.analytic.ops)
    else:
        ai_a, perf_a = ai, perf
    counted = np.concatenate([ai[perf > 0], ai_a[perf_a > 0]])
    x_min = min(0.1, float(counted.min()) / 4) if len(counted) else 0.1
    x_max = max(1e4, float(ai.max()) * 4)
    peaks: dict[float, list[str]] = {}  # one line per distinct ceiling, naming every unit on it
    for key, value in hw.peak_tflops.items():
        if value:
            peaks.setdefault(value * TERA, []).append(key)
    top = max(peaks) if peaks else bw * x_max
    xs = np.logspace(np.log10(x_min), np.log10(x_max), 200)
    ax.plot(xs, np.minimum(bw * xs, top), color="black", lw=1.5,
            label=f"DRAM {hw.memory.peak_bandwidth_GBps:.0f} GB/s")
    if simulated:
        l2 = est.replay.l2_bandwidth_GBps * GB
        ax.plot(xs, np.minimum(l2 * xs, top), color="purple", lw=1.0, ls="-.",
                label=f"L2 {l2 / GB:.0f} GB/s"
                + ("" if est.replay.l2_bandwidth_measured else " (estimated)"))
    for peak, keys in sorted(peaks.items()):
        ridge = peak / bw
        ax.hlines(peak, ridge, x_max, colors="grey", linestyles="--", lw=0.8)
        ax.annotate(f"{' = '.join(keys)} {peak / TERA:g} T (ridge {ridge:.0f} FLOP/B)",
                    (x_max, peak), fontsize=7, ha="right", va="bottom", color="grey")
        ax.plot([ridge], [peak], marker="o", color="grey", markersize=3)
    total = est.step_time_s or 1.0
    for phase in PHASES:
        sel = [i for i, o in enumerate(est.ops) if o.op.phase == phase and o.op.flops]
        if not sel:
            continue
        color = PHASE_COLORS[phase.value]
        sizes = [max(6.0, 600 * est.ops[i].time_s / total) for i in sel]
        if simulated:
            ax.scatter(ai_a[sel], perf_a[sel], s=sizes, facecolors="none", edgecolors=color,
                       alpha=0.5, lw=0.8, label=f"{phase.value} ops, analytic")
            for i in sel:
                ax.plot([ai_a[i], ai[i]], [perf_a[i], perf[i]], color=color, lw=0.4,
                        alpha=0.4)
        ax.scatter(ai[sel], perf[sel], s=sizes, alpha=0.6, color=color, edgecolors="none",
                   label=f"{phase.value} ops" + (f", {est.fidelity}" if simulated else ""))
    memory_only = [o for o in est.ops if not o.op.flops]
    if memory_only:
        t = sum(o.time_s for o in memory_only)
        ax.annotate(f"{len(memory_only)} ops with no counted FLOPs: {t * 1e3:.2f} ms "
                    f"({t / total * 100:.0f} % of the step), not placed",
                    (0.01, 0.01), xycoords="axes fraction", fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_min, x_max)
    positive = np.concatenate([perf[perf > 0], perf_a[perf_a > 0]])
    low = min(float(positive.min()) / 4, top / 1e4) if len(positive) else top / 1e4
    ax.set_ylim(low, top * 3)
    ax.set_xlabel("arithmetic intensity (FLOP per DRAM byte" + (", after the L2)" if simulated
                                                              else ")"))
    ax.set_ylabel("achieved FLOP/s")
    ax.set_title(f"{r.workload.name} on {hw.display_name}: roofline ({est.fidelity})")
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(True, which="both", lw=0.3, alpha=0.5)
    fig.tight_layout()
    return fig


def bandwidth_over_time(r: RunResult):
    """DRAM bandwidth each op draws, over the step's time, against the peak."""
    est = r.estimate
    fig, ax = _figure(9, 3.5)
    start = 0.0
    for o in est.ops:
        if o.time_s > 0:
            bw = o.bytes_to_dram / o.time_s / GB
            ax.fill_between([start * 1e3, (start + o.time_s) * 1e3], 0, bw,
                            color=PHASE_COLORS[o.op.phase.value], alpha=0.7, lw=0)
        start += o.time_s
    ax.axhline(r.hardware.memory.peak_bandwidth_GBps, color="black", lw=1, ls="--",
               label="peak")
    ax.set_xlabel("time in the step (ms)")
    ax.set_ylabel("DRAM bandwidth (GB/s)")
    ax.set_title("bandwidth over time (forward blue, backward red, optimizer green)")
    ax.set_xlim(0, max(start * 1e3, 1e-9))
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    return fig


def memory_timeline(r: RunResult):
    """Live bytes by category over the step's time, against the card's capacity."""
    est, mem = r.estimate, r.memory
    ends = np.cumsum([o.time_s for o in est.ops]) * 1e3
    fig, ax = _figure(9, 3.5)
    layers = mem.live_after.T / GiB
    labels = [c.value for c in CATEGORIES]
    ax.stackplot(ends, layers, labels=labels, alpha=0.85, step="pre")
    ax.axhline(r.hardware.memory.capacity_bytes / GiB, color="black", lw=1, ls="--",
               label="capacity")
    ax.set_xlabel("time in the step (ms)")
    ax.set_ylabel("live (GiB)")
    ax.set_title(f"memory over the step: peak {mem.peak_bytes / GiB:.2f} GiB")
    ax.legend(fontsize=7, loc="upper left", ncol=4)
    fig.tight_layout()
    return fig


FIGURES = {"roofline": roofline, "bandwidth": bandwidth_over_time, "memory": memory_timeline}
