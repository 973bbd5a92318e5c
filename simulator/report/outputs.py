"""`run --out DIR`: the JSON, text, plots (PNG and SVG) and HTML report, written atomically.

Everything is rendered into a temporary folder beside DIR first; only when all of it exists are
the files moved into DIR, each by an atomic rename, so an error leaves nothing half-written.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
from pathlib import Path

from simulator.errors import InputError
from simulator.pipeline import RunResult


def write_outputs(r: RunResult, out_dir: Path) -> list[Path]:
    from simulator.report import html, plots
    from simulator.report.json_report import run_doc
    from simulator.report.text import run_report

    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError("expected a directory for --out, got a file", file=str(out_dir))
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}."))
    try:
        stem = r.workload.name
        (staging / f"{stem}.json").write_text(json.dumps(run_doc(r), indent=2, allow_nan=False))
        (staging / f"{stem}.txt").write_text(run_report(r) + "\n")
        pngs: dict[str, bytes] = {}
        for name, make in plots.FIGURES.items():
            fig = make(r)
            buf = io.BytesIO()
            fig.savefig(buf, format="png", dpi=110)
            pngs[name] = buf.getvalue()
            (staging / f"{stem}.{name}.png").write_bytes(pngs[name])
            fig.savefig(staging / f"{stem}.{name}.svg", format="svg")
        (staging / f"{stem}.html").write_text(html.report(r, pngs))
        out_dir.mkdir(exist_ok=True)
        written = []
        for f in sorted(staging.iterdir()):
            target = out_dir / f.name
            os.replace(f, target)
            written.append(target)
        return written
    finally:
        shutil.rmtree(staging, ignore_errors=True)
