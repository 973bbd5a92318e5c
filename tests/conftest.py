import importlib.util
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def write_json(tmp_path):
    """Write a (possibly broken) JSON document to a temp file and return its path."""
    def _write(doc, name="input.json") -> Path:
        path = tmp_path / name
        path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
        return path
    return _write


def load_doc(path: Path) -> dict:
    return json.loads(path.read_text())


def load_benchmark(name: str):
    """A script of benchmarks/ as a module (registered, so its sibling imports find it)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
