"""One self-contained HTML report (no external assets): summary, plots, tables."""

from __future__ import annotations

import base64
import html

from simulator.pipeline import RunResult
from simulator.report.text import (
    bottleneck_lines,
    fidelity_line,
    memory_lines,
    op_rows,
    phase_rows,
    step_detail,
)
from simulator.units import fmt_bytes, fmt_seconds

STYLE = """body{font-family:sans-serif;max-width:1000px;margin:2em auto;color:#222}
table{border-collapse:collapse;font-size:13px;margin:1em 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
td:first-child,th:first-child{text-align:left} img{max-width:100%}"""


def page(title: str, body: str) -> str:
    """A whole self-contained page: no external assets."""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{html.escape(title)}</title>
<style>{STYLE}</style></head><body>
<h1>{html.escape(title)}</h1>
{body}
</body></html>
"""


def table_html(rows: list[list[str]]) -> str:
    """Rows of cell texts, the header first."""
    head, *body = rows
    out = ["<table><thead><tr>", *(f"<th>{html.escape(c)}</th>" for c in head), "</tr></thead>",
           "<tbody>"]
    for row in body:
        out += ["<tr>", *(f"<td>{html.escape(c)}</td>" for c in row), "</tr>"]
    out.append("</tbody></table>")
    return "".join(out)


def figures_html(pngs: dict[str, bytes]) -> str:
    """The plots embedded as PNG data, each captioned by its name."""
    return "".join(
        f'<figure><img alt="{html.escape(name)}" src="data:image/png;base64,'
        f'{base64.b64encode(data).decode()}"><figcaption>{html.escape(name)}</figcaption>'
        "</figure>" for name, data in pngs.items())


def report(r: RunResult, pngs: dict[str, bytes]) -> str:
    est, mem, hw, spec = r.estimate, r.memory, r.hardware, r.workload
    cap = hw.usable_bytes
    phases, ops, memory = phase_rows(est), op_rows(est, 25), memory_lines(r)
    summary = bottleneck_lines(est)[1:] if est.replay is not None else []
    bottlenecks = ("<h2>Bottlenecks</h2><ul>"
                   + "".join(f"<li>{html.escape(line.strip())}</li>" for line in summary)
                   + "</ul>") if summary else ""
    if r.feed is not None:
        from simulator.report.feed_report import feed_lines

        bottlenecks += ("<h2>Input pipeline</h2><ul>" + "".join(
            f"<li>{html.escape(line.strip())}</li>" for line in feed_lines(r.feed))
            + "</ul>")
    fits = "fits" if r.fits else "DOES NOT FIT"
    return page(f"{spec.name} on {hw.display_name}", f"""<ul id="summary">
<li>step time <b id="step-time">{fmt_seconds(est.step_time_s)}</b>
{html.escape(step_detail(est))}</li>
<li>timed by: {html.escape(fidelity_line(est))}</li>
<li>peak memory <b id="peak">{mem.peak_bytes:,} B</b> ({fmt_bytes(mem.peak_bytes)}) of
{cap:,} B ({fmt_bytes(cap)}) usable: {fits}; {r.trace.parameter_count:,} parameters</li>
<li>DRAM {hw.memory.type} {hw.memory.bus_width_bits}-bit at {hw.memory.data_rate_gbps:g} Gb/s
per pin = {hw.memory.peak_bandwidth_GBps:.1f} GB/s peak</li></ul>
<h2>Memory</h2><p>{"<br>".join(html.escape(line.strip()) for line in memory[1:])}</p>
<h2>Phases</h2>{table_html(phases)}
{bottlenecks}
<h2>Plots</h2>{figures_html(pngs)}
<h2>Slowest ops</h2>{table_html(ops)}""")
