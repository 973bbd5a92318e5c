"""The README's Python API example runs as written (on the CNN, to keep it quick)."""

import os
import re

from conftest import REPO


def test_readme_python_api_block_runs(capsys):
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    block = next(b for b in blocks if "from simulator.pipeline import analyze" in b)
    code = block.replace("transformer", "cnn")
    here = os.getcwd()
    os.chdir(REPO)  # (its paths are the repository's, as a notebook beside it has them)
    try:
        scope: dict = {}
        exec(compile(code, "README.md", "exec"), scope)
    finally:
        os.chdir(here)
    r = scope["r"]
    assert r.estimate.step_time_s > 0 and r.estimate.replay is not None
    assert "Step time" in capsys.readouterr().out
