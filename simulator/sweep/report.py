"""A finished sweep as files: CSV and JSON of every point, plots, and a sensitivity summary.

Plots vary one parameter at a time with the others at their first listed value: step time (on a
log scale where workloads' times differ tenfold), the speedup over the first value (what the
change buys, comparable across workloads) and achieved DRAM bandwidth per workload, the
memory-bound share of the step (DRAM- or L2-bound ops; above 50 % memory bounds most of the
step) and, where the card's price is known, steps per hour per $1000. Two varied parameters
also get a heatmap of step time.

Elasticity of step time to a parameter, d ln(step) / d ln(value), is the least-squares slope
over the points along its axis (others at their first value): -1 means the step time falls in
proportion as the parameter grows (fully bound by it), 0 means it does not care.
"""

from __future__ import annotations

import csv
import html
import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from simulator.report.outputs import figure_bytes, file_labels, publish
from simulator.report.text import fit_verdict
from simulator.sweep.spec import CARD_AXIS, HOST_AXIS

RESULTS = ("step_time_s", "analytic_step_time_s", "error_bound_s", "achieved_bandwidth_GBps",
           "peak_bandwidth_GBps", "memory_bound_share", "bound", "peak_memory_bytes",
           "capacity_bytes", "usable_bytes", "fits", "reserved_memory_bytes", "reserve_fits",
           "best_change", "price_usd", "steps_per_hour_per_kusd",
           # with a host: the input pipeline (run --json's input_pipeline)
           "input_bound", "input_bottleneck", "stall_s_per_step", "gpu_wait_share",
           "effective_step_time_s", "samples_per_s_needed", "samples_per_s_supplied",
           "first_epoch_s", "steady_epoch_s", "input_best_change", "error")


def step_time(r: dict) -> float:
    """A point's time per step: with a host, the pipeline's (the GPU's step and its stall)."""
    return r.get("effective_step_time_s", r["step_time_s"])


def _axis_rows(rows: list[dict], axes: dict[str, list], axis: str, workload: str) -> list[dict]:
    """The rows along one axis, the other axes at their first value, in axis order."""
    base = {k: v[0] for k, v in axes.items() if k != axis}
    sel = [r for r in rows if r["workload"] == workload and r.get("error") is None
           and all(r[f"param.{k}"] == v for k, v in base.items())]
    order = {v: i for i, v in enumerate(axes[axis])}
    return sorted(sel, key=lambda r: order.get(r[f"param.{axis}"], 0))


def _numeric(values: list) -> bool:
    return all(isinstance(v, int | float) and not isinstance(v, bool) and v > 0 for v in values)


def elasticities(rows: list[dict], axes: dict[str, list], workloads: list[str]
                 ) -> dict[str, dict[str, float | None]]:
    out: dict[str, dict[str, float | None]] = {}
    for w in workloads:
        out[w] = {}
        for axis in axes:
            if axis in (CARD_AXIS, HOST_AXIS):  # (no parameter to take a slope over)
                continue
            sel = _axis_rows(rows, axes, axis, w)
            xs = [r[f"param.{axis}"] for r in sel]
            if len(sel) < 2 or not _numeric(xs) or len(set(xs)) < 2:
                out[w][axis] = None
                continue
            x = np.log(np.array(xs, float))
            y = np.log(np.array([step_time(r) for r in sel]))
            out[w][axis] = float(np.polyfit(x, y, 1)[0])
    return out


def table_rows(rows: list[dict], axes: dict[str, list]) -> list[list[str]]:
    """One row of cell texts per point (the header first), as the text and HTML show them;
    with a host, the input pipeline's stall and bound too."""
    fed = any("input_bound" in r for r in rows)
    head = ["workload", *axes, "step time", "GB/s", "memory-bound", "bound", "fits"]
    lines = [head + (["stall/step", "input"] if fed else [])]
    for r in rows:
        if r.get("error"):
            lines.append([r["workload"], *(str(r[f"param.{a}"]) for a in axes),
                          f"FAILED: {r['error']}"] + [""] * (len(lines[0]) - len(axes) - 2))
            continue
        cells = [r["workload"], *(str(r[f"param.{a}"]) for a in axes),
                 f"{r['step_time_s'] * 1e3:.3f} ms", f"{r['achieved_bandwidth_GBps']:.1f}",
                 f"{r['memory_bound_share'] * 100:.1f} %", r["bound"],
                 fit_verdict(r["fits"], r.get("reserve_fits"))]
        if fed:
            cells += [f"{r['stall_s_per_step'] * 1e3:.1f} ms",
                      f"bound: {r['input_bottleneck']}" if r["input_bound"] else "keeps up"]
        lines.append(cells)
    return lines


