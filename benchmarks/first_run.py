"""Wall time of the main command right after a fresh install, as a new user meets it.

    python benchmarks/first_run.py [--runs 2] [--keep DIR]

Makes a new virtual environment, installs this checkout into it (`pip install .`, not
editable), and runs `python -m simulator run workloads/transformer.json` from an empty
temporary folder: the first run compiles the GDDR6 engine (numba) into the installed package's
cache, the later ones load it. Prints the install time, then each run's wall time, whether it
printed the compiling notice (any wait over 2 s must say what it is doing), and its step time
(the same in every run). Needs the package index, or a pip cache that holds the dependencies.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COMMAND = ["-m", "simulator", "run", "workloads/transformer.json"]
TARGET_S = 15.0  # the first run's budget on the project's 2-core machine


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2, help="runs after the install (default 2)")
    ap.add_argument("--keep", type=Path, help="build the environment here and keep it")
    args = ap.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="first-run-"))
    env_dir, cwd = root / "venv", root / "cwd"
    cwd.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.perf_counter()
        venv.create(env_dir, with_pip=True, clear=True)
        python = str(env_dir / "bin" / "python")
        subprocess.run([python, "-m", "pip", "install", "-q", str(REPO)], check=True)
        print(f"fresh venv + pip install .: {time.perf_counter() - t0:.1f} s "
              f"(Python {sys.version.split()[0]})")
        for i in range(1, args.runs + 1):
            t = time.perf_counter()
            proc = subprocess.run([python, *COMMAND], cwd=cwd, capture_output=True, text=True)
            wall = time.perf_counter() - t
            if proc.returncode:
                print(proc.stderr, file=sys.stderr)
                return 1
            step = re.search(r"^Step time\s+(\S+ \S+)", proc.stdout, re.M)
            said = "compiling" in proc.stderr
            verdict = f" (budget {TARGET_S:g} s: {'met' if wall <= TARGET_S else 'MISSED'})" \
                if i == 1 else ""
            print(f"run {i}: {wall:.1f} s wall{verdict}; compiling notice "
                  f"{'shown' if said else 'not shown'}; step time "
                  f"{step.group(1) if step else '?'}")
        return 0
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
