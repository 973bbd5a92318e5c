"""The operator-trace file: versioned JSON Lines, written and read one record at a time.

Line 1 is a header: {"format": "gddr6-roofline-sim/trace", "format_version": 1, "workload":
name, "source": {the workload file's content, when generated from one}, "tensors": N, "ops": M,
"causal_attention_flops": F, "eager": true, "operand_values": "random", "held_gradients":
[tensor ids of the .grad tensors zero_grad keeps between steps]}. Then one line per
tensor, {"tensor": id, "name", "shape", "dtype", "category", "requires_grad", "retained",
"alias_of"}, then one per op, {"op": index, "name", "kind", "phase", "flops", "dtype", "unit",
"math_dtype", "layout", "list_length", "host_waits", "reads": [[tensor id, bytes, pattern]
or, for a gather, [tensor id, bytes, "gather", run bytes], or, for a row kernel's read of each
row more than once, [tensor id, bytes, pattern, 0, passes, block threads], ...], "writes":
[...]}, then the
held-tensor releases, {"release": tensor id, "at": op index}. Tensor ids are dense from 0 and
precede their use, so a reader needs one pass and no look-ahead. The format is described in
docs/formats.md ("Trace").
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from simulator.config.loader import record_check
from simulator.errors import InputError, open_input, staged_beside
from simulator.workload.trace import (
    Access,
    Category,
    Op,
    Pattern,
    Phase,
    Tensor,
    Trace,
    Unit,
)

FORMAT = "gddr6-roofline-sim/trace"
FORMAT_VERSION = 1


def records(trace: Trace, source: dict | None = None,
            captured: dict | None = None) -> Iterator[dict[str, Any]]:
    yield {"format": FORMAT, "format_version": FORMAT_VERSION, "workload": trace.workload,
           "source": source, "captured": captured, "tensors": len(trace.tensors),
           "ops": len(trace.ops),
           "causal_attention_flops": trace.causal_attention_flops, "eager": trace.eager,
           "operand_values": trace.operand_values,
           "held_gradients": list(trace.held_gradients)}
    for t in trace.tensors:
        yield {"tensor": t.id, "name": t.name, "shape": list(t.shape), "dtype": t.dtype,
               "category": t.category.value, "requires_grad": t.requires_grad,
               "retained": t.retained,
               "alias_of": t.alias_of.id if t.alias_of is not None else None}
    for op in trace.ops:
        yield {"op": op.index, "name": op.name, "kind": op.kind, "phase": op.phase.value,
               "flops": op.flops, "dtype": op.dtype, "unit": op.unit.value,
               "math_dtype": op.math_dtype, "layout": op.layout, "list_length": op.list_length,
               "host_waits": op.host_waits,
               "reads": [_access_record(a) for a in op.reads],
               "writes": [_access_record(a) for a in op.writes]}
    for tid, at in trace.releases.items():
        yield {"release": tid, "at": at}


def _access_record(a: Access) -> list:
    """[tensor id, bytes, pattern], a gather's run bytes where it states them, and a row
    kernel's passes over each row with its block's threads where it reads a row more than
    once."""
    rec = [a.tensor.id, a.nbytes, a.pattern.value]
    if a.passes > 1:
        return rec + [a.run_bytes, a.passes, a.block_threads]
    return rec + [a.run_bytes] if a.run_bytes else rec


def _access(rec: list, tensors: list[Tensor]) -> Access:
    passes, threads = (rec[4], rec[5]) if len(rec) > 5 else (1, 0)
    return Access(tensors[rec[0]], rec[1], Pattern(rec[2]), rec[3] if len(rec) > 3 else 0,
                  passes, threads)


def write(trace: Trace, path: Path, source: dict | None = None,
          captured: dict | None = None) -> None:
    """Write atomically: a temporary file beside the target, renamed when complete. A target
    that exists and is not a regular file (a device such as /dev/null, a FIFO, a terminal) is
    written through, never replaced."""
    if path.is_dir():
        raise InputError("expected a trace file to write, got a directory", file=str(path))
    if path.exists() and not path.is_file():
        with path.open("w", encoding="utf-8") as f:
            _write_records(f, trace, source, captured)
        return
    with staged_beside(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            _write_records(f, trace, source, captured)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it private; a trace file is not
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_records(f, trace: Trace, source: dict | None, captured: dict | None) -> None:
    for rec in records(trace, source, captured):
        f.write(json.dumps(rec, separators=(",", ":")))
        f.write("\n")


def _need(ok: bool, path: Path, line: int, where: str, expected: str) -> None:
    if not ok:
        raise InputError(expected, file=f"{path}:{line}", path=where)


def read(path: Path) -> tuple[Trace, dict]:
    """Stream a trace file back into a Trace; returns (trace, header)."""
    def bad(line: int, what: str) -> InputError:
        return InputError(what, file=f"{path}:{line}")

    tensors: list[Tensor] = []
    ops: list[Op] = []
    releases: dict[int, int] = {}
    header: dict = {}
    with open_input(path, "a trace file (.jsonl)", binary=True) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line.decode("utf-8"))
            except UnicodeDecodeError:
                raise bad(n, "expected UTF-8 text") from None
            except json.JSONDecodeError as exc:
                raise bad(n, f"invalid JSON: {exc.msg}") from None
            if not isinstance(rec, dict):
                raise bad(n, "expected a JSON object (a header, tensor, op or release record)")
            kind = "header" if n == 1 else next(
                (k for k in ("tensor", "op", "release") if k in rec), None)
            if kind is None:
                raise bad(n, "expected a tensor, op or release record")
            if n == 1 and (rec.get("format") != FORMAT
                           or rec.get("format_version") != FORMAT_VERSION):
                raise bad(1, f"expected a header with format '{FORMAT}' and "
                             f"format_version {FORMAT_VERSION}")
            record_check("trace", kind)(rec, f"{path}:{n}")
            if kind == "header":
                header = rec
            elif kind == "tensor":
                _need(rec["tensor"] == len(tensors), path, n, "$.tensor",
                      f"expected tensor ids in order from 0: {len(tensors)}")
                _need(rec["alias_of"] is None or rec["alias_of"] < len(tensors), path, n,
                      "$.alias_of", "expected the id of a tensor listed above")
                t = Tensor(rec["tensor"], rec["name"], tuple(rec["shape"]), rec["dtype"],
                           Category(rec["category"]), rec["requires_grad"], rec["retained"])
                if rec["alias_of"] is not None:
                    t.alias_of = tensors[rec["alias_of"]]
                tensors.append(t)
            elif kind == "op":
                _need(rec["op"] == len(ops), path, n, "$.op",
                      f"expected op indices in order from 0: {len(ops)}")
                for side in ("reads", "writes"):
                    for i, a in enumerate(rec[side]):
                        _need(a[0] < len(tensors), path, n, f"$.{side}[{i}][0]",
                              f"expected the id of a tensor listed above (0-{len(tensors) - 1})")
                        _need(len(a) < 4 or a[2] == Pattern.GATHER.value or not a[3], path, n,
                              f"$.{side}[{i}][3]", "expected run bytes on a gather only")
                        _need(len(a) != 5, path, n, f"$.{side}[{i}]",
                              "expected a row kernel's passes and its block threads together")
                        _need(len(a) < 5 or side == "reads", path, n, f"$.{side}[{i}][4]",
                              "expected passes over rows on a read only")
                ops.append(Op(
                    rec["op"], rec["name"], rec["kind"], Phase(rec["phase"]), rec["flops"],
                    tuple(_access(a, tensors) for a in rec["reads"]),
                    tuple(_access(a, tensors) for a in rec["writes"]),
                    rec["dtype"], Unit(rec["unit"]), rec["math_dtype"], rec.get("layout", ""),
                    rec.get("list_length", 0), rec.get("host_waits", False)))
            else:
                _need(rec["release"] < len(tensors), path, n, "$.release",
                      "expected the id of a tensor listed above")
                _need(rec["at"] < len(ops), path, n, "$.at", "expected the index of an op above")
                releases[rec["release"]] = rec["at"]
    if not header:
        raise InputError("empty trace file", file=str(path))
    for key, got in (("tensors", len(tensors)), ("ops", len(ops))):
        _need(header.get(key, got) == got, path, 1, f"$.{key}",
              f"expected {header.get(key)} {key} as the header says, got {got}: "
              "is the file cut short?")
    held = tuple(header.get("held_gradients", ()))
    for i, tid in enumerate(held):
        _need(tid < len(tensors) and tensors[tid].category is Category.GRADIENT, path, 1,
              f"$.held_gradients[{i}]", "expected the id of a gradients tensor listed below")
    params = [t for t in tensors if t.category is Category.PARAMETER]
    state = [t for t in tensors if t.category is Category.OPTIMIZER_STATE]
    trace = Trace(header["workload"], ops, tensors, params, state, releases,
                  header.get("causal_attention_flops", 0), header.get("eager", True),
                  header.get("operand_values", "random"), held)
    return trace, header
