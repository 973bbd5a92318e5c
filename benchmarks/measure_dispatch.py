"""Measure eager PyTorch's per-op host cost on a CUDA machine: alone and in a stream of ops.

    python benchmarks/measure_dispatch.py --out DIR     (needs torch and a CUDA GPU)

For each op on a tensor small enough that its kernel takes a few microseconds: `lone_us`,
the op between two CUDA events after a synchronize (how NeuSight and benchmarks/measured time
a lone op), the median of 50; and `stream_us`, 1000 of the same op issued back to back
between one pair of events, per op: the host's issue rate when nothing waits for the GPU,
which is what decides a launch-bound training step (simulator/gpu/dispatch.py models both
with one figure per op kind). Writes `dispatch.csv` and `dispatch_env.json`.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import platform
import statistics
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

REPEATS = 50
STREAM = 1000


def lone_us(fn) -> float:
    times = []
    for _ in range(REPEATS):
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    return statistics.median(times)


def stream_us(fn) -> float:
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(STREAM):
        fn()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) * 1e3 / STREAM


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    out = Path(ap.parse_args().out)
    dev = torch.device("cuda")
    x = torch.randn(64, 256, device=dev)
    y = torch.randn(64, 256, device=dev)
    w = torch.randn(256, 256, device=dev)
    ln = nn.LayerNorm(256).to(dev)
    lin = nn.Linear(256, 256).to(dev)
    conv = nn.Conv2d(16, 16, 3, padding=1).to(dev)
    img = torch.randn(2, 16, 8, 8, device=dev)
    torch.backends.cudnn.benchmark = True
    ops = {  # op kind (simulator/gpu/dispatch.py) and the op
        "elementwise add": ("elementwise", lambda: x + y),
        "elementwise relu": ("elementwise", lambda: F.relu(x)),
        "copy clone": ("copy", lambda: x.clone()),
        "reduction softmax": ("reduction", lambda: torch.softmax(x, -1)),
        "reduction sum": ("reduction", lambda: x.sum(-1)),
        "norm layer_norm": ("norm", lambda: ln(x)),
        "matmul mm": ("matmul", lambda: x @ w),
        "matmul linear": ("matmul", lambda: lin(x)),
        "conv conv2d": ("conv", lambda: conv(img)),
    }
    rows = []
    for name, (kind, fn) in ops.items():
        for _ in range(20):  # warm-up: cuBLAS/cuDNN handles, autotuning
            fn()
        rows.append({"op": name, "kind": kind, "lone_us": round(lone_us(fn), 2),
                     "stream_us": round(stream_us(fn), 2)})
        print(rows[-1], flush=True)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "dispatch.csv").open("w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=list(rows[0]))
        wr.writeheader()
        wr.writerows(rows)
    env = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "cuda": torch.version.cuda, "python": platform.python_version(),
           "cpu": platform.processor() or platform.machine()}
    with contextlib.suppress(OSError, StopIteration):
        env["cpu_model"] = next(line.split(":", 1)[1].strip() for line in
                                Path("/proc/cpuinfo").read_text().splitlines()
                                if line.startswith("model name"))
    (out / "dispatch_env.json").write_text(json.dumps(env, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
