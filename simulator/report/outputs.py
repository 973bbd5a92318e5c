"""`run --out DIR`: the JSON, text, plots (PNG and SVG) and HTML report, written atomically.

Everything is rendered into a temporary folder beside DIR first; only when all of it exists are
the files moved into DIR, each by an atomic rename, so an error leaves nothing half-written.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from simulator.errors import check_folder, staged_beside
from simulator.pipeline import RunResult


def file_label(given: str) -> str:
    """A workload or card as given (a shipped name or a path, `workloads/cnn.json`) as a part
    of an output file's name: its stem, with anything but letters, digits, '.', '_' and '-'
    made '_'."""
    stem = Path(given).stem if given.endswith((".json", ".jsonl")) else Path(given).name
    return re.sub(r"[^A-Za-z0-9._-]+", "_", stem).lstrip("._-") or "workload"


def file_labels(given: list[str]) -> dict[str, str]:
    """A distinct file label for each (two paths with one stem get -2, -3 ...)."""
    out: dict[str, str] = {}
    for g in given:
        label, n = file_label(g), 1
        while (label if n == 1 else f"{label}-{n}") in out.values():
            n += 1
        out[g] = label if n == 1 else f"{label}-{n}"
    return out


def publish(out_dir: Path, files: dict[str, bytes]) -> list[Path]:
    """Write the files (name -> content) into out_dir all or none: staged beside it, then
    each moved in by an atomic rename."""
    out_dir = Path(out_dir)
    check_folder(out_dir, str(out_dir))
    with staged_beside(out_dir):
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}."))
    try:
        for name, data in files.items():
            (staging / name).write_bytes(data)
        out_dir.mkdir(exist_ok=True)
        written = []
        for name in sorted(files):
            target = out_dir / name
            os.replace(staging / name, target)
            written.append(target)
        return written
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def figure_bytes(fig, fmt: str) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=110)
    return buf.getvalue()


def write_outputs(r: RunResult, out_dir: Path) -> list[Path]:
    from simulator.report import html, plots
    from simulator.report.json_report import run_doc
    from simulator.report.text import run_report

    check_folder(out_dir, f"--out {out_dir}")
    stem = r.workload.name
    files = {f"{stem}.json": json.dumps(run_doc(r), indent=2, allow_nan=False).encode(),
             f"{stem}.txt": (run_report(r) + "\n").encode()}
    pngs: dict[str, bytes] = {}
    figures = dict(plots.FIGURES)
    if r.feed is not None:
        from simulator.report.feed_report import pipeline_timeline

        figures["input_pipeline"] = lambda run: pipeline_timeline(run.feed)
    for name, make in figures.items():
        fig = make(r)
        pngs[name] = files[f"{stem}.{name}.png"] = figure_bytes(fig, "png")
        files[f"{stem}.{name}.svg"] = figure_bytes(fig, "svg")
    files[f"{stem}.html"] = html.report(r, pngs).encode()
    return publish(out_dir, files)
