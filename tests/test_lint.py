"""The code is ruff-clean (ruff is a test dependency)."""

import shutil
import subprocess
import sys

from conftest import REPO


def test_ruff_clean():
    ruff = shutil.which("ruff")
    cmd = [ruff] if ruff else [sys.executable, "-m", "ruff"]
    proc = subprocess.run([*cmd, "check", "simulator", "tests", "benchmarks"], cwd=REPO,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