def table(rows: list[dict], axes: dict[str, list]) -> str:
    lines = table_rows(rows, axes)
    widths = [max(len(row[i]) for row in lines) for i in range(len(lines[0]))]
    return "\n".join("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True))
                     .rstrip() for row in lines)


def _csv(rows: list[dict], axes: dict[str, list]) -> str:
    buf = io.StringIO()
    fields = ["id", "workload", "hardware", *(f"param.{a}" for a in axes), *RESULTS]
    w = csv.DictWriter(buf, fieldnames=fields, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow(r)
    return buf.getvalue()


# Workloads whose step times differ more than this share a plot on a log scale, so that the
# small one is not flattened along the bottom.
LOG_SPREAD = 10.0


def _line_plot(rows, axes, workloads, key, label, scale=1.0, speedup=False, log_spread=False):
    """One panel per axis, one line per workload. With `speedup`, each line is the first
    value's result over each value's (the axis's first value, the others at theirs, is 1):
    workloads of any size compare on one scale. With `log_spread`, a log scale where the
    lines differ more than LOG_SPREAD times."""
    fig = Figure(figsize=(4.5 * len(axes), 3.6))
    subplots = fig.subplots(1, len(axes), squeeze=False)[0]
    drawn: list[float] = []
    for ax, axis in zip(subplots, axes, strict=True):
        for w in workloads:
            sel = [r for r in _axis_rows(rows, axes, axis, w) if r.get(key) is not None]
            if speedup and sel and sel[0][f"param.{axis}"] != axes[axis][0]:
                sel = []  # (no result at the first value to compare with)
            if sel:
                xs = [str(r[f"param.{axis}"]) for r in sel]
                ys = [r[key] * scale for r in sel]
                if speedup:
                    ys = [ys[0] / y for y in ys]
                # (cards are no scale: markers only, no line from one card to the next)
                ax.plot(xs, ys, marker="o", label=w,
                        ls="none" if axis in (CARD_AXIS, HOST_AXIS) else "-")
                drawn += ys
        if key == "memory_bound_share":
            # (above it memory bounds most of the step; launch gaps count apart from memory)
            ax.axhline(50, color="grey", ls="--", lw=0.8, label="half the step")
        if speedup:
            ax.axhline(1, color="grey", ls="--", lw=0.8)
        ax.set_xlabel(axis)
        ax.set_ylabel(label)
        ax.grid(True, which="both", lw=0.3, alpha=0.5)
    positive = [y for y in drawn if y > 0]
    if log_spread and positive and max(positive) > LOG_SPREAD * min(positive):
        for ax in subplots:
            ax.set_yscale("log")
    if subplots[0].get_legend_handles_labels()[0]:  # (none where every point failed)
        subplots[0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def _heatmap(rows, axes, workload):
    a, b = list(axes)[:2]
    grid = np.full((len(axes[b]), len(axes[a])), np.nan)
    others = {k: v[0] for k, v in axes.items() if k not in (a, b)}
    for r in rows:
        if r["workload"] != workload or r.get("error") or any(
                r[f"param.{k}"] != v for k, v in others.items()):
            continue
        grid[axes[b].index(r[f"param.{b}"]), axes[a].index(r[f"param.{a}"])] = \
            r["step_time_s"] * 1e3
    fig = Figure(figsize=(6, 4.5))
    ax = fig.subplots()
    im = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis_r")
    ax.set_xticks(range(len(axes[a])), [str(v) for v in axes[a]])
    ax.set_yticks(range(len(axes[b])), [str(v) for v in axes[b]])
    for (i, j), v in np.ndenumerate(grid):
        if math.isfinite(v):
            ax.text(j, i, f"{v:.3g}", ha="center", va="center", fontsize=7, color="white")
    ax.set_xlabel(a)
    ax.set_ylabel(b)
    ax.set_title(f"{workload}: step time (ms)")
    fig.colorbar(im, ax=ax)
    fig.tight_layout()
    return fig


def figures(rows: list[dict], axes: dict[str, list], workloads: list[str]) -> dict[str, Figure]:
    figs = {
        "step_time": _line_plot(rows, axes, workloads, "step_time_s", "step time (ms)", 1e3,
                                log_spread=True),
        "speedup": _line_plot(rows, axes, workloads, "step_time_s",
                              "speedup over the first value (x)", speedup=True),
        **({"input_pipeline": _line_plot(rows, axes, workloads, "effective_step_time_s",
                                         "time per step with the input pipeline (ms)", 1e3,
                                         log_spread=True)}
           if any("effective_step_time_s" in r for r in rows) else {}),
        "bandwidth": _line_plot(rows, axes, workloads, "achieved_bandwidth_GBps",
                                "achieved DRAM bandwidth (GB/s)"),
        "bottleneck": _line_plot(rows, axes, workloads, "memory_bound_share",
                                 "memory-bound share of step (%)", 100),
    }
    if any(r.get("steps_per_hour_per_kusd") for r in rows):
        figs["cost"] = _line_plot(rows, axes, workloads, "steps_per_hour_per_kusd",
                                  "steps per hour per $1000", log_spread=True)
    if len(axes) >= 2:
        for w, label in file_labels(workloads).items():
            figs[f"heatmap.{label}"] = _heatmap(rows, axes, w)
    return figs


def write(out: Path, name: str, doc_extra: dict[str, Any], rows: list[dict],
          axes: dict[str, list], workloads: list[str]) -> list[Path]:
    """CSV, JSON, the plots (PNG and SVG) and one self-contained HTML page, all or none
    (beside points.jsonl)."""
    sens = elasticities(rows, axes, workloads)
    doc = {"format": "gddr6-roofline-sim/sweep", "format_version": 1, "name": name,
           **doc_extra, "axes": axes, "workloads": workloads,
           "elasticity_of_step_time": sens, "points": rows}
    files = {f"{name}.csv": _csv(rows, axes).encode(),
             f"{name}.json": (json.dumps(doc, indent=2, allow_nan=False) + "\n").encode()}
    pngs = {}
    for key, fig in figures(rows, axes, workloads).items():
        pngs[key] = files[f"{name}.{key}.png"] = figure_bytes(fig, "png")
        files[f"{name}.{key}.svg"] = figure_bytes(fig, "svg")
    files[f"{name}.html"] = _html(name, doc_extra, rows, axes, workloads, pngs).encode()
    return publish(out, files)


def _html(name: str, doc_extra: dict[str, Any], rows: list[dict], axes: dict[str, list],
          workloads: list[str], pngs: dict[str, bytes]) -> str:
    from simulator.report.html import figures_html, page, table_html

    settings = ", ".join(f"{k} {', '.join(v) if isinstance(v, list) else v}"
                         for k, v in doc_extra.items())
    lines = sensitivity_lines(rows, axes, workloads)
    failed = sum(1 for r in rows if r.get("error"))
    return page(f"sweep {name}", (
        f"<p>{len(rows)} points ({len(workloads)} workloads x {len(rows) // len(workloads)} "
        f"hardware settings; {html.escape(settings)})"
        + (f"; <b>{failed} failed</b>" if failed else "") + ".</p>"
        f"<h2>Points</h2>{table_html(table_rows(rows, axes))}"
        + (f"<h2>Elasticity</h2><p>{html.escape(lines[0])}</p><ul>"
           + "".join(f"<li>{html.escape(line.strip())}</li>" for line in lines[1:])
           + "</ul>" if lines else "")
        + f"<h2>Plots</h2>{figures_html(pngs)}"))


def sensitivity_lines(rows: list[dict], axes: dict[str, list], workloads: list[str]
                      ) -> list[str]:
    sens = elasticities(rows, axes, workloads)
    if not any(sens.values()):
        return []  # (only cards compared)
    lines = ["Elasticity of step time, d ln(step) / d ln(parameter) (-1: bound by it; 0: "
             "indifferent):"]
    for w, per in sens.items():
        lines.append(f"  {w}: " + ", ".join(
            f"{k} {v:+.2f}" if v is not None else f"{k} n/a" for k, v in per.items()))
    return lines
