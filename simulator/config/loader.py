"""Read a JSON file and check it against its shipped JSON Schema.

Every failure becomes an InputError naming the file, the JSON path and what was expected.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import fastjsonschema
import jsonschema
from jsonschema.exceptions import ValidationError, best_match

from simulator.errors import InputError, json_path, open_input

SCHEMAS = Path(__file__).resolve().parent / "schemas"  # package data, beside this module


@cache
def schema(name: str) -> dict[str, Any]:
    """A shipped schema by name: 'hardware', 'workload' or 'sweep'."""
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8"))


def read_json(path: Path) -> Any:
    with open_input(path, "a JSON file") as f:
        try:
            text = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read: {exc}", file=str(path)) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
                         file=str(path)) from None


def _expected(err: ValidationError) -> str:
    """Say what the schema wanted, in words, and what was found."""
    v, got = err.validator, err.instance
    shown = json.dumps(got) if not isinstance(got, dict | list) else type(got).__name__
    if len(shown) > 60:
        shown = shown[:57] + "..."
    if v == "required":
        return err.message.replace("is a required property", "is required but missing")
    if v == "additionalProperties":
        allowed = sorted(err.schema.get("properties", {}))
        extra = sorted(set(got) - set(allowed)) if isinstance(got, dict) else []
        return (f"unknown key(s) {', '.join(map(repr, extra))}; "
                f"expected one of: {', '.join(allowed)}")
    if v == "type":
        want = err.validator_value
        want = " or ".join(want) if isinstance(want, list) else want
        return f"expected {want}, got {shown}"
    if v == "enum":
        return f"expected one of {', '.join(map(json.dumps, err.validator_value))}, got {shown}"
    if v == "const":
        return f"expected {json.dumps(err.validator_value)}, got {shown}"
    if v == "exclusiveMinimum":
        return f"expected a number > {err.validator_value}, got {shown}"
    if v == "minimum":
        return f"expected a number >= {err.validator_value}, got {shown}"
    if v == "exclusiveMaximum":
        return f"expected a number < {err.validator_value}, got {shown}"
    if v == "maximum":
        return f"expected a number <= {err.validator_value}, got {shown}"
    if v in ("minItems", "maxItems"):
        return f"expected {v.replace('Items', '')} {err.validator_value} items, got {len(got)}"
    if v == "pattern":
        return f"expected a string matching {err.validator_value}, got {shown}"
    if v == "minLength":
        return f"expected a non-empty string, got {shown}"
    return err.message


# The largest magnitude a file may give a number: 2**53, the last integer a float holds
# exactly. Beyond it sizes and counts lose units, and products of them overflow.
LARGEST = 2 ** 53


def non_finite(data: Any, path: tuple = ()) -> tuple | None:
    """Where `data` holds NaN, an infinity or a number beyond LARGEST: Python's json reads
    NaN, Infinity and 1e999, JSON has no such number, and every schema bound lets NaN through
    (NaN > 0 is false, so is NaN <= 0); 1e308 passes as an 'integer' and overflows later."""
    if isinstance(data, bool):
        return None
    if isinstance(data, int | float):
        return None if math.isfinite(data) and abs(data) <= LARGEST else path
    items = data.items() if isinstance(data, dict) else enumerate(data) \
        if isinstance(data, list) else ()
    for key, value in items:
        found = non_finite(value, (*path, key))
        if found is not None:
            return found
    return None


def _shown(data: Any, path: tuple) -> str:
    for key in path:
        data = data[key]
    return repr(data) if isinstance(data, int) else f"{data:g}"


def _part(schema_name: str, part: str | None) -> dict[str, Any]:
    whole = schema(schema_name)
    if part is None:
        return whole
    # the part alone: the whole file's own keywords (properties, required) stay out of it
    keep = {k: v for k, v in whole.items() if k in ("$schema", "$id", "$defs")}
    return {**keep, "$ref": f"#/$defs/{part}"}


@cache
def _validator(schema_name: str, part: str | None) -> jsonschema.protocols.Validator:
    s = _part(schema_name, part)
    return jsonschema.validators.validator_for(s)(s)


@cache
def record_check(schema_name: str, part: str) -> Callable[[Any, str], None]:
    """A check for one kind of record of a many-record file (a trace's ops): compiled by
    fastjsonschema, some 20 times faster than jsonschema's, which then says what was wrong
    when a record fails. The schema must be one fastjsonschema compiles (draft-07)."""
    # (without its relative $id, which fastjsonschema would fetch each $ref against)
    fast = fastjsonschema.compile(
        {k: v for k, v in _part(schema_name, part).items() if k != "$id"})

    def check(data: Any, file: str) -> None:
        try:
            fast(data)
        except fastjsonschema.JsonSchemaException:
            validate(data, schema_name, file, part)
            raise InputError("does not match its schema", file=file) from None
        if non_finite(data) is not None:
            validate(data, schema_name, file, part)
    return check


def validate(data: Any, schema_name: str, file: str, part: str | None = None) -> None:
    """`part`: check against that entry of the schema's $defs (one record kind of a trace)."""
    where = non_finite(data)
    if where is not None:
        raise InputError(f"expected a finite number of magnitude at most 2**53 "
                         f"({LARGEST:.3g}), got {_shown(data, where)}", file=file,
                         path=json_path(where))
    err = best_match(_validator(schema_name, part).iter_errors(data))
    if err is not None:
        raise InputError(_expected(err), file=file, path=json_path(err.absolute_path))


def content_digest(raw: Any) -> str:
    """SHA-256 of a loaded document (keys sorted): what a sweep point's key holds of a file."""
    return hashlib.sha256(json.dumps(raw, sort_keys=True).encode()).hexdigest()


def load(path: Path, schema_name: str, part: str | None = None) -> Any:
    """A file checked against its schema (`part`: one of the schema's $defs)."""
    data = read_json(path)
    validate(data, schema_name, str(path), part)
    return data
