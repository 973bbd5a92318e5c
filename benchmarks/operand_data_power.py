"""How fast long FP32 GEMMs run on random inputs against implicit-GEMM convolutions on zeros.

NeuSight timed its GEMMs on `torch.randn` inputs and its convolutions on a `torch.zeros` input
(random weights: `neusight/Dataset/collect.py` at sitar-lab/NeuSight@6945927). A card held by
its power limit runs faster on data that flips fewer bits (Gregersen, Patel and Choukse,
"Input-Dependent Power Usage in GPUs", SC24 workshops, arXiv:2409.18324: up to 40 % less GEMM
power with other inputs; H. He, thonking.ai 2024: an A100 at 295 TFLOP/s on zeros, 257 on
normal data). An implicit-GEMM convolution is a GEMM whose operands are gathered on the fly: on
a card the power limit does not hold it runs no faster than the library's SGEMM. So where its
zero-input kernels outrun the random-input GEMMs of like length, the data set the clock.

Kernels of 2 ms or more (long enough for GPU Boost to settle: gpu/clocks.py), direct FLOPs
(2 x batch x output pixels x C_out x C_in x kernel area for a convolution). Prints, per card,
the TFLOP/s percentiles of each kind and the ratio of the convolutions' to the GEMMs'; `--json`
prints them as a document.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parent / "measured"
MIN_MS = 2.0
PERCENTILES = (50, 90, 99)
# card: (power limit W, where its rows are)
CARDS = {
    "p4": (75, "neusight_p4_v100_long_kernels.csv"),
    "t4": (70, None),
    "v100-pcie-32gb": (250, "neusight_p4_v100_long_kernels.csv"),
}


def _gemm_flops(r: dict) -> int:
    return 2 * int(r["batch"]) * int(r["m"]) * int(r["n"]) * int(r["k"])


def _conv_flops(r: dict) -> int:
    n, ci, co, k, size, stride, pad = (int(r[c]) for c in (
        "batch", "in_channels", "out_channels", "kernel_size", "input_size", "stride",
        "padding"))
    p = (size + 2 * pad - k) // stride + 1
    return 2 * n * p * p * co * ci * k * k


def _read(name: str) -> list[dict]:
    with (DATA / name).open(newline="") as f:
        return list(csv.DictReader(f))


def kernel_rates(card: str) -> tuple[list[float], list[float]]:
    """TFLOP/s of the card's long random-input GEMMs (nn.Linear) and zero-input
    implicit-GEMM convolutions."""
    _, file = CARDS[card]
    if file is None:  # the T4's rows are the harness's own files
        gemms = [r for r in _read("t4_fp32_gemm.csv") if r["op"] == "linear"]
        convs = _read("t4_fp32_conv2d.csv")
    else:
        rows = [r for r in _read(file) if r["card"] == card]
        gemms = [r for r in rows if r["op"] == "linear"]
        convs = [r for r in rows if r["op"] == "conv2d"]
    if card == "v100-pcie-32gb":
        convs = _read("v100_fp32_conv2d.csv")

    def rate(flops: int, ms: float) -> float:
        return flops / (ms * 1e-3) / 1e12

    g = [rate(_gemm_flops(r), float(r["latency_ms"])) for r in gemms
         if float(r["latency_ms"]) >= MIN_MS]
    c = [rate(_conv_flops(r), float(r["latency_ms"])) for r in convs
         if float(r["latency_ms"]) >= MIN_MS and r["algorithm"].startswith("implicit_gemm")]
    return g, c


def run() -> dict:
    doc = {}
    for card, (watts, _) in CARDS.items():
        g, c = kernel_rates(card)
        gp, cp = (np.percentile(x, PERCENTILES) for x in (g, c))

        def by_percentile(values: np.ndarray) -> dict[str, float]:
            return {str(p): round(float(v), 3) for p, v in zip(PERCENTILES, values, strict=True)}

        doc[card] = {"power_limit_w": watts, "gemm_cases": len(g), "conv_cases": len(c),
                     "gemm_tflops": by_percentile(gp), "conv_tflops": by_percentile(cp),
                     "conv_over_gemm": by_percentile(cp / gp)}
    return doc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print the JSON document")
    doc = run()
    if ap.parse_args().json:
        print(json.dumps(doc, indent=2))
        return
    print(f"kernels of {MIN_MS:g} ms or more; TFLOP/s at the 50th / 90th / 99th percentile")
    print(f"{'card':<16} {'limit W':>7} {'GEMMs (randn)':>22} {'convolutions (zeros)':>22}   "
          f"{'conv / GEMM':>18}")
    for card, d in doc.items():
        cells = [" / ".join(f"{v:.2f}" for v in d[k].values())
                 for k in ("gemm_tflops", "conv_tflops", "conv_over_gemm")]
        print(f"{card:<16} {d['power_limit_w']:>7} {cells[0]:>22} {cells[1]:>22}   {cells[2]:>18}"
              f"   ({d['gemm_cases']} GEMMs, {d['conv_cases']} convolutions)")


if __name__ == "__main__":
    main()
