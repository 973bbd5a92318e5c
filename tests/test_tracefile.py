"""The trace file: a written trace reads back to the same step."""

import json

import pytest

from simulator.cli import main
from simulator.config.workload import load_workload
from simulator.errors import InputError
from simulator.workload import tracefile
from simulator.workload.generate import build_trace
from simulator.workload.memory import profile
from simulator.workload.trace import Phase


@pytest.mark.parametrize("name", ["transformer", "resnet50"])
def test_round_trip(tmp_path, name):
    trace = build_trace(load_workload(name))
    path = tmp_path / "t.jsonl"
    tracefile.write(trace, path)
    back, header = tracefile.read(path)
    assert header["format_version"] == tracefile.FORMAT_VERSION
    assert back.parameter_count == trace.parameter_count
    for phase in Phase:
        assert back.flops(phase) == trace.flops(phase)
    assert [o.bytes_moved for o in back.ops] == [o.bytes_moved for o in trace.ops]
    assert profile(back).peak_bytes == profile(trace).peak_bytes
    assert not list(tmp_path.glob(".*.tmp"))  # nothing half-written left behind


def test_cli_writes_a_trace(tmp_path, capsys):
    out = tmp_path / "cnn.jsonl"
    assert main(["trace", "cnn", "-o", str(out)]) == 0
    lines = out.read_text().splitlines()
    header = json.loads(lines[0])
    assert header["format"] == "gddr6-roofline-sim/trace" and header["source"]["name"] == "cnn"
    assert len(lines) == 1 + header["tensors"] + header["ops"] + sum(
        1 for line in lines if line.startswith('{"release"'))


def test_bad_trace_files(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"format": "something else"}\n')
    with pytest.raises(InputError, match=r"bad.jsonl:1: expected a header"):
        tracefile.read(path)
    good = tmp_path / "good.jsonl"
    tracefile.write(build_trace(load_workload("cnn")), good)
    lines = good.read_text().splitlines()
    lines[3] = lines[3].replace('"dtype":"fp32"', '"dtype":"fp12"')
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"bad.jsonl:4: expected tensors numbered in order"):
        tracefile.read(path)


def test_run_reads_a_trace_file(tmp_path, capsys):
    out = tmp_path / "transformer.jsonl"
    assert main(["trace", "transformer", "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["run", str(out), "--json"]) == 0
    from_trace = json.loads(capsys.readouterr().out)
    assert main(["run", "transformer", "--json"]) == 0
    from_workload = json.loads(capsys.readouterr().out)
    assert from_trace["step_time_s"] == from_workload["step_time_s"]
    assert from_trace["memory"] == from_workload["memory"]


def test_unreadable_trace_files_are_input_errors(tmp_path, capsys):
    """A directory or non-UTF-8 bytes where a trace should be: a plain error, exit 2."""
    folder = tmp_path / "folder.jsonl"
    folder.mkdir()
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe\n")
    for path, words in ((folder, "expected a trace file (.jsonl), got a directory"),
                        (binary, "binary.jsonl:1: expected UTF-8 text")):
        assert main(["memory", str(path)]) == 2
        assert words in capsys.readouterr().err
