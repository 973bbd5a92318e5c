"""The trace file: a written trace reads back to the same step."""

import json
import os

import pytest

from simulator.cli import main
from simulator.config.workload import load_workload
from simulator.errors import InputError
from simulator.workload import tracefile
from simulator.workload.generate import build_trace
from simulator.workload.memory import profile
from simulator.workload.trace import Phase


@pytest.mark.parametrize("name", ["transformer", "resnet50", "bert-large-squad", "gpt2-small"])
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
    assert [o.host_waits for o in back.ops] == [o.host_waits for o in trace.ops]
    def accesses(t):
        return [[(a.pattern, a.run_bytes, a.passes, a.block_threads) for a in o.reads + o.writes]
                for o in t.ops]

    assert accesses(back) == accesses(trace)
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


@pytest.fixture(scope="module")
def cnn_trace_lines(tmp_path_factory) -> list[str]:
    good = tmp_path_factory.mktemp("trace") / "good.jsonl"
    tracefile.write(build_trace(load_workload("cnn")), good)
    return good.read_text().splitlines()


def _first(lines: list[str], start: str) -> int:
    return next(i for i, line in enumerate(lines) if line.startswith(start))


# (what, the record's first key and value, old text, new text, where, words): each a record
# that once read without complaint (a wrong step) or ended in a traceback
BAD_RECORDS = [
    ("unknown dtype", '{"tensor":3,', '"dtype":"fp32"', '"dtype":"fp12"', "$.dtype",
     'expected one of "fp64"'),
    ("tensor ids out of order", '{"tensor":3,', '{"tensor":3,', '{"tensor":4,', "$.tensor",
     "expected tensor ids in order from 0: 3"),
    ("negative shape", '{"tensor":8,', '"shape":[64', '"shape":[-64', "$.shape[0]",
     "expected a number >= 0, got -64"),
    ("NaN flops", '{"op":0,', '"flops":36864000', '"flops":NaN', "$.flops",
     "expected a finite number"),
    ("negative flops", '{"op":0,', '"flops":36864000', '"flops":-5', "$.flops",
     "expected a number >= 0, got -5"),
    ("flops as text", '{"op":0,', '"flops":36864000', '"flops":"many"', "$.flops",
     "expected number"),
    ("negative tensor id", '{"op":0,', '"reads":[[8,', '"reads":[[-1,', "$.reads[0][0]",
     "expected a number >= 0, got -1"),
    ("tensor id not yet listed", '{"op":0,', '"reads":[[8,', '"reads":[[999,',
     "$.reads[0][0]", "expected the id of a tensor listed above"),
    ("negative bytes", '{"op":0,', '"reads":[[8,200704,', '"reads":[[8,-200704,',
     "$.reads[0][1]", "expected a number >= 0"),
    ("run bytes on a stream", '{"op":0,', '"reads":[[8,200704,"sequential"]',
     '"reads":[[8,200704,"sequential",4096]', "$.reads[0][3]",
     "expected run bytes on a gather only"),
    ("run bytes as text", '{"op":0,', '"reads":[[8,200704,"sequential"]',
     '"reads":[[8,200704,"gather","rows"]', "$.reads[0][3]", "expected integer"),
    ("passes without block threads", '{"op":0,', '"reads":[[8,200704,"sequential"]',
     '"reads":[[8,200704,"sequential",0,2]', "$.reads[0]",
     "expected a row kernel's passes and its block threads together"),
    ("passes over rows on a write", '{"op":0,', '"writes":[[',
     '"writes":[[9,1,"sequential",0,2,128],[', "$.writes[0][4]",
     "expected passes over rows on a read only"),
    ("no pass over rows", '{"op":0,', '"reads":[[8,200704,"sequential"]',
     '"reads":[[8,200704,"sequential",0,0,128]', "$.reads[0][4]", "expected a number >= 1"),
    ("unknown math type", '{"op":0,', '"math_dtype":"tf32"', '"math_dtype":"fp128"',
     "$.math_dtype", 'got "fp128"'),
    ("unknown key", '{"op":0,', '"phase":', '"stage":"x","phase":', "$",
     "unknown key(s) 'stage'"),
]


@pytest.mark.parametrize("what, record, old, new, where, words", BAD_RECORDS,
                         ids=[b[0] for b in BAD_RECORDS])
def test_bad_trace_records(tmp_path, cnn_trace_lines, what, record, old, new, where, words):
    lines = list(cnn_trace_lines)
    i = _first(lines, record)
    assert old in lines[i]
    lines[i] = lines[i].replace(old, new, 1)
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as err:
        tracefile.read(path)
    assert f"bad.jsonl:{i + 1}: at {where}: " in str(err.value) and words in str(err.value)


def test_a_trace_cut_short_is_an_error(tmp_path, cnn_trace_lines):
    path = tmp_path / "cut.jsonl"
    path.write_text("\n".join(cnn_trace_lines[:_first(cnn_trace_lines, '{"op":10,')]) + "\n")
    with pytest.raises(InputError, match=r"cut.jsonl:1: at \$\.ops: expected 37 ops as the "
                                         r"header says, got 10"):
        tracefile.read(path)


def test_trace_schema_enums_match_the_trace_model():
    from simulator.config.loader import schema
    from simulator.workload.trace import DTYPE_BYTES, Category, Pattern, Phase, Unit

    defs = schema("trace")["$defs"]
    assert defs["dtype"]["enum"] == list(DTYPE_BYTES)
    assert defs["op"]["properties"]["math_dtype"]["enum"] == ["", *DTYPE_BYTES]
    assert defs["op"]["properties"]["phase"]["enum"] == [p.value for p in Phase]
    assert defs["op"]["properties"]["unit"]["enum"] == [u.value for u in Unit]
    assert defs["tensor"]["properties"]["category"]["enum"] == [c.value for c in Category]
    assert defs["access"]["items"][2]["enum"] == [p.value for p in Pattern]


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


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_a_trace_to_a_device_or_fifo_is_written_through_not_replaced(tmp_path, capsys):
    """`trace -o /dev/null` as root once replaced the device with a regular file (the output
    was staged and renamed over it); a FIFO is written through too, a folder refused."""
    import stat
    import threading

    assert main(["trace", "cnn", "-o", os.devnull]) == 0
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    assert main(["trace", "cnn", "-o", str(fifo)]) == 0
    reader.join(30)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert got and got[0].count("\n") > 10
    capsys.readouterr()
    assert main(["trace", "cnn", "-o", str(tmp_path)]) == 2
    assert "expected a trace file to write, got a directory" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]  # nothing staged left


def test_kept_gradients_round_trip_and_are_checked(tmp_path):
    """A trace whose zero_grad keeps the gradients says which tensors they are; a reader
    rejects an id that names no gradient."""
    import dataclasses

    spec = load_workload("cnn")
    spec = dataclasses.replace(spec, execution=dataclasses.replace(spec.execution,
                                                                   zero_grad="zeros"))
    trace = build_trace(spec)
    assert trace.held_gradients
    path = tmp_path / "t.jsonl"
    tracefile.write(trace, path)
    back, _ = tracefile.read(path)
    assert back.held_gradients == trace.held_gradients
    assert profile(back).start_bytes == profile(trace).start_bytes
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    header["held_gradients"][0] = trace.parameters[0].id
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    with pytest.raises(InputError, match=r"t.jsonl:1: at \$\.held_gradients\[0\]: expected the "
                                         r"id of a gradients tensor"):
        tracefile.read(path)
