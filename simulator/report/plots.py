"""The plotted reports of a step: roofline, bandwidth over time, memory timeline (matplotlib).

Each function returns a matplotlib Figure built without pyplot, so no display and no global
backend change is needed (a notebook keeps its own); `fig.savefig` writes PNG or SVG.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from simulator.config.hardware import INTEGER_PEAKS, peak_unit
from simulator.pipeline import RunResult
from simulator.replay.traffic import check_burst_share
from simulator.units import GB, TERA, byte_unit, fmt_bytes, fmt_seconds, time_unit
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
    points. A replay adds the DRAM ceiling it sustained (peak x the data bus's busy share in
    DRAM-bound ops) below the peak one, and each op's analytic position (hollow) joined to its
    simulated one, so the distance is what DRAM, L2 and compute losses cost."""
    hw, est = r.hardware, r.estimate
    bw = hw.peak_bandwidth_Bps
    fig, ax = _figure(11, 6)
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
    if simulated and est.replay.bottlenecks.dram_busy_share > 0:
        # the memory ceiling the replay found: the data bus's busy share in DRAM-bound ops
        # (the step's own bytes: inline ECC's check bits take their share of the busy bus)
        busy = est.replay.bottlenecks.dram_busy_share
        check = check_burst_share(hw)
        own = bw * busy * (1 - check)
        ax.plot(xs, np.minimum(own * xs, top), color="black", lw=1.0, ls="--",
                label=f"DRAM sustained {own / GB:.0f} GB/s\n(simulated: data bus busy "
                f"{busy * 100:.1f} %\nin DRAM-bound ops"
                + (f", {check * 100:.0f} % of it\ninline ECC's check bits)" if check else ")"))
    if simulated:
        l2 = est.replay.l2_bandwidth_GBps * GB
        ax.plot(xs, np.minimum(l2 * xs, top), color="purple", lw=1.0, ls="-.",
                label=f"L2 {l2 / GB:.0f} GB/s"
                + ("" if est.replay.l2_bandwidth_measured else " (estimated)"))
    for peak, keys in sorted(peaks.items()):
        ridge = peak / bw
        ax.hlines(peak, ridge, x_max, colors="grey", linestyles="--", lw=0.8)
        units = {peak_unit(k) for k in keys}
        ridge_unit = " or ".join(sorted(per for _, per in units))
        ax.annotate(" = ".join(f"{k} {peak / TERA:g} {peak_unit(k)[0]}" for k in keys)
                    + f" (ridge {ridge:.0f} {ridge_unit})",
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
        ax.annotate(f"{len(memory_only)} ops with no counted FLOPs: {fmt_seconds(t)} "
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
    ax.set_ylabel("achieved FLOP/s" + (" (int8 math: OP/s)" if any(
        k in INTEGER_PEAKS for keys in peaks.values() for k in keys) else ""))
    ax.set_title(f"{r.workload.name} on {hw.display_name}: roofline ({est.fidelity})")
    # beside the axes: inside, it hid the ceilings' labels and the ops near the ridge
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(True, which="both", lw=0.3, alpha=0.5)
    fig.tight_layout()
    return fig


def _step_edges(ops) -> np.ndarray:
    """Each op's start in the step, and the step's end (s): ops run back to back."""
    return np.concatenate([[0.0], np.cumsum([o.time_s for o in ops])])


def bandwidth_over_time(r: RunResult):
    """DRAM bandwidth each op draws, over the step's time, against the peak."""
    est = r.estimate
    edges = _step_edges(est.ops)
    t_unit, t_size = time_unit(edges[-1])
    peak = r.hardware.memory.peak_bandwidth_GBps
    fig, ax = _figure(9, 3.5)
    labelled = set()
    for o, a, b in zip(est.ops, edges[:-1], edges[1:], strict=True):
        if o.time_s > 0:
            bw = o.bytes_to_dram / o.time_s / GB
            phase = o.op.phase.value
            ax.fill_between([a / t_size, b / t_size], 0, bw, color=PHASE_COLORS[phase],
                            alpha=0.7, lw=0, label=None if phase in labelled else phase)
            labelled.add(phase)
    ax.axhline(peak, color="black", lw=1, ls="--", label=f"peak {peak:.0f} GB/s")
    ax.set_xlabel(f"time in the step ({t_unit})")
    ax.set_ylabel("DRAM bandwidth (GB/s)")
    ax.set_title("DRAM bandwidth over the step (each op's DRAM bytes over its time)")
    ax.set_xlim(0, max(edges[-1] / t_size, 1e-9))
    ax.set_ylim(0, peak * 1.1)
    # beside the axes: inside, it covered the busiest ops, which run at the peak line
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


# A capacity up to this many times the peak is drawn to scale. Above it the axis fits the
# peak and the legend names the capacity: a line at 16 GiB would flatten a 15 MiB step to
# nothing.
CAPACITY_IN_VIEW = 4.0


def _phase_runs(ops, edges: np.ndarray) -> list[tuple[str, float, float]]:
    """(phase, start, end) of each run of consecutive ops of one phase (s)."""
    runs: list[tuple[str, float, float]] = []
    for o, a, b in zip(ops, edges[:-1], edges[1:], strict=True):
        phase = o.op.phase.value
        if runs and runs[-1][0] == phase:
            runs[-1] = (phase, runs[-1][1], b)
        else:
            runs.append((phase, a, b))
    return runs


def memory_timeline(r: RunResult):
    """Live bytes by category while each op runs, each op over its own time, against the
    card's capacity. Drawn from what is live during an op (its outputs included), not after
    it, so that the highest point is the peak the reports state."""
    est, mem = r.estimate, r.memory
    # the capacity less the runtime's reserve (context, library workspaces): what fits
    cap, peak = r.hardware.usable_bytes, mem.peak_bytes
    # the caching allocator's reserve, what an out-of-memory error checks (at least the peak)
    reserve = r.placement.reserved_peak if r.placement is not None else peak
    edges = _step_edges(est.ops)
    t_unit, t_size = time_unit(edges[-1])
    cap_in_view = cap <= CAPACITY_IN_VIEW * peak
    b_unit, b_size = byte_unit(max(reserve, cap) if cap_in_view else reserve)
    fig, ax = _figure(9, 3.5)
    x = edges / t_size
    if len(est.ops):
        layers = mem.during.T / b_size
        # (step="post": an op's bytes hold from its start to the next op's; the last value
        # is repeated to close the step)
        ax.stackplot(x, np.concatenate([layers, layers[:, -1:]], axis=1), step="post",
                     alpha=0.85, labels=[c.value if layers[i].any() else f"_{c.value}"
                                         for i, c in enumerate(CATEGORIES)])
        p = mem.peak_op
        ax.plot([(x[p] + x[p + 1]) / 2], [peak / b_size], "v", color="black", ms=6,
                label=f"peak, at {est.ops[p].op.name}")
    for i, (phase, a, b) in enumerate(_phase_runs(est.ops, edges)):
        if i:
            ax.axvline(a / t_size, color="grey", lw=0.6, ls=":")
        ax.text((a + b) / 2 / t_size, 1.0, phase, transform=ax.get_xaxis_transform(),
                ha="center", va="bottom", fontsize=7, color=PHASE_COLORS[phase])
    if r.placement is not None:
        ax.axhline(reserve / b_size, color="dimgrey", lw=1, ls=":",
                   label=f"allocator reserve\n{fmt_bytes(reserve)} (peak)")
    top = max(reserve, cap) if cap_in_view else reserve
    if cap_in_view:
        ax.axhline(cap / b_size, color="black", lw=1, ls="--",
                   label=f"usable {fmt_bytes(cap)}\n(capacity less the\nruntime reserve)")
    else:  # (in the legend only)
        ax.plot([], [], color="black", lw=1, ls="--",
                label=f"usable {fmt_bytes(cap)},\noff scale")
    ax.set_ylim(0, top * 1.1 / b_size if top else 1)
    ax.set_xlim(0, max(x[-1], 1e-9))
    ax.set_xlabel(f"time in the step ({t_unit})")
    ax.set_ylabel(f"live ({b_unit})")
    verdict = (f"DOES NOT FIT in {fmt_bytes(cap)} usable" if not r.fits
               else f"reserve DOES NOT FIT in {fmt_bytes(cap)} usable"
               if r.reserve_fits is False
               else f"{peak / cap * 100:.1f} % of {fmt_bytes(cap)} usable")
    ax.set_title(f"memory over the step: peak {fmt_bytes(peak)}, {verdict}", pad=14)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


FIGURES = {"roofline": roofline, "bandwidth": bandwidth_over_time, "memory": memory_timeline}
