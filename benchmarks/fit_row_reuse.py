"""Fit how often a row kernel's second pass over a row misses the L2 (simulator/gpu/l2.py,
ROW_REUSE_SPREAD), and check it on cards the fit does not see.

    python benchmarks/fit_row_reuse.py [--json]

Data: NeuSight's layer norm, softmax and ReLU on the same large tensors (25 MB to 34 GB), one
kernel each, on seven GPUs (benchmarks/measured/neusight_fp32_row_kernels.csv). ReLU reads
each element once and writes it once; PyTorch's vectorized layer norm reads each row twice
(moments, then normalize) and its block softmax (rows over 1024 elements) three times (max,
sum, write), each row by one block. Where a re-read finds the row in the L2 the kernel moves
what ReLU moves; where it misses, each missed pass adds a read of the tensor. So the time
against ReLU's is 1 + passes_missed x m / 2, with m the share of the re-reads that miss.

The model: the card holds R blocks at once (simulator/gpu/occupancy.py: SMs x what one SM
holds of the kernel's block), so R rows are in flight, W = R x row bytes; a re-read's reuse
distance is u x W with u spread evenly over [u0, u1], and it misses where that exceeds the L2
(C): m = clip((u1 - C / W) / (u1 - u0), 0, 1). u0 and u1 are fitted (least squares on the
relative time error) on the Tesla P4, P100 and V100 and the two A100s, whose small L2s against
their SM counts (or, on the A100s, large rows) span every share from all hits to all misses;
the T4 and the L4, the project's GDDR6 cards, are held out. Printed per card and kernel: the
median and p90 of the absolute error of the time against ReLU's, with the fit and with no
re-read missing (the model before it).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from measured_fidelity import ROW_KERNEL_CARDS  # noqa: E402

from simulator.config.hardware import load_hardware  # noqa: E402
from simulator.gpu.l2 import row_reread_miss  # noqa: E402
from simulator.gpu.occupancy import blocks_on_card  # noqa: E402
from simulator.units import MiB  # noqa: E402

DATA = Path(__file__).resolve().parent / "measured" / "neusight_fp32_row_kernels.csv"
# held out: the GDDR6 cards benchmarks/measured_fidelity.py --only row_kernels runs
HELD_OUT = tuple(ROW_KERNEL_CARDS)
# NeuSight's cards: the project's hardware file where it has one, else (chip, SMs, L2 bytes)
# from NVIDIA's Tesla P4 and P100 datasheets and the Ampere GA100 whitepaper (2020; the
# A100 80GB PCIe has the 40 GB part's 108 SMs and 40 MB L2)
HARDWARE_FILES = {"Tesla V100-PCIE-32GB": "v100-pcie-32gb", "NVIDIA A100-PCIE-40GB": "a100-40gb",
                  **ROW_KERNEL_CARDS}
OTHER_CARDS = {
    "Tesla P4": ("GP104", 20, 2 * MiB),
    "Tesla P100-PCIE-16GB": ("GP100", 56, 4 * MiB),
    "NVIDIA A100 80GB PCIe": ("GA100", 108, 40 * MiB),
}
EXTRA_PASSES = {"vectorized_layer_norm_kernel": 1, "cunn_SoftMaxForward": 2}
ELEM = 4  # fp32


def cards() -> dict[str, tuple[str, int, int]]:
    """(chip, SMs, L2 bytes) of each of NeuSight's cards."""
    out = dict(OTHER_CARDS)
    for device, name in HARDWARE_FILES.items():
        hw = load_hardware(name)
        out[device] = (hw.chip, hw.sm_count, hw.l2_bytes)
    return out


