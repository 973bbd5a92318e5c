"""Write the reference traces the engine is checked on against Ramulator 2.1 (DRAMsim3 format).

    python benchmarks/reference_traces.py [DIR]     (default benchmarks/.traces)
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np

G = 32
MiB = 2**20
DEFAULT_DIR = Path(__file__).resolve().parent / ".traces"


def _write(path: Path, addr: np.ndarray, write: np.ndarray) -> None:
    ops = np.where(write == 1, " WRITE 0\n", " READ 0\n")
    tmp = path.with_suffix(".tmp")
    with tmp.open("w") as f:
        for start in range(0, len(addr), 200_000):
            sl = slice(start, start + 200_000)
            f.write("".join(hex(int(a)) + o for a, o in zip(addr[sl], ops[sl], strict=True)))
    tmp.replace(path)  # never a half-written trace


def ensure(directory: Path = DEFAULT_DIR) -> dict[str, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = {name: directory / f"{name}.trace" for name in ("seq_read", "rand_read", "triad")}
    if not paths["seq_read"].exists():
        n = 1_000_000
        _write(paths["seq_read"], np.arange(n, dtype=np.uint64) * G, np.zeros(n, np.int64))
    if not paths["rand_read"].exists():
        rng = random.Random(1)
        addr = np.array([G * rng.randrange(2**30 // G) for _ in range(1_000_000)], np.uint64)
        _write(paths["rand_read"], addr, np.zeros(len(addr), np.int64))
    if not paths["triad"].exists():
        i = np.arange(333_334, dtype=np.uint64) * G
        addr = np.stack([i, 64 * MiB + i, 128 * MiB + i], axis=1).ravel()
        _write(paths["triad"], addr, np.tile(np.array([0, 0, 1], np.int64), len(i)))
    return paths


if __name__ == "__main__":
    for name, path in ensure(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_DIR).items():
        print(name, path)
