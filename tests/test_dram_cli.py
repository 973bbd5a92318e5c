"""`python -m simulator dram`: the JSON contract, streaming input and bad input."""

import json

import numpy as np
import pytest
from conftest import REPO, load_doc
from dram_helpers import VALIDATION, write_trace

from simulator.cli import main
from simulator.dram.tracefile import read_blocks
from simulator.errors import InputError

KEYS = ["requests", "reads", "writes", "cycles", "clock", "time_ns", "bandwidth_GBps",
        "peak_bandwidth_GBps", "read_latency_ns", "read_latency_cycles", "row_hit_rate",
        "refreshes", "commands", "energy_pJ"]


def run_dram(capsys, *argv):
    code = main(["dram", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_contract(capsys, tmp_path):
    n = 5000
    addr = np.arange(n, dtype=np.uint64) * 64
    write = (np.arange(n) % 3 == 2).astype(np.int64)
    trace = write_trace(tmp_path / "t.trace", addr, write)
    code, out, _ = run_dram(capsys, str(trace), "--hardware", str(VALIDATION), "--json")
    assert code == 0
    doc = json.loads(out)
    for key in KEYS:
        assert key in doc
    assert doc["clock"] == "CK"
    assert doc["requests"] == n and doc["writes"] == write.sum()
    for k in ("mean", "p50", "p99"):
        assert doc["read_latency_ns"][k] == pytest.approx(doc["read_latency_cycles"][k] * 0.57)
    assert set(doc["commands"]) >= {"ACT", "PRE", "RD", "WR", "REF"}
    assert doc["commands"]["RD"] + doc["commands"]["WR"] + \
        doc["reads_forwarded_from_write_buffer"] == n
    assert doc["bandwidth_GBps"] == pytest.approx(n * 32 / doc["time_ns"])
    assert doc["bandwidth_GBps"] <= doc["peak_bandwidth_GBps"]
    assert doc["energy_pJ"] == pytest.approx(n * 32 * 8 * 7.5)
    code, text, _ = run_dram(capsys, str(trace), "--hardware", str(VALIDATION))
    assert f"{doc['cycles']:,} CK cycles" in text and "GB/s" in text


def test_validation_file_resolves_by_repo_path(capsys, tmp_path, monkeypatch):
    trace = write_trace(tmp_path / "t.trace", np.arange(100, dtype=np.uint64) * 32,
                        np.zeros(100, np.int64))
    monkeypatch.chdir(tmp_path)  # outside the checkout: the shipped copy answers
    code, out, _ = run_dram(capsys, str(trace), "--hardware",
                            "hardware/validation/ramulator2-gddr6-8ch.json", "--json")
    assert code == 0 and json.loads(out)["hardware"] == "ramulator2-gddr6-8ch"


def test_parser_reads_comments_cases_crlf_and_a_missing_final_newline(tmp_path):
    path = tmp_path / "t.trace"
    path.write_bytes(b"# a comment\n\n0x40 READ 0\r\n0X80 write 5\n  0xFF0 Read 7")
    blocks = list(read_blocks(path))
    addr = np.concatenate([b.address for b in blocks])
    assert addr.tolist() == [0x40, 0x80, 0xFF0]
    assert np.concatenate([b.is_write for b in blocks]).tolist() == [0, 1, 0]
    assert np.concatenate([b.cycle for b in blocks]).tolist() == [0, 5, 7]
    assert np.concatenate([b.line for b in blocks]).tolist() == [3, 4, 5]


def test_parser_streams_in_blocks(tmp_path):
    n = 10_000
    path = write_trace(tmp_path / "t.trace", np.arange(n, dtype=np.uint64) * 32,
                       np.zeros(n, np.int64))
    blocks = list(read_blocks(path, block_bytes=4096))
    assert len(blocks) > 10
    assert np.array_equal(np.concatenate([b.address for b in blocks]),
                          np.arange(n, dtype=np.uint64) * 32)
    assert np.concatenate([b.line for b in blocks])[-1] == n


@pytest.mark.parametrize("line", ["0x40 READ", "40 READ 0", "0x40 FETCH 0", "0xZZ READ 0",
                                  "0x40 READ 0 extra", "0x40 READ -1"])
def test_malformed_line_names_file_and_line(capsys, tmp_path, line):
    path = tmp_path / "bad.trace"
    path.write_text(f"0x0 READ 0\n0x20 WRITE 0\n{line}\n0x60 READ 0\n")
    code, out, err = run_dram(capsys, str(path), "--hardware", str(VALIDATION))
    assert code == 2 and out == ""
    assert f"{path}:3:" in err and "expected '0x<hex address> READ|WRITE <cycle>'" in err


@pytest.mark.parametrize("text", ["", "\n\n", "# a comment, no request\n"])
def test_a_trace_without_requests_is_refused(capsys, tmp_path, text):
    """No request gives no figures: its zeros (0 GB/s, latency 0 ns) would read as results."""
    path = tmp_path / "none.trace"
    path.write_text(text)
    code, out, err = run_dram(capsys, str(path), "--hardware", str(VALIDATION))
    assert code == 2 and out == ""
    assert f"error: {path}: expected at least one '0x<hex address> READ|WRITE <cycle>'" in err


def test_address_beyond_capacity(capsys, tmp_path):
    path = tmp_path / "far.trace"
    path.write_text("0x0 READ 0\n0x100000000 READ 0\n")   # 4 GiB: one past the last byte
    code, _, err = run_dram(capsys, str(path), "--hardware", str(VALIDATION))
    assert code == 2 and f"{path}:2:" in err and "beyond the capacity" in err


@pytest.mark.parametrize("edit, path, words", [
    (lambda d: d["memory"]["timing"]["cycles_ck"].update(nRC=80), "cycles_ck.nRC",
     "nRC >= nRAS + nRP"),
    (lambda d: d["memory"].update(data_rate_gbps=0), "$.memory.data_rate_gbps", "> 0"),
    (lambda d: d["memory"]["controller"].update(scheduler="lifo"),
     "$.memory.controller.scheduler", "expected one of"),
    (lambda d: d["memory"]["controller"].update(write_low_watermark=0.9),
     "$.memory.controller.write_low_watermark", "write_low_watermark < write_high_watermark"),
])
def test_impossible_memory_system(capsys, tmp_path, edit, path, words):
    doc = load_doc(VALIDATION)
    edit(doc)
    bad = tmp_path / "ramulator2-gddr6-8ch.json"
    bad.write_text(json.dumps(doc))
    trace = tmp_path / "t.trace"
    trace.write_text("0x0 READ 0\n")
    code, _, err = run_dram(capsys, str(trace), "--hardware", str(bad))
    assert code == 2 and path in err and words in err


def test_missing_trace_and_hbm_hardware(capsys, tmp_path):
    code, _, err = run_dram(capsys, str(tmp_path / "none.trace"), "--hardware", str(VALIDATION))
    assert code == 2 and "file not found" in err
    trace = tmp_path / "t.trace"
    trace.write_text("0x0 READ 0\n")
    code, _, err = run_dram(capsys, str(trace), "--hardware", "h100-sxm")
    assert code == 2 and "GDDR6" in err and str(REPO / "hardware") in err


def test_memory_only_hardware_is_refused_by_run(capsys):
    code = main(["run", "cnn", "--hardware", str(VALIDATION)])
    err = capsys.readouterr().err
    assert code == 2 and "memory system only" in err and "at $.compute" in err


@pytest.mark.parametrize("card", ["a40", "t4", str(VALIDATION)])
def test_the_python_api_runs_the_controller_the_cli_runs(capsys, tmp_path, card):
    """One controller per card, decided as its file loads: MemorySystem.from_hardware, `dram`
    and `hardware show` agree (the API had run Ramulator's generic controller on cards that
    state none, where the CLI ran the GPU memory path)."""
    from simulator.config.hardware import load_hardware
    from simulator.dram.system import MemorySystem

    n = 3000
    addr = (np.arange(n, dtype=np.uint64) * 4096 + np.arange(n, dtype=np.uint64) % 7 * 32)
    trace = write_trace(tmp_path / "t.trace", addr, (np.arange(n) % 4 == 3).astype(np.int64))
    hw = load_hardware(card)
    ms = MemorySystem.from_hardware(hw)
    api = ms.run_trace(trace).as_dict()
    code, out, _ = run_dram(capsys, str(trace), "--hardware", card, "--json")
    assert code == 0
    doc = json.loads(out)
    assert {k: doc[k] for k in api} == api
    assert main(["hardware", "show", card, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["controller"]
    assert {k: v for k, v in shown.items() if k != "source"} == ms.controller.settings()
    if card in ("a40", "t4"):
        assert ms.controller.frontend == "per_channel" and ms.controller.read_buffer == 256
        assert "GPU memory path" in shown["source"]


@pytest.mark.parametrize("setting, value", [("scheduler", "fifo"), ("refresh", "perbank"),
                                            ("page_policy", "close"), ("frontend", "ooo"),
                                            ("read_buffer", 0)])
def test_an_unknown_policy_through_the_python_api_is_an_error(setting, value):
    from simulator.config.controller import ControllerConfig

    with pytest.raises(ValueError, match=setting):
        ControllerConfig(**{setting: value})


def test_policy_names_are_the_schemas(repo):
    """The schema's enums and config.controller's names are one list each."""
    from simulator.config.controller import POLICIES, SETTINGS
    from simulator.config.loader import schema

    block = schema("hardware")["$defs"]["controller"]["properties"]
    assert set(block) == set(SETTINGS)
    for name, allowed in POLICIES.items():
        assert tuple(block[name]["enum"]) == allowed


def test_a_trace_whose_cycles_go_backwards_is_refused(capsys, tmp_path):
    """A request may not arrive before the one above it; the line is named, also across the
    reader's blocks."""
    trace = tmp_path / "back.trace"
    trace.write_text("0x0 READ 0\n# a comment\n0x40 READ 10\n0x80 WRITE 5\n")
    code, _, err = run_dram(capsys, str(trace))
    assert code == 2
    assert err.strip() == (f"error: {trace}:4: expected arrival cycles that never decrease (CK, "
                           "in trace order), got 5 after 10")
    lines = [f"0x{i * 64:x} READ {i}" for i in range(3000)] + ["0x0 READ 7"]
    trace.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"back.trace:3001: .* got 7 after 2999"):
        for _ in read_blocks(trace, block_bytes=4096):
            pass
    trace.write_text("0x0 READ 4\n0x40 WRITE 4\n")  # equal cycles are fine
    assert run_dram(capsys, str(trace))[0] == 0


def test_a_long_wait_says_what_it_is(capsys):
    """A first run compiles the engine for seconds: past notice.SLOW_S a line says so; a
    short wait prints nothing, and an engine already compiled takes no notice at all."""
    import time

    from simulator import notice
    from simulator.dram import engine as E
    from simulator.dram.system import _first_call

    with notice.if_slow("busy compiling", after_s=0.05):
        time.sleep(0.3)
    assert capsys.readouterr().err == "busy compiling\n"
    with notice.if_slow("never shown", after_s=5):
        pass
    time.sleep(0.05)
    assert capsys.readouterr().err == ""
    if E.run_channels.signatures:  # (compiled by an earlier test in this process)
        with _first_call(E.run_channels):
            time.sleep(notice.SLOW_S + 0.2)
        assert capsys.readouterr().err == ""
