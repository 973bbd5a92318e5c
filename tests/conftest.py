import json
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
