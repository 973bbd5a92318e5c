"""`run` reports: the plots and the HTML report of `--out DIR` are produced, valid, and agree with
the JSON; the header says how the step updates the parameters."""

import base64
import html as htmllib
import io
import json
import re
import xml.etree.ElementTree as ET

import matplotlib.image as mpimg
from conftest import REPO

from simulator.cli import main
from simulator.report.text import CHANGE_NAMES
from simulator.units import fmt_seconds


def test_report_files(tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["run", "cnn", "--hardware", "a40", "--out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    names = sorted(p.name for p in out.iterdir())
    for plot in ("roofline", "bandwidth", "memory"):
        assert f"cnn.{plot}.png" in names and f"cnn.{plot}.svg" in names
        image = mpimg.imread(out / f"cnn.{plot}.png")
        assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100
        root = ET.parse(out / f"cnn.{plot}.svg").getroot()
        assert root.tag.endswith("svg")
    assert json.loads((out / "cnn.json").read_text()) == doc
    html = (out / "cnn.html").read_text()
    assert html.count("data:image/png;base64,") == 3 and "http" not in html.replace(
        "http://www.w3.org", "")
    embedded = html.split("data:image/png;base64,")[1].split('"')[0]
    assert mpimg.imread(io.BytesIO(base64.b64decode(embedded)), format="png").ndim == 3
    assert fmt_seconds(doc["step_time_s"]) in html
    assert f"{doc['memory']['peak_bytes']:,} B" in html
    text = (out / "cnn.txt").read_text()
    assert fmt_seconds(doc["step_time_s"]) in text
    # the replay's own figures: analytic beside simulated, error bound, the best change
    for figure in (fmt_seconds(doc["analytic_step_time_s"]),
                   fmt_seconds(doc["step_time_error_bound_s"]),
                   CHANGE_NAMES[doc["replay"]["bottlenecks"]["best_single_change"]],
                   f"{doc['replay']['l2_bandwidth_GBps']:.0f} GB/s"):
        assert figure in text and html.count(figure.replace("+", "+")) >= 1, figure
    slowest = max(doc["ops"], key=lambda o: o["time_s"])
    row = f"{slowest['achieved_bandwidth_GBps']:.1f}"
    assert row in text and row in html
    # the memory section, line for line as the text report has it
    at = text.index("Memory (")
    for line in text[at:].split("\n\n")[0].splitlines()[1:]:
        assert htmllib.escape(line.strip()) in html
    # the phase table and the slowest ops, cell for cell as the text report has them
    lines = text.splitlines()
    for caption, table in zip(("Phases (", "Top 10 ops"), _html_tables(html), strict=True):
        at = next(i for i, line in enumerate(lines) if line.startswith(caption)) + 1
        end = lines.index("", at)
        shown = [re.split(r"\s{2,}", line.strip()) for line in lines[at:end]]
        assert len(shown) == (len(table) if caption == "Phases (" else 11)
        assert [[c for c in row if c] for row in table][:len(shown)] == shown
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left


def _html_tables(html: str) -> list[list[list[str]]]:
    """Each table's rows as lists of cell texts."""
    return [[[htmllib.unescape(c) for c in re.findall(r"<t[hd]>(.*?)</t[hd]>", row)]
             for row in re.findall(r"<tr>(.*?)</tr>", t)]
            for t in re.findall(r"<table>(.*?)</table>", html)]


def test_out_that_is_a_file_fails_cleanly(tmp_path, capsys):
    target = tmp_path / "taken"
    target.write_text("not a directory")
    assert main(["run", "cnn", "--out", str(target)]) == 2
    assert "expected a directory" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_memory_section_holds_the_reserve_to_the_capacity_too():
    """Live bytes can fit where the caching allocator's reserve, what an out-of-memory error
    checks, does not: the section says so and points to `memory`."""
    import dataclasses

    from simulator.pipeline import analyze
    from simulator.report.text import memory_lines

    r = analyze("cnn", "t4", fidelity="analytic")
    peak, reserved = r.memory.peak_bytes, r.placement.reserved_peak
    assert peak < reserved and r.fits and r.reserve_fits
    assert not any("what would make it fit" in line for line in memory_lines(r))
    mem = r.hardware.memory
    # a card whose usable bytes (capacity less the runtime's reserve) lie between the two
    between = (peak + reserved) / 2 + r.hardware.runtime_reserve.total_bytes
    density = between * mem.device_density_gbit / mem.capacity_bytes
    small = dataclasses.replace(r.hardware, memory=dataclasses.replace(
        mem, device_density_gbit=density, ecc="off"))
    tight = dataclasses.replace(r, hardware=small)
    assert peak < small.usable_bytes < reserved
    assert tight.fits and tight.reserve_fits is False
    lines = memory_lines(tight)
    assert any("reserved, DOES NOT FIT" in line for line in lines)
    assert any("what would make it fit: python -m simulator memory" in line for line in lines)


def test_run_says_how_the_step_updates_the_parameters(capsys, write_json):
    """Clipping and master weights are in the text header and the JSON document."""
    doc = json.loads((REPO / "workloads" / "cnn.json").read_text())
    doc["training"].update(dtype="fp16", master_weights=True,
                           grad_clip={"max_norm": 0.5, "implementation": "for_loop"},
                           execution={"zero_grad": "zeros"})
    path = write_json(doc, "o2.json")
    assert main(["run", str(path), "--hardware", "t4", "--fidelity", "analytic"]) == 0
    header = capsys.readouterr().out.splitlines()[2]
    assert header.endswith("; fp32 master weights, gradients clipped to norm 0.5 (for_loop), "
                           "gradients kept between steps and zeroed (zero_grad "
                           "set_to_none=False)")
    assert main(["run", str(path), "--hardware", "t4", "--fidelity", "analytic", "--json"]) == 0
    workload = json.loads(capsys.readouterr().out)["workload"]
    assert workload["master_weights"] is True and workload["zero_grad"] == "zeros"
    assert workload["grad_clip"] == {"max_norm": 0.5, "implementation": "for_loop"}
    assert workload["optimizer"]["weight_decay_on"] == "all"
