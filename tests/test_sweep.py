"""`sweep`: grids of hardware settings x workloads, persisted point by point."""

import csv
import dataclasses
import html as htmllib
import json
import os
import re
from pathlib import Path

import matplotlib.image as mpimg
import pytest
from conftest import REPO

from simulator.cli import main
from simulator.config.controller import GPU_CONTROLLER
from simulator.config.hardware import load_hardware
from simulator.errors import InputError
from simulator.sweep import execute
from simulator.sweep.report import elasticities, figures
from simulator.sweep.spec import build, load_sweep

GRID = ["--vary", "data_rate_gbps=10,14", "--vary", "bus_width_bits=128,256"]


def _sweep(tmp_path, *extra, workload="cnn", fidelity="analytic"):
    return main(["sweep", workload, "--hardware", "t4", *GRID, "--fidelity", fidelity,
                 "--workers", "1", "--out", str(tmp_path / "out"), *extra])


def test_shorthand_writes_every_point(tmp_path, capsys):
    assert _sweep(tmp_path) == 0
    out = tmp_path / "out"
    rows = list(csv.DictReader((out / "cnn-t4.csv").open()))
    assert len(rows) == 4
    assert {(r["param.data_rate_gbps"], r["param.bus_width_bits"]) for r in rows} == {
        ("10", "128"), ("10", "256"), ("14", "128"), ("14", "256")}
    doc = json.loads((out / "cnn-t4.json").read_text())
    assert doc["axes"] == {"data_rate_gbps": [10, 14], "bus_width_bits": [128, 256]}
    by = {(p["param.data_rate_gbps"], p["param.bus_width_bits"]): p for p in doc["points"]}
    # more bandwidth never slows the step; peak bandwidth follows the settings
    assert by[(14, 256)]["step_time_s"] < by[(10, 128)]["step_time_s"]
    assert by[(14, 256)]["peak_bandwidth_GBps"] == pytest.approx(14 * 256 / 8)
    # the capacity answer by the live peak and by the caching allocator's reserve
    for p in doc["points"]:
        assert p["reserved_memory_bytes"] >= p["peak_memory_bytes"]
        assert p["reserve_fits"] is (p["reserved_memory_bytes"] <= p["capacity_bytes"])
    for plot in ("step_time", "speedup", "bandwidth", "bottleneck", "heatmap.cnn"):
        assert mpimg.imread(out / f"cnn-t4.{plot}.png").ndim == 3
    printed = capsys.readouterr().out
    assert "Elasticity" in printed
    # one self-contained page: every plot embedded, the points as the text table has them
    page = (out / "cnn-t4.html").read_text()
    assert page.count("data:image/png;base64,") == len(list(out.glob("*.png")))
    assert "http" not in page
    cells = [[htmllib.unescape(c) for c in re.findall(r"<t[hd]>(.*?)</t[hd]>", row)]
             for row in re.findall(r"<tr>(.*?)</tr>", page)]
    shown = [line.split() for line in printed.splitlines()[:5]]
    assert [" ".join(row).split() for row in cells] == shown
    for line in printed.splitlines():
        if line.startswith("  cnn:"):  # the elasticities
            assert f"<li>{line.strip()}</li>" in page


def test_rerun_skips_finished_points_and_retries_failed_ones(tmp_path, monkeypatch, capsys):
    real = execute.run_point

    def flaky(workload, hardware, fidelity, *feed):
        if hardware.memory.data_rate_gbps == 14 and hardware.memory.bus_width_bits == 128:
            raise RuntimeError("boom")
        return real(workload, hardware, fidelity, *feed)

    monkeypatch.setattr(execute, "run_point", flaky)
    assert _sweep(tmp_path) == 1                      # one point failed, the others went on
    rows = [json.loads(line) for line in (tmp_path / "out/points.jsonl").open()]
    assert len(rows) == 4 and sum(r["error"] is not None for r in rows) == 1
    assert "boom" in next(r["error"] for r in rows if r["error"])
    assert "FAILED: RuntimeError: boom" in capsys.readouterr().out
    calls = []

    def counted(workload, hardware, fidelity, *feed):
        calls.append(hardware.memory.data_rate_gbps)
        return real(workload, hardware, fidelity, *feed)

    monkeypatch.setattr(execute, "run_point", counted)
    assert _sweep(tmp_path) == 0
    assert calls == [14]                               # only the failed point ran again
    assert _sweep(tmp_path) == 0
    assert calls == [14]