def cases(known: dict[str, tuple[str, int, int]]) -> list[dict]:
    """One case per layer norm or block softmax with a ReLU on the same tensor."""
    by_shape: dict[tuple, dict[str, dict]] = defaultdict(dict)
    with DATA.open(newline="") as f:
        for row in csv.DictReader(f):
            by_shape[(row["device"], int(row["rows"]), int(row["cols"]))][row["op"]] = row
    out = []
    for (device, rows, cols), ops in sorted(by_shape.items()):
        relu = ops.get("relu")
        for op in ("ln", "softmax"):
            row = ops.get(op)
            if relu is None or row is None or row["kernel"] not in EXTRA_PASSES:
                continue
            chip, sms, l2 = known[device]
            blocks = blocks_on_card(chip, sms, int(row["block_threads"]))
            out.append({"device": device, "op": op, "rows": rows, "cols": cols,
                        "inflight_bytes": min(rows, blocks) * cols * ELEM, "l2_bytes": l2,
                        "extra_passes": EXTRA_PASSES[row["kernel"]],
                        "ratio": float(row["latency_ms"]) / float(relu["latency_ms"])})
    return out


def predicted_ratio(spread, data: list[dict]) -> np.ndarray:
    """The time against ReLU's with the model's miss share (gpu/l2.py) at this spread."""
    return np.array([1.0 + c["extra_passes"] * row_reread_miss(
        c["inflight_bytes"], c["l2_bytes"], tuple(spread)) / 2.0 for c in data])


def fit(data: list[dict]) -> tuple[float, float]:
    measured = np.array([c["ratio"] for c in data])

    def residual(spread):
        return (predicted_ratio(spread, data) - measured) / measured

    result = least_squares(residual, [1.0, 3.0], bounds=([0.01, 0.02], [20.0, 50.0]))
    return tuple(float(v) for v in result.x)


def _errors(predicted, data: list[dict]) -> list[float]:
    return [abs(p - c["ratio"]) / c["ratio"] for p, c in zip(predicted, data, strict=True)]


def run() -> dict:
    known = cards()
    data = cases(known)
    train = [c for c in data if c["device"] not in HELD_OUT]
    spread = fit(train)
    rows = []
    for device in known:
        for op in ("ln", "softmax"):
            sel = [c for c in data if c["device"] == device and c["op"] == op]
            if not sel:
                continue
            err = _errors(predicted_ratio(spread, sel), sel)
            before = _errors([1.0] * len(sel), sel)
            rows.append({"device": device, "op": op, "cases": len(sel),
                         "held_out": device in HELD_OUT,
                         "median_abs_error": statistics.median(err),
                         "p90_abs_error": float(np.percentile(err, 90)),
                         "median_abs_error_no_misses": statistics.median(before)})
    held = [c for c in data if c["device"] in HELD_OUT]
    return {"spread": spread, "train_cases": len(train), "held_out_cases": len(held),
            "train_median_abs_error": statistics.median(
                _errors(predicted_ratio(spread, train), train)),
            "held_out_median_abs_error": statistics.median(
                _errors(predicted_ratio(spread, held), held)),
            "by_card": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the JSON document")
    args = parser.parse_args()
    doc = run()
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    u0, u1 = doc["spread"]
    print(f"Row re-read reuse distance: u x (bytes of the rows in flight), u spread over "
          f"[{u0:.3f}, {u1:.3f}]")
    print(f"fitted on {doc['train_cases']} cases (P4, P100, V100, A100s): median |error| of "
          f"the time against ReLU's {100 * doc['train_median_abs_error']:.1f} %; held out "
          f"(T4, L4), {doc['held_out_cases']} cases: "
          f"{100 * doc['held_out_median_abs_error']:.1f} %")
    print(f"{'card':24s} {'kernel':8s} {'cases':>5s} {'median':>7s} {'p90':>7s} "
          f"{'no misses':>10s}")
    for r in doc["by_card"]:
        tag = " (held out)" if r["held_out"] else ""
        print(f"{r['device']:24s} {r['op']:8s} {r['cases']:5d} "
              f"{100 * r['median_abs_error']:6.1f}% {100 * r['p90_abs_error']:6.1f}% "
              f"{100 * r['median_abs_error_no_misses']:9.1f}%{tag}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
