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
the TFLOP/s percentiles of each kind and the ratio of the convolutions' to the GEMMs'.

Then the same convolutions on the T4 and the V100, where cuDNN ran the same algorithm on both:
the T4 runs cuDNN's Volta kernels (`volta_scudnn_*`, `volta_sgemm_*` in NeuSight's profiles)
on SMs of the same 64 FP32 lanes, so at equal work per peak FLOP the time ratio gives the clock
the T4 held, T4 boost x (V100 peak x V100 time) / (T4 peak x T4 time), the V100 at its boost
clock (its zero-input kernels trail its GEMMs: nothing holds it back). The non-fused Winograd
cases also stream transforms through a DRAM 2.8x slower on the T4, so theirs is a lower bound.
`--json` prints both as a document.
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

from measured_fidelity import CONV_COLUMNS, MS, conv_trace, read_rows  # noqa: E402

from simulator.config.hardware import Hardware, load_hardware  # noqa: E402
from simulator.gpu.clocks import clocks  # noqa: E402
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


# the algorithm families of the `algorithm` column (implicit_gemm_128x64 and its kin as one)
FAMILIES = ("implicit_gemm", "winograd_fused", "winograd_nonfused")


CLOCK_PERCENTILES = (10, 50, 90)


def same_shape_clocks(t4: Hardware) -> dict[str, dict]:
    """Per algorithm family, the T4 clock (MHz) its zero-input convolutions imply against the
    same shapes on the V100 (module docstring): cases and the 10th, 50th and 90th percentile."""
    v100 = load_hardware("v100-pcie-32gb")
    scale = t4.boost_clock_mhz * v100.peak_tflops["fp32"] / t4.peak_tflops["fp32"]
    v100_rows = {tuple(r[c] for c in CONV_COLUMNS): r for r in _rows(CARDS["v100-pcie-32gb"][2])}
    implied: dict[str, list[float]] = {f: [] for f in FAMILIES}
    for row in _long("t4", CARDS["t4"][2], "conv2d"):
        other = v100_rows.get(tuple(row[c] for c in CONV_COLUMNS))
        family = next((f for f in FAMILIES if row["algorithm"].startswith(f)), None)
        if other is None or family is None or other["algorithm"] != row["algorithm"]:
            continue
        implied[family].append(scale * float(other["latency_ms"]) / float(row["latency_ms"]))
    return {f: {"cases": len(v), "implied_mhz": _by_percentile(
                np.percentile(v, CLOCK_PERCENTILES), CLOCK_PERCENTILES, digits=None)}
            for f, v in implied.items() if v}


def _by_percentile(values: np.ndarray, percentiles: tuple[int, ...] = PERCENTILES,
                   digits: int | None = 3) -> dict[str, float]:
    return {str(p): round(float(v), digits) for p, v in zip(percentiles, values, strict=True)}


def run() -> dict:
    cards = {}
    for card, (watts, _, _) in CARDS.items():
        g, c = kernel_rates(card)
        gp, cp = (np.percentile(x, PERCENTILES) for x in (g, c))
        cards[card] = {"power_limit_w": watts, "gemm_cases": len(g), "conv_cases": len(c),
                       "gemm_tflops": _by_percentile(gp), "conv_tflops": _by_percentile(cp),
                       "conv_over_gemm": _by_percentile(cp / gp)}
    t4 = load_hardware("t4")
    return {"cards": cards,
            "t4_against_v100": {"sustained_mhz_random_data": t4.sustained_clock_mhz,
                                "model_mhz_zeros": round(clocks(t4).held_mhz("zeros"), 1),
                                "families": same_shape_clocks(t4)}}


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
    for card, d in doc["cards"].items():
        cells = [" / ".join(f"{v:.2f}" for v in d[k].values())
                 for k in ("gemm_tflops", "conv_tflops", "conv_over_gemm")]
        print(f"{card:<16} {d['power_limit_w']:>7} {cells[0]:>22} {cells[1]:>22}   {cells[2]:>18}"
              f"   ({d['gemm_cases']} GEMMs, {d['conv_cases']} convolutions)")
    same = doc["t4_against_v100"]
    print(f"\nT4 clock implied by the same convolutions on the V100 (MHz, 10th / 50th / 90th "
          f"percentile; on random data it holds {same['sustained_mhz_random_data']:g}, the "
          f"model on zeros {same['model_mhz_zeros']:g}: gpu/clocks.py)")
    for family, d in same["families"].items():
        cells = " / ".join(str(v) for v in d["implied_mhz"].values())
        print(f"{family:<18} {cells:>16}   ({d['cases']} shapes)")


if __name__ == "__main__":
    main()
