"""The command line: the run --json contract, the listings, and bad input."""

import json
import os
import re
import signal
import subprocess
import sys

import pytest
from conftest import REPO, load_doc

from simulator.cli import main


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_help_lists_subcommands():
    proc = subprocess.run([sys.executable, "-m", "simulator", "--help"], cwd=REPO,
                          capture_output=True, text=True, check=True)
    for word in ("run", "hardware", "workloads"):
        assert word in proc.stdout


def test_run_json_contract(capsys):
    code, out, _ = run_cli(capsys, "run", "workloads/transformer.json", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["hardware"]["name"] == "t4"
    assert doc["hardware"]["peak_bandwidth_GBps"] == pytest.approx(320.0)
    assert doc["workload"]["parameters"] == 54_390_544
    flops = doc["workload"]["flops"]
    assert set(flops) == {"forward", "backward", "optimizer", "total"}
    assert flops["total"] == flops["forward"] + flops["backward"] + flops["optimizer"]
    mem = doc["memory"]
    assert mem["capacity_bytes"] == 16 * 2**30
    assert mem["fits"] is (mem["peak_bytes"] <= mem["capacity_bytes"])
    # the caching allocator's reserve, what an out-of-memory error checks, above the live peak
    assert mem["reserved_bytes"] >= mem["peak_bytes"]
    assert mem["reserve_fits"] is (mem["reserved_bytes"] <= mem["capacity_bytes"])
    ops = doc["ops"]
    assert len(ops) == doc["workload"]["ops"]
    keys = {"name", "phase", "flops", "bytes_read", "bytes_written", "time_s", "bound",
            "arithmetic_intensity"}
    for op in ops:
        assert keys <= set(op)
        assert op["bound"] in doc["bounds"]
        assert op["time_s"] == pytest.approx(op["launch_time_s"] + max(
            op["compute_time_s"], op["memory_time_s"], op["l2_time_s"]))
        assert op["dram_bytes"] >= 0 and op["analytic_time_s"] > 0
        assert op["achieved_bandwidth_GBps"] <= doc["hardware"]["peak_bandwidth_GBps"] * 1.000001
    assert doc["step_time_s"] == pytest.approx(sum(op["time_s"] for op in ops))
    # the step's bound: the class (memory: DRAM or L2; compute; launch) holding most of it
    held = {"memory": 0.0, "compute": 0.0, "launch": 0.0}
    for op in ops:
        held["memory" if op["bound"] in ("dram_bandwidth", "dram_latency", "l2")
             else op["bound"]] += op["time_s"]
    assert doc["step_bound"] == max(held, key=held.get)
    assert doc["replay"]["bottlenecks"]["memory_bound_time_share"] == pytest.approx(
        held["memory"] / doc["step_time_s"])
    assert doc["fidelity"] == "sampled"
    assert doc["analytic_step_time_s"] == pytest.approx(sum(op["analytic_time_s"] for op in ops))
    assert 0 <= doc["step_time_error_bound_s"] < doc["step_time_s"]
    assert sum(op["flops"] for op in ops) == flops["total"]
    # the memory plot's figures: live bytes while each op runs, the largest the peak
    assert max(op["live_bytes"] for op in ops) == mem["peak_bytes"]
    assert ops[[o["name"] for o in ops].index(mem["peak_op"])]["live_bytes"] == mem["peak_bytes"]
    # per op: its own bound, and whether its DRAM was simulated or taken from a twin's
    assert all(0 <= op["memory_time_error_bound_s"] < op["memory_time_s"] or
               op["memory_time_error_bound_s"] == 0 for op in ops)
    assert all(op["dram_simulated_requests"] >= 0 for op in ops)
    assert any(op["dram_simulated_requests"] == 0 and op["dram_bytes"] > 0 for op in ops)
    assert any(op["memory_time_error_bound_s"] > 0 for op in ops)


def test_run_text_and_json_agree(capsys):
    _, text, _ = run_cli(capsys, "run", "cnn", "--hardware", "a40")
    _, out, _ = run_cli(capsys, "run", "cnn", "--hardware", "a40", "--json")
    doc = json.loads(out)
    assert f"{doc['workload']['parameters']:,} parameters" in text
    assert f"({doc['memory']['peak_bytes']:,} B)" in text
    assert "fits" in text and "Step time" in text
    shared = doc["replay"]["dram_bound_ops_on_shared_results"]
    assert f"sampled: {shared['ops']} of {shared['of_dram_bound_ops']} DRAM-bound ops" in text
    assert shared["ops"] == sum(1 for o in doc["ops"] if o["bound"].startswith("dram")
                                and o["dram_simulated_requests"] == 0)


def test_run_own_windows(capsys):
    """--own-windows: less of the transformer's DRAM-bound time rests on another op's result
    (only ops simulated in full, and those whose DRAM the probe finds hidden, still share by
    shape): an op that took its shape's windows measures its own, and the two steps agree
    within their bounds."""
    _, out, _ = run_cli(capsys, "run", "transformer", "--own-windows", "--json")
    own = json.loads(out)
    _, out, _ = run_cli(capsys, "run", "transformer", "--json")
    shared = json.loads(out)
    mine, theirs = (d["replay"]["dram_bound_ops_on_shared_results"] for d in (own, shared))
    assert mine["dram_time_share"] < theirs["dram_time_share"]
    took = {o["name"] for o in shared["ops"]
            if o["bound"].startswith("dram") and o["dram_simulated_requests"] == 0}
    assert any(o["dram_simulated_requests"] > 0 for o in own["ops"] if o["name"] in took)
    assert abs(own["step_time_s"] - shared["step_time_s"]) <= (
        own["step_time_error_bound_s"] + shared["step_time_error_bound_s"])


def test_run_accepts_hardware_path(capsys):
    code, out, _ = run_cli(capsys, "run", "cnn", "--hardware", str(REPO / "hardware/l4.json"),
                           "--json")
    assert code == 0 and json.loads(out)["hardware"]["name"] == "l4"


def test_run_says_when_it_does_not_fit(capsys, write_json):
    doc = load_doc(REPO / "workloads/transformer.json")
    doc["data"]["batch_size"] = 4000
    path = write_json(doc, "big.json")
    code, out, _ = run_cli(capsys, "run", str(path), "--hardware", "rtx-3070")
    assert code == 0
    assert "DOES NOT FIT" in out


def test_hardware_list_and_show(capsys):
    code, out, _ = run_cli(capsys, "hardware", "list")
    assert code == 0 and "rx-7900-xtx" in out and "960.0" in out
    for group in ("hardware", "workloads"):  # the group alone lists; --json before or after
        assert run_cli(capsys, group) == run_cli(capsys, group, "list")
        as_json = run_cli(capsys, group, "list", "--json")
        assert json.loads(as_json[1])
        assert run_cli(capsys, group, "--json") == run_cli(capsys, group, "--json", "list") \
            == as_json
    assert run_cli(capsys, "hardware", "--json", "show", "t4") == \
        run_cli(capsys, "hardware", "show", "t4", "--json")
    code, out, _ = run_cli(capsys, "hardware", "show", "a40")
    assert code == 0
    assert "696.0 GB/s" in out and "CK 1812.5 MHz" in out and "clamshell" in out
    assert "channel, bankgroup, column, bank, row; channel hashed with row" in out  # default
    code, out, _ = run_cli(capsys, "hardware", "show", "rx-6900-xt")
    assert code == 0 and "column:3, channel, bankgroup" in out and "umc_v8_7.c" in out
    assert "scheduler=frfcfs_hit_guard" in out and "the GPU memory path" in out
    assert "refresh=per_bank  refresh_postpone=8" in out
    code, out, _ = run_cli(capsys, "hardware", "show", "t4", "--json")
    doc = json.loads(out)
    assert doc["ridge_point_flop_per_byte"]["fp32"] == pytest.approx(25.4375)
    # the controller and mapping the replay runs the card on
    assert doc["controller"]["write_buffer"] == 512 and doc["controller"]["refresh"] == "per_bank"
    assert doc["address_mapping"]["fields"] == ["channel", "bankgroup", "column", "bank", "row"]
    code, out, _ = run_cli(capsys, "hardware", "show",
                           str(REPO / "hardware/validation/ramulator2-gddr6-8ch.json"))
    assert "refresh=all_bank" in out and "the hardware file's memory.controller" in out
    assert "refresh_postpone" not in out  # it bounds owed per-bank refreshes only


def test_workloads_list_and_show(capsys):
    code, out, _ = run_cli(capsys, "workloads", "list")
    assert code == 0 and "transformer" in out and "cnn" in out
    code, out, _ = run_cli(capsys, "workloads", "show", "cnn", "--json")
    assert json.loads(out)["parameters"] == 431_080


def test_workloads_show_reads_a_trace_file(capsys, tmp_path):
    """As run and memory do (it said 'invalid JSON': a trace is JSON Lines)."""
    trace = tmp_path / "cnn.jsonl"
    assert main(["trace", "cnn", "-o", str(trace)]) == 0
    capsys.readouterr()
    code, out, _ = run_cli(capsys, "workloads", "show", str(trace), "--json")
    doc = json.loads(out)
    code2, out2, _ = run_cli(capsys, "workloads", "show", "cnn", "--json")
    assert code == code2 == 0
    assert {k: v for k, v in doc.items() if k != "path"} == \
        {k: v for k, v in json.loads(out2).items() if k != "path"}


# --- bad input -------------------------------------------------------------------------------
def _mutate(path, edit):
    doc = load_doc(path)
    edit(doc)
    return doc


BAD_WORKLOADS = [
    # 1e308 passed the schema as an "integer" and overflowed while formatting
    ("batch of 1e308", lambda d: d["data"].update(batch_size=1e308), "$.data.batch_size",
     "expected a finite number of magnitude at most 2**53 (9.01e+15), got 1e+308"),
    ("unknown key", lambda d: d["model"].update(d_modle=512), "$.model", "d_modle"),
    ("missing key", lambda d: d["model"].pop("nhead"), "$.model", "'nhead' is required"),
    ("wrong type", lambda d: d["data"].update(batch_size="ten"), "$.data.batch_size",
     "expected integer"),
    ("zero size", lambda d: d["data"].update(batch_size=0), "$.data.batch_size", "> 0"),
    # a billion layers would build a trace for hours; a billion-wide model overflowed int64
    ("too many layers", lambda d: d["model"].update(num_encoder_layers=10**9),
     "$.model.num_encoder_layers", "expected a number <= 4096"),
    ("tensors past 64-bit byte counts", lambda d: d["model"].update(d_model=10**9),
     "$.model", "expected a step whose tensors fit the simulator's 64-bit byte counts"),
    # Python's json reads 1e999 as an infinity, which every schema bound lets through
    ("infinite size", lambda d: d["data"].update(batch_size=1e999), "$.data.batch_size",
     "expected a finite number"),
    ("negative size", lambda d: d["model"].update(d_model=-512), "$.model.d_model", "> 0"),
    ("heads not dividing", lambda d: d["model"].update(nhead=7), "$.model.nhead", "divide"),
    ("unknown dtype", lambda d: d["training"].update(dtype="fp12"), "$.training.dtype",
     "expected one of"),
    ("unknown optimizer", lambda d: d["training"]["optimizer"].update(type="lion"),
     "$.training.optimizer.type", "expected one of"),
    ("option of another optimizer", lambda d: d["training"]["optimizer"].update(momentum=0.9),
     "$.training.optimizer.momentum", "does not apply"),
    ("master weights of fp32 parameters", lambda d: d["training"].update(master_weights=True),
     "$.training.master_weights", "expected dtype fp16 or bf16, got fp32"),
    ("clip to no norm", lambda d: d["training"].update(grad_clip={"max_norm": 0}),
     "$.training.grad_clip.max_norm", "> 0"),
]


def test_bad_decoder_models(capsys, write_json):
    base = REPO / "workloads/gpt2-small.json"
    cases = [(lambda d: d["model"].update(n_head=7), "$.model.n_head", "divide"),
             (lambda d: d["model"].update(n_kv_head=5), "$.model.n_kv_head", "divide"),
             (lambda d: d["model"].update(n_layer=0), "$.model.n_layer", "> 0"),
             (lambda d: d["data"].update(seq_len=2048), "$.data.seq_len", "context"),
             (lambda d: d["data"].pop("seq_len"), "$.data", "seq_len")]
    for edit, path, words in cases:
        bad = write_json(_mutate(base, edit), "bad.json")
        code, _, err = run_cli(capsys, "run", str(bad))
        assert code == 2 and f"at {path}" in err and words in err, err


@pytest.mark.parametrize("label, edit, path, words", BAD_WORKLOADS,
                         ids=[b[0] for b in BAD_WORKLOADS])
def test_bad_workload(capsys, write_json, label, edit, path, words):
    bad = write_json(_mutate(REPO / "workloads/transformer.json", edit), "bad.json")
    code, out, err = run_cli(capsys, "run", str(bad))
    assert code == 2, label
    assert out == ""
    assert str(bad) in err and f"at {path}" in err and words in err


def test_bad_cnn_kernel_larger_than_input(capsys, write_json):
    bad = write_json(_mutate(REPO / "workloads/cnn.json",
                             lambda d: d["model"]["layers"][3].update(kernel_size=30)))
    code, _, err = run_cli(capsys, "run", str(bad))
    assert code == 2 and "at $.model.layers[3].kernel_size" in err


@pytest.mark.parametrize("layer, path, words", [
    ({"type": "batchnorm2d"}, "$.model.layers[7]", "batchnorm2d needs a (channels, height, width)"),
    ({"type": "adaptive_avgpool2d"}, "$.model.layers[7]", "'output_size' is required but missing"),
    ({"type": "relu", "inplace": "yes"}, "$.model.layers[7].inplace", "boolean"),
])
def test_bad_cnn_layer(capsys, write_json, layer, path, words):
    """A layer the flattened features cannot take, or one written wrong, names its place."""
    bad = write_json(_mutate(REPO / "workloads/cnn.json",
                             lambda d: d["model"]["layers"].insert(7, layer)))
    code, out, err = run_cli(capsys, "run", str(bad))
    assert code == 2 and out == ""
    assert str(bad) in err and f"at {path}" in err and words in err, err


def test_bad_resnet_width_per_group_on_basic_blocks(capsys, write_json):
    bad = write_json(_mutate(REPO / "workloads/resnet50.json", lambda d: d["model"].update(
        block="basic", layers=[2, 2, 2, 2], width_per_group=128)))
    code, out, err = run_cli(capsys, "run", str(bad))
    assert code == 2 and out == ""
    assert "at $.model.width_per_group" in err and "bottlenecks only" in err, err


def _full_timing(d: dict) -> dict:
    """The file's timing written out in full (its preset's set), as format 1 files state it."""
    preset = json.loads((REPO / "hardware" / "timing" / f"{d['memory']['timing']['preset']}"
                                                        ".json").read_text())
    d["memory"]["timing"] = {k: preset[k] for k in ("source", "reference_data_rate_gbps",
                                                     "cycles_ck")}
    return d["memory"]["timing"]


BAD_HARDWARE = [
    ("peak of 1e308", lambda d: d["compute"]["peak_tflops"].update(fp32=1e308),
     "$.compute.peak_tflops.fp32", "expected a finite number of magnitude at most 2**53"),
    ("data rate of 2000 Gb/s", lambda d: d["memory"].update(data_rate_gbps=2000),
     "$.memory.data_rate_gbps", "expected a number <= 1000"),
    ("zero data rate", lambda d: d["memory"].update(data_rate_gbps=0),
     "$.memory.data_rate_gbps", "> 0"),
    # NaN passes every schema bound (NaN > 0 and NaN <= 0 are both false)
    ("NaN data rate", lambda d: d["memory"].update(data_rate_gbps=float("nan")),
     "$.memory.data_rate_gbps", "expected a finite number of magnitude at most 2**53"),
    ("infinite L2", lambda d: d["cache"].update(l2_bytes=float("inf")), "$.cache.l2_bytes",
     "expected a finite number"),
    ("data rate the timing set cannot reach", lambda d: d["memory"].update(data_rate_gbps=0.001),
     "$.memory.data_rate_gbps", "impossible timing set at this data rate"),
    # every timing rounds up to 1 CK, so per-bank refresh alone would fill every command slot
    ("per-bank refresh at 0.1 Gb/s", lambda d: d["memory"].update(data_rate_gbps=0.1),
     "$.memory.data_rate_gbps", "per-bank refresh impossible at this data rate"),
    ("per-bank refresh faster than REFpb spacing",
     lambda d: d["memory"]["timing"].setdefault("cycles_ck", {}).update(nREFI=300),
     "$.memory.timing.cycles_ck.nREFI", "nREFI // 16 = 18 CK) longer than the 22 CK"),
    # the engine's data bus would disagree with the peak the data rate states
    ("burst of 4 CK", lambda d: d["memory"]["timing"].setdefault("cycles_ck", {}).update(
        nBL=4, nCCDS=4, nCCDL=4),
     "$.memory.timing.cycles_ck.nBL", "expected 2: a BL16 burst"),
    ("negative bus", lambda d: d["memory"].update(bus_width_bits=-256),
     "$.memory.bus_width_bits", "> 0"),
    ("devices do not fill the bus", lambda d: d["memory"].update(devices=7), "$.memory.devices",
     "expected 8 devices"),
    ("impossible timing", lambda d: d["memory"]["timing"].setdefault("cycles_ck", {}).update(
        nRC=50),
     "$.memory.timing.cycles_ck.nRC", "nRC >= nRAS + nRP"),
    ("missing timing key", lambda d: _full_timing(d)["cycles_ck"].pop("nFAW"),
     "$.memory.timing.cycles_ck", "'nFAW' is required"),
    ("unknown timing preset", lambda d: d["memory"]["timing"].update(preset="samsung-x"),
     "$.memory.timing.preset", "unknown timing preset 'samsung-x'; expected a path"),
    ("HBM without its channels per stack", lambda d: d["memory"].update(type="HBM2",
     channel_width_bits=128, timing=None) or d["memory"].pop("timing"),
     "$.memory", "'channels_per_device' is required for HBM2 memory"),
    ("unknown memory type", lambda d: d["memory"].update(type="GDDR5"), "$.memory.type",
     "expected one of"),
    ("mapping names a field twice", lambda d: d["memory"].update(address_mapping={
        "fields": ["channel", "channel", "bank", "row", "column"], "source": "x"}),
     "$.memory.address_mapping.fields", "expected 'channel' once as a plain name, got it 2"),
    ("mapping part too wide", lambda d: d["memory"].update(address_mapping={
        "fields": ["channel:5", "channel", "bankgroup", "bank", "row", "column"], "source": "x"}),
     "$.memory.address_mapping.fields", "'channel' has 16 values, which its parts of 32"),
    ("mapping without its source", lambda d: d["memory"].update(address_mapping={
        "fields": ["channel", "bankgroup", "bank", "row", "column"]}),
     "$.memory.address_mapping", "'source' is required"),
]


@pytest.mark.parametrize("label, edit, path, words", BAD_HARDWARE,
                         ids=[b[0] for b in BAD_HARDWARE])
def test_bad_hardware(capsys, write_json, label, edit, path, words):
    bad = write_json(_mutate(REPO / "hardware/t4.json", edit), "t4.json")
    code, _, err = run_cli(capsys, "run", "cnn", "--hardware", str(bad))
    assert code == 2, label
    assert str(bad) in err and f"at {path}" in err and words in err


def test_unknown_hardware_name(capsys):
    code, _, err = run_cli(capsys, "run", "cnn", "--hardware", "rtx-9090")
    assert code == 2 and "unknown hardware 'rtx-9090'" in err and "t4" in err


def test_missing_file(capsys):
    code, _, err = run_cli(capsys, "run", "workloads/nope.json")
    assert code == 2 and "workloads/nope.json: file not found" in err


def test_invalid_json(capsys, write_json):
    bad = write_json('{"format_version": 1,\n "name": }')
    code, _, err = run_cli(capsys, "run", str(bad))
    assert code == 2 and "invalid JSON at line 2" in err


def test_bad_input_exits_2_without_traceback(write_json):
    bad = write_json({"format_version": 1})
    proc = subprocess.run([sys.executable, "-m", "simulator", "run", str(bad)], cwd=REPO,
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("error: ") and "is required but missing" in proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize("command", [["run", "cnn", "--fidelity", "analytic", "--out"],
                                     ["trace", "cnn", "-o"],
                                     ["sweep", "cnn", "--hardware", "t4,l4", "--fidelity",
                                      "analytic", "--out"]])
def test_an_output_under_a_file_names_the_file_in_the_way(capsys, tmp_path, command):
    """Not a traceback, nor the OS's "File exists" / "Not a directory" on the path asked
    for: one line naming the file that is in the way, exit 2 as for --out FILE."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    target = blocker / "sub" / "out"  # under a file: no folder can be made there
    code, out, err = run_cli(capsys, *command, str(target))
    assert code == 2 and err.startswith(f"error: {blocker}: expected a directory for "), err
    assert str(target) in err and err.count("\n") == 1 and out == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


@pytest.mark.parametrize("command", [["run", "cnn", "--fidelity", "analytic", "--out"],
                                     ["trace", "cnn", "-o"]])
def test_an_output_that_cannot_be_written_is_an_error(capsys, tmp_path, command):
    """The OS refuses the name (one longer than any file system takes; permissions would not
    stop root): one line naming what was asked for, exit 1."""
    target = tmp_path / ("x" * 300)
    code, out, err = run_cli(capsys, *command, str(target))
    assert code == 1 and err.startswith(f"error: {target}: cannot write: "), err
    assert err.count("\n") == 1 and out == ""
    assert list(tmp_path.iterdir()) == []


def test_top_sets_the_op_table_and_zero_leaves_it_out(capsys):
    code, out, _ = run_cli(capsys, "run", "cnn", "--fidelity", "analytic", "--top", "3")
    assert code == 0 and "Top 3 ops by time" in out
    at = out.splitlines().index(next(line for line in out.splitlines() if "Top 3" in line))
    assert out.splitlines()[at + 5] == ""  # its header and three rows
    code, out, _ = run_cli(capsys, "run", "cnn", "--fidelity", "analytic", "--top", "0")
    assert code == 0 and "ops by time" not in out and "Step time" in out


def test_ctrl_c_that_a_ctypes_callback_swallows_still_ends_the_run_as_interrupted(monkeypatch,
                                                                                  capsys):
    """Ctrl-C landing inside a ctypes callback (numba compiling its first functions runs in
    llvmlite's) raises a KeyboardInterrupt that Python reports as ignored, and numba then
    fails with an error of its own: still one line and exit 130, not that error's traceback
    nor the ignored one's. The same error with no Ctrl-C before it is not taken for one."""
    import ctypes

    from simulator import cli

    def compiling(args):
        ctypes.CFUNCTYPE(None)(lambda: signal.raise_signal(signal.SIGINT))()
        raise RuntimeError("no compiled object yet")

    def failing(args):
        raise RuntimeError("no compiled object yet")

    # Python's own handler, as in a terminal (a test worker may run with SIGINT ignored), and
    # Python's own report of an ignored exception, to stderr
    monkeypatch.setattr(cli, "cmd_run", compiling)
    monkeypatch.setattr(sys, "unraisablehook", sys.__unraisablehook__)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        code, _, err = run_cli(capsys, "run", "cnn")
        assert code == cli.EXIT_INTERRUPTED
        assert err.splitlines() == ["interrupted"]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        monkeypatch.setattr(cli, "cmd_run", failing)
        with pytest.raises(RuntimeError):
            main(["run", "cnn"])
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.skipif(not hasattr(signal, "SIGINT") or os.name != "posix", reason="POSIX signals")
@pytest.mark.parametrize("args", [
    ["run", "transformer", "--fidelity", "cycle"],
    ["sweep", "transformer", "--hardware", "t4", "--vary", "data_rate_gbps=10,12,14,16",
     "--fidelity", "cycle", "--workers", "2"]])
def test_ctrl_c_prints_one_line_and_exits_130(tmp_path, args):
    """Ctrl-C (SIGINT to the whole foreground group, as a terminal sends it) while the step
    runs: one line, exit 130, within seconds (a sweep's workers end too)."""
    import time

    if args[0] == "sweep":
        args = [*args, "--out", str(tmp_path / "out")]
    # as a terminal starts it: SIGINT at its default (a shell's background job, where the suite
    # may run, starts its children with it ignored, and they would run to the end)
    proc = subprocess.Popen([sys.executable, "-m", "simulator", *args], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(4)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert err.splitlines()[-1].startswith("interrupted")
    if args[0] == "sweep":
        assert "kept in" in err.splitlines()[-1]


def test_ctrl_c_inside_numba_is_an_interrupt_and_other_system_errors_are_not(monkeypatch, capsys):
    """Ctrl-C while numba loads a cached function surfaces as a SystemError raised from the
    KeyboardInterrupt: still one line and exit 130; a SystemError of any other cause stays."""
    import simulator.cli as cli

    def interrupted_in_numba(args):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise SystemError("returned a result with an exception set") from exc

    monkeypatch.setattr(cli, "cmd_run", interrupted_in_numba)
    assert main(["run", "cnn"]) == 130
    assert capsys.readouterr().err.strip() == "interrupted"

    def broken(args):
        raise SystemError("a real fault")

    monkeypatch.setattr(cli, "cmd_run", broken)
    with pytest.raises(SystemError, match="a real fault"):
        main(["run", "cnn"])


def test_small_frictions_a_new_user_meets(tmp_path, capsys, write_json, repo):
    """What a new user met in one sitting: a copied card must be renamed twice before it
    loads (now one message says both rules), a typo in a sweep's workload blamed --hardware,
    `dram` alone required --hardware, no --version, --own-windows silently ignored."""
    doc = json.loads((repo / "hardware" / "t4.json").read_text())
    copied = write_json(doc, "My Card.json")
    assert main(["hardware", "show", str(copied)]) == 2
    err = capsys.readouterr().err
    assert "rename the file to 'my-card.json' and set the name to 'my-card'" in err
    assert main(["hardware", "show", str(write_json({**doc, "name": "my-card"},
                                                    "my-card.json"))]) == 0
    capsys.readouterr()
    assert main(["sweep", "cnnx", "--hardware", "t4"]) == 2
    assert "unknown workload 'cnnx'" in capsys.readouterr().err
    assert main(["sweep", "cnn", "--hardware", "t4"]) == 2
    assert "nothing to vary for cnn on one card" in capsys.readouterr().err
    trace = tmp_path / "t.trace"
    trace.write_text("0x0 READ 0\n0x40 WRITE 2\n")
    assert main(["dram", str(trace), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["hardware"] == "t4"
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert re.fullmatch(r"gddr6-roofline-sim \S+ \(model [0-9a-f]{12}\)\n",
                        capsys.readouterr().out)
    assert main(["run", "cnn", "--fidelity", "analytic", "--own-windows"]) == 2
    assert "--own-windows sets how the sampled replay" in capsys.readouterr().err