@pytest.mark.parametrize("vary, words", [
    ("foo=1,2", "unknown hardware parameter 'foo'"),
    ("data_rate_gbps=14,0", "$.memory.data_rate_gbps: expected a number > 0"),
    ("bus_width_bits=256,100", "expected a multiple of channel_width_bits"),
    ("nRC=90,10", "nRC >= nRAS + nRP"),
    ("data_rate_gbps=14,nan", "$.memory.data_rate_gbps: expected a finite number"),
    ("data_rate_gbps=14,1e308", "$.memory.data_rate_gbps: expected a finite number of magnitude"),
    ("l2_bytes=1e308", "$.cache.l2_bytes: expected a finite number of magnitude at most 2**53"),
    ("nBL=2,4", "$.memory.timing.cycles_ck.nBL: expected 2: a BL16 burst"),
    ("data_rate_gbps=14,0.001", "$.memory.data_rate_gbps: impossible timing set at this data rate"),
    ("data_rate_gbps=", "expected NAME=VALUE"),
    ("l2_bytes=4194304,8388608,4194304", "expected distinct values for 'l2_bytes', got 4194304"),
])
def test_invalid_axes_fail_before_anything_runs(tmp_path, capsys, monkeypatch, vary, words):
    monkeypatch.setattr(execute, "run_point", lambda *a: pytest.fail("a point ran"))
    code = main(["sweep", "cnn", "--vary", vary, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and words in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_a_sustained_clock_on_a_card_stating_no_clocks_takes_its_rated_boost():
    """A GeForce file states no clocks: a sustained clock set on it runs beside the boost
    clock its peaks are counted at, read off its FP32 peak (1545 MHz on the RTX 2080 Ti); an
    AMD card's boost must be given."""
    from simulator.config.loader import read_json
    from simulator.sweep.params import apply

    ti = read_json(REPO / "hardware" / "rtx-2080-ti.json")
    hw = apply(ti, {"sustained_clock_mhz": 1922}, "command line")
    assert (hw.boost_clock_mhz, hw.sustained_clock_mhz) == (pytest.approx(1545.3), 1922)
    xtx = read_json(REPO / "hardware" / "rx-7900-xtx.json")
    with pytest.raises(InputError, match="vary boost_clock_mhz too"):
        apply(xtx, {"sustained_clock_mhz": 2000}, "command line")
    hw = apply(xtx, {"sustained_clock_mhz": 2000, "boost_clock_mhz": 2500}, "command line")
    assert (hw.boost_clock_mhz, hw.sustained_clock_mhz) == (2500, 2000)


def test_sweep_file(tmp_path, write_json):
    path = write_json({"format_version": 1, "name": "mem", "hardware": "a40",
                       "workloads": ["cnn", "stream"], "fidelity": "analytic",
                       "vary": {"l2_bytes": [4194304, 8388608], "fp32": [20, 40]}})
    spec = load_sweep(path)
    assert len(spec.points()) == 8 and spec.fidelity == "analytic"
    bad = write_json({"hardware": "a40", "workloads": ["cnn"], "vary": {"nCL": 20}},
                     name="bad.json")
    with pytest.raises(Exception, match=r"\$\.vary\.nCL: expected array"):
        load_sweep(bad)
    bad = write_json({"hardware": "a40", "workloads": ["nope"], "vary": {"nCL": [20]}},
                     name="bad2.json")
    with pytest.raises(Exception, match="nope"):
        load_sweep(bad)


def test_a_controller_setting_changes_the_controller_the_card_runs_on():
    """The T4's file states no controller, so it runs on the GPU memory path; varying one of
    its settings changes just that setting (it had switched the card to the generic
    controller, 32-entry queues and all, with the one setting changed)."""
    spec = build("c", "t4", ["cnn"], {"write_buffer": [128], "refresh_postpone": [0]},
                 "sampled", "test")
    ctl = spec.points()[0].hardware.controller
    assert ctl == dataclasses.replace(GPU_CONTROLLER, write_buffer=128,
                                      refresh_postpone=0, mapping=ctl.mapping)
    assert ctl.mapping == load_hardware("t4").controller.mapping


def test_elasticity_of_a_bandwidth_bound_benchmark(tmp_path):
    spec = build("s", "a40", ["stream"], {"data_rate_gbps": [12, 14, 16]}, "analytic", "test")
    rows = execute.run_sweep(spec, tmp_path, workers=1)
    e = elasticities(rows, spec.axes, ["stream"])["stream"]["data_rate_gbps"]
    assert e == pytest.approx(-1.0, abs=0.01)   # the analytic roofline: time ~ 1 / bandwidth


def test_a_process_pool_gives_the_rows_one_process_gives(tmp_path):
    """Two workers, points grouped by memory system, each worker reusing its DRAM results:
    the same rows as one process point after point, every point persisted."""
    spec = build("p", "t4", ["cnn"], {"data_rate_gbps": [10, 14], "l2_bytes": [2 << 20, 4 << 20]},
                 "sampled", "test")
    pooled = execute.run_sweep(spec, tmp_path / "pool", workers=2)
    execute._DRAM_MEMO.clear()
    alone = execute.run_sweep(spec, tmp_path / "alone", workers=1)
    keep = ("id", "step_time_s", "bound", "best_change", "error")
    assert [{k: r[k] for k in keep} for r in pooled] == [{k: r[k] for k in keep} for r in alone]
    assert all(r["error"] is None for r in pooled)
    persisted = (tmp_path / "pool" / "points.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["id"] for line in persisted) == sorted(r["id"] for r in alone)


def test_reused_dram_results_change_nothing():
    """A sweep process keeps sampled DRAM results for later points on the same memory
    system; each window starts from an idle system, so a point's figures are the same whether
    its windows were simulated now or earlier for another point."""
    from simulator.pipeline import analyze

    spec = build("m", "t4", ["cnn"], {"l2_bytes": [2 << 20, 4 << 20]}, "sampled", "test")
    memo: dict = {}
    for p in spec.points():
        fresh = analyze(p.workload, p.hardware, "sampled").estimate
        kept = analyze(p.workload, p.hardware, "sampled", dram_memo=memo).estimate
        again = analyze(p.workload, p.hardware, "sampled", dram_memo=memo).estimate
        for e in (kept, again):
            assert e.step_time_s == fresh.step_time_s
            assert [o.time_s for o in e.ops] == [o.time_s for o in fresh.ops]
            assert e.replay.error_bound_s == fresh.replay.error_bound_s
        assert again.replay.simulated_requests == fresh.replay.simulated_requests
    assert memo


def test_a_workload_is_generated_once_per_process_until_its_file_changes(tmp_path):
    """A sweep process keeps each workload's trace and placement for its later points; the
    figures are those of a fresh analysis, and an edited file is generated again."""
    from simulator.pipeline import analyze

    path = tmp_path / "w.json"
    path.write_text((Path(__file__).parent.parent / "workloads" / "cnn.json").read_text())
    small, hw = (p.hardware for p in build("s", "t4", [str(path)], {"l2_bytes": [2 << 20, 4 << 20]},
                                           "sampled", "t").points())
    first = execute._step(str(path))
    assert execute._step(str(path)) is first
    execute.run_point(str(path), small, "sampled")  # the step is used by one point, then another
    row = execute.run_point(str(path), hw, "sampled")
    assert execute._step(str(path)) is first
    assert row["step_time_s"] == analyze(str(path), hw, "sampled").estimate.step_time_s
    doc = json.loads(path.read_text())
    doc["data"]["batch_size"] *= 2
    path.write_text(json.dumps(doc))
    assert execute._step(str(path)) is not first
    assert execute.run_point(str(path), hw, "sampled")["step_time_s"] > row["step_time_s"]


def test_points_run_on_a_dask_cluster(tmp_path):
    distributed = pytest.importorskip("distributed")
    spec = build("d", "t4", ["cnn"], {"data_rate_gbps": [10, 14]}, "analytic", "test")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  protocol="tcp", host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        rows = execute.run_sweep(spec, tmp_path, scheduler=cluster.scheduler_address)
    assert cluster.scheduler_address.startswith("tcp://127.0.0.1")
    assert len(rows) == 2 and all(r["error"] is None for r in rows)
    local = execute.run_sweep(spec, tmp_path / "local", workers=1)
    assert [r["step_time_s"] for r in rows] == [r["step_time_s"] for r in local]


def test_an_unreachable_scheduler_is_a_clear_error(tmp_path, capsys):
    pytest.importorskip("distributed")
    code = main(["sweep", "cnn", "--vary", "data_rate_gbps=10,12", "--fidelity", "analytic",
                 "--scheduler", "tcp://127.0.0.1:9", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "cannot reach the Dask scheduler" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def _pools_in_child(q):
    from simulator.dram import system
    from simulator.replay import memory
    try:
        q.put((memory._prefetcher.submit(int, "2").result(timeout=20),
               system._pool.submit(int, "3").result(timeout=20)))
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        q.put(repr(exc))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork start method only")
def test_forked_workers_start_their_own_threads():
    """Sweep workers are forked: thread pools the parent had started (the engine's, the
    replay's prefetch) exist in the child without their threads, and must not swallow jobs."""
    import multiprocessing

    from simulator.dram import system
    from simulator.replay import memory
    memory._prefetcher.submit(int, "1").result()
    system._pool.submit(int, "1").result()
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    child = ctx.Process(target=_pools_in_child, args=(q,))
    child.start()
    try:
        assert q.get(timeout=60) == (2, 3)
    finally:
        child.join(10)


def test_engine_settings_on_an_hbm_card_are_refused(tmp_path, capsys):
    """It said \"at $.memory.timing: 'source' is required\"; an HBM card has no timing set."""
    for vary in ("nCL=20,24", "write_buffer=64"):
        code = main(["sweep", "cnn", "--hardware", "a100-40gb", "--vary", vary,
                     "--out", str(tmp_path / "out")])
        err = capsys.readouterr().err
        assert code == 2 and "is a setting of the GDDR6 engine; a100-40gb has HBM2" in err
    assert not (tmp_path / "out").exists()


def test_zero_workers_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["sweep", "cnn", "--vary", "l2_bytes=4194304", "--workers", "0",
              "--out", str(tmp_path / "out")])
    assert exit_.value.code == 2 and "--workers: expected a number >= 1, got 0" in \
        capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def _rows(times: dict[tuple[str, int], float]) -> list[dict]:
    """Points with a step time and, unlike it, memory-bound shares 30 times apart."""
    return [{"workload": w, "param.data_rate_gbps": rate, "step_time_s": t, "error": None,
             "memory_bound_share": 0.9 if w == "cnn" else 0.03}
            for (w, rate), t in times.items()]


def test_speedup_plot_compares_workloads_of_any_size():
    """A 0.5 ms CNN beside a 40 ms Transformer: the step-time plot goes to a log scale (on a
    linear one the CNN lay flat along the bottom), and the speedup plot puts both at 1 at the
    first value and at (first step / step) after it."""
    times = {("cnn", 10): 0.6e-3, ("cnn", 14): 0.4e-3,
             ("transformer", 10): 44e-3, ("transformer", 14): 33e-3}
    axes = {"data_rate_gbps": [10, 14]}
    figs = figures(_rows(times), axes, ["cnn", "transformer"])
    assert figs["step_time"].axes[0].get_yscale() == "log"
    assert figs["bottleneck"].axes[0].get_yscale() == "linear"  # (a share: 50 % marks a shift)
    lines = {line.get_label(): list(line.get_ydata()) for line in figs["speedup"].axes[0].lines}
    assert lines["cnn"] == pytest.approx([1.0, 1.5])
    assert lines["transformer"] == pytest.approx([1.0, 44 / 33])
    # workloads of one size keep a linear axis
    close = {k: v for k, v in times.items() if k[0] == "transformer"}
    assert figures(_rows(close), axes, ["transformer"])["step_time"].axes[0].get_yscale() \
        == "linear"


def test_speedup_plot_leaves_out_a_workload_without_its_first_value():
    rows = _rows({("cnn", 10): 0.6e-3, ("cnn", 14): 0.4e-3})
    rows[0]["error"] = "boom"
    lines = figures(rows, {"data_rate_gbps": [10, 14]}, ["cnn"])["speedup"].axes[0].lines
    assert "cnn" not in [line.get_label() for line in lines]


def test_cards_compared_on_an_axis_of_their_own(tmp_path, capsys):
    """`--hardware t4,l4`: each point is one card as shipped, the same step `run` gives."""
    out = tmp_path / "out"
    code = main(["sweep", "cnn,transformer", "--hardware", "t4,l4", "--fidelity", "analytic",
                 "--workers", "1", "--out", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "Elasticity" not in printed  # (no parameter to take a slope over)
    doc = json.loads((out / "cnn-transformer-t4-l4.json").read_text())
    assert doc["axes"] == {"hardware": ["t4", "l4"]} and doc["hardware"] == ["t4", "l4"]
    assert doc["elasticity_of_step_time"] == {"cnn": {}, "transformer": {}}
    from simulator.pipeline import analyze
    for p in doc["points"]:
        assert p["hardware"] == p["param.hardware"]
        run = analyze(p["workload"], p["hardware"], fidelity="analytic")
        assert p["step_time_s"] == pytest.approx(run.estimate.step_time_s, rel=1e-12)
    page = (out / "cnn-transformer-t4-l4.html").read_text()
    assert "<h2>Elasticity</h2>" not in page and "<td>l4</td>" in page
    speedup = figures(doc["points"], doc["axes"], ["cnn"])["speedup"].axes[0].lines[0]
    assert speedup.get_linestyle() == "None"  # cards are no scale to draw a line along


def test_a_sweep_file_compares_cards_with_the_grid_on_each(write_json):
    path = write_json({"format_version": 1, "hardware": ["t4", "a10"], "workloads": ["cnn"],
                       "vary": {"data_rate_gbps": [12, 14]}})
    spec = load_sweep(path)
    assert list(spec.axes) == ["hardware", "data_rate_gbps"]
    got = {(p.settings["hardware"], p.settings["data_rate_gbps"]): p.hardware
           for p in spec.points()}
    assert len(got) == 4
    assert got[("a10", 14)].memory.bus_width_bits == 384  # the a10's own bus, at 14 Gb/s
    assert got[("a10", 14)].memory.peak_bandwidth_GBps == pytest.approx(14 * 384 / 8)
    assert got[("t4", 12)].memory.peak_bandwidth_GBps == pytest.approx(12 * 256 / 8)
    assert spec.hardware == ["t4", "a10"]


def test_a_setting_one_card_cannot_take_names_the_card(tmp_path, capsys):
    code = main(["sweep", "cnn", "--hardware", "a100-40gb,t4", "--vary",
                 "data_rate_gbps=10,0.001", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "(with data_rate_gbps=0.001 on t4)" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("doc, words", [
    ({"hardware": ["t4", "t4"], "workloads": ["cnn"]}, "$.hardware: expected distinct cards"),
    ({"hardware": ["t4", "nope"], "workloads": ["cnn"]}, "$.hardware[1]: unknown hardware"),
    ({"hardware": "t4", "workloads": ["cnn"]}, "$.vary: nothing to vary"),
    ({"hardware": 5, "workloads": ["cnn"]}, "$.hardware: expected string or array, got 5"),
    ({"hardware": "t4", "workloads": ["cnn"], "vary": {"hardware": ["l4"]}},
     "$.vary.hardware: 'hardware' is not a setting to vary"),
])
def test_bad_card_lists_are_refused(write_json, doc, words):
    with pytest.raises(InputError) as err:
        load_sweep(write_json(doc))
    assert words in str(err.value) and "input.json" in str(err.value)


def test_an_hbm_card_sets_the_default_fidelity_and_refuses_a_replay(tmp_path, capsys,
                                                                   write_json, monkeypatch):
    """It ran the HBM points at `sampled` and failed each one after the others had run."""
    spec = build("m", ["t4", "a100-40gb"], ["cnn"], {}, None, "test")
    assert spec.fidelity == "analytic"  # like for like: the HBM card has no replay
    assert build("g", ["t4", "l4"], ["cnn"], {}, None, "test").fidelity == "sampled"
    monkeypatch.setattr(execute, "run_point", lambda *a: pytest.fail("a point ran"))
    code = main(["sweep", "cnn", "--hardware", "t4,a100-40gb", "--fidelity", "sampled",
                 "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "a100-40gb has HBM2 memory" in err and "like for like" in err
    path = write_json({"hardware": "a100-40gb", "workloads": ["cnn"], "fidelity": "analytic",
                       "vary": {"l2_bytes": [1 << 20]}})
    with pytest.raises(InputError, match="the cycle replay does not simulate") as exc:
        load_sweep(path, "cycle")  # (--fidelity overrides the file's, and is checked)
    assert str(exc.value).startswith(f"{path} with --fidelity cycle: at $.fidelity")
    assert not (tmp_path / "out").exists()


def test_a_memory_system_alone_is_refused_before_anything_runs(tmp_path, capsys, monkeypatch,
                                                              repo):
    monkeypatch.setattr(execute, "run_point", lambda *a: pytest.fail("a point ran"))
    card = repo / "hardware/validation/ramulator2-gddr6-8ch.json"
    code = main(["sweep", "cnn", "--hardware", f"t4,{card}", "--fidelity", "analytic",
                 "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "no compute peaks: this file describes a memory system only" in err
    assert f"error: {card}: at $.compute:" in err  # its own file, not the point's name.json
    assert not (tmp_path / "out").exists()


def test_fits_column_says_when_only_the_live_bytes_fit():
    from simulator.sweep.report import table_rows

    base = {"workload": "cnn", "param.l2_bytes": 1, "step_time_s": 1e-3,
            "achieved_bandwidth_GBps": 1.0, "memory_bound_share": 0.5, "bound": "memory"}
    rows = [{**base, "fits": True, "reserve_fits": True},
            {**base, "fits": True, "reserve_fits": False},
            {**base, "fits": False, "reserve_fits": False},
            {**base, "fits": True}]  # a point kept from before the reserve was recorded
    shown = [row[-1] for row in table_rows(rows, {"l2_bytes": [1]})[1:]]
    assert shown == ["yes", "live only", "no", "yes"]


def _stored(folder: Path) -> dict[str, dict]:
    """The stored row of each card (a point computed again is appended: the last one wins)."""
    return {r["hardware"]: r for r in map(json.loads, (folder / "points.jsonl").open())}


def test_a_stored_point_is_reused_only_when_its_inputs_are_the_same(tmp_path, capsys,
                                                                      write_json):
    """The fidelity, the workload's content and the card's are part of a point's identity: a
    rerun with any of them changed computes the points again, and says so."""
    src = json.loads((REPO / "workloads" / "cnn.json").read_text())
    workload = write_json(src, "cnn.json")

    def sweep(fidelity, out="out"):
        assert main(["sweep", str(workload), "--hardware", "t4,l4", "--fidelity", fidelity,
                     "--workers", "1", "--out", str(tmp_path / out)]) == 0
        return _stored(tmp_path / out), capsys.readouterr().err

    analytic, err = sweep("analytic")
    assert "0 points reused, 2 computed (2 new)" in err
    sampled, err = sweep("sampled")
    assert "0 points reused, 2 computed (2 stale" in err
    fresh, _ = sweep("sampled", out="fresh")
    assert sampled["t4"]["step_time_s"] == fresh["t4"]["step_time_s"]
    assert sampled["t4"]["step_time_s"] != analytic["t4"]["step_time_s"]
    again, err = sweep("sampled")
    assert "2 points reused, 0 computed" in err
    assert again == sampled
    src["data"]["batch_size"] *= 2                      # the same file, edited
    write_json(src, "cnn.json")
    bigger, err = sweep("sampled")
    assert "0 points reused, 2 computed (2 stale" in err
    assert bigger["t4"]["step_time_s"] > sampled["t4"]["step_time_s"]


def test_a_point_key_covers_the_card_and_the_simulator(tmp_path, monkeypatch):
    """The same grid position on an edited card, or under other simulator code, is a new
    key, so the stored result is not reused."""
    from simulator import version

    spec = build("k", "t4", ["cnn"], {"l2_bytes": [4194304]}, "analytic", "test")
    point = spec.points()[0]
    digests = {"cnn": execute.workload_digest("cnn")}
    key = execute.point_key(point, "analytic", digests)
    assert key == execute.point_key(spec.points()[0], "analytic", digests)
    other_card = dataclasses.replace(point, hardware=dataclasses.replace(
        point.hardware, content_digest="edited"))
    assert execute.point_key(other_card, "analytic", digests) != key
    assert execute.point_key(point, "sampled", digests) != key
    monkeypatch.setattr(version, "model_digest", lambda: "other code")
    assert execute.point_key(point, "analytic", digests) != key


def test_a_workload_given_as_a_path_names_every_output_file(tmp_path, capsys, monkeypatch):
    """`sweep workloads/transformer.json ... --vary A --vary B`: the README's own form once
    computed every point, then failed writing 'NAME.heatmap.workloads/transformer.json.png'."""
    monkeypatch.chdir(REPO)
    out = tmp_path / "out"
    assert main(["sweep", "workloads/cnn.json", "--hardware", "t4", *GRID, "--fidelity",
                 "analytic", "--workers", "1", "--out", str(out)]) == 0
    assert (out / "cnn-t4.heatmap.cnn.png").is_file()
    assert all(p.parent == out for p in out.rglob("*"))


def test_a_sweep_name_is_a_file_name_not_a_path(tmp_path, write_json, capsys):
    """A sweep file whose name is '../../x' would write outside its output folder."""
    sweep = write_json({"format_version": 1, "name": "../../x", "hardware": "t4",
                        "workloads": ["cnn"], "vary": {"l2_bytes": [1048576, 2097152]}})
    assert main(["sweep", str(sweep), "--out", str(tmp_path / "out")]) == 2
    assert "$.name: expected a string matching" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
