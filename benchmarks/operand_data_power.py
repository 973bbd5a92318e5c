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
import json
import sys
from functools import cache
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # its sibling, the fidelity harness

from measured_fidelity import MS, conv_trace, read_rows  # noqa: E402

from simulator.gpu.library import GemmShape  # noqa: E402
from simulator.units import TERA  # noqa: E402

MIN_MS = 2.0
PERCENTILES = (50, 90, 99)
# card: (power limit W, file of its GEMMs, file of its convolutions); a file with a `card`
# column holds several cards' rows
CARDS = {
    "p4": (75, "neusight_p4_v100_long_kernels.csv", "neusight_p4_v100_long_kernels.csv"),
    "t4": (70, "t4_fp32_gemm.csv", "t4_fp32_conv2d.csv"),
    "v100-pcie-32gb": (250, "neusight_p4_v100_long_kernels.csv", "v100_fp32_conv2d.csv"),
}


@cache
def _rows(file: str) -> tuple[dict, ...]:
    return tuple(read_rows(file))


def _long(card: str, file: str, op: str) -> list[dict]:
    """The card's rows of one op, 2 ms or more."""
    return [r for r in _rows(file) if r.get("card", card) == card and r.get("op", op) == op
            and float(r["latency_ms"]) >= MIN_MS]


def _tflops(flops: int, row: dict) -> float:
    return flops / (float(row["latency_ms"]) * MS) / TERA


def kernel_rates(card: str) -> tuple[list[float], list[float]]:
    """TFLOP/s of the card's long random-input GEMMs (nn.Linear) and zero-input
    implicit-GEMM convolutions (direct FLOPs, as the harness's convolution op counts them)."""
    _, gemm_file, conv_file = CARDS[card]
    gemms = [_tflops(GemmShape(*(int(r[c]) for c in ("batch", "m", "n", "k"))).flops, r)
             for r in _long(card, gemm_file, "linear")]
    convs = [_tflops(next(o.flops for o in conv_trace(r).ops if o.kind == "conv"), r)
             for r in _long(card, conv_file, "conv2d")
             if r["algorithm"].startswith("implicit_gemm")]
    return gemms, convs


def _by_percentile(values: np.ndarray) -> dict[str, float]:
    return {str(p): round(float(v), 3) for p, v in zip(PERCENTILES, values, strict=True)}


def run() -> dict:
    doc = {}
    for card, (watts, _, _) in CARDS.items():
        g, c = kernel_rates(card)
        gp, cp = (np.percentile(x, PERCENTILES) for x in (g, c))
        doc[card] = {"power_limit_w": watts, "gemm_cases": len(g), "conv_cases": len(c),
                     "gemm_tflops": _by_percentile(gp), "conv_tflops": _by_percentile(cp),
                     "conv_over_gemm": _by_percentile(cp / gp)}
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
