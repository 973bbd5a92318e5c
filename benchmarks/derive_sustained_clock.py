"""The SM clock a card holds under a long GEMM, read off published torch.mm throughput.

    python benchmarks/derive_sustained_clock.py

A power-limited card's clock under load is rarely published. What is published, for many
cards, is the throughput of square `torch.mm` products (benchmarks/measured/torch_mm_square.csv:
each row's `calls` the calls its size ran: 10 warm-up and 30 timed in one set of sweeps, 10
timed one by one in the other). The largest products of a sweep run at the clock the card
holds under load; the GEMM library's kernel model (simulator/gpu/library.py, fitted on another
card at a known clock) says what share of the peak such a GEMM reaches, so the measured FLOP/s
over that give the clock, as a share of the boost clock's peak. Per card, the mean over the
FP32 (CUDA-core) runs of its sweep's two largest sizes is the sustained clock its hardware file
states. In the 40-call sweeps those runs each keep the card busy for one to eight seconds; in
the 10-call ones for a fifth of a second, after a few tenths of a second of smaller products,
long enough for a card whose power limit binds at once (the RTX 6000 Ada's runs fall from 50
to 35 TFLOP/s by 4096 and stay there) but a clock a slower one might sink below.

Short runs (the card still cool) and the tensor-core rows are printed for comparison: a
tensor-core GEMM draws less power per FLOP, and a card may hold a higher clock under it.
Last, per card, each tensor-core family's share over the FP32 one on the largest products:
0.9-1.1 for FP16 on every card here (the 16-bit family, fitted on the H200, holds at the FP32
runs' clock), and 0.98-1.13 for TF32, which these Ampere and Ada cards run with the same family
(simulator/gpu/library.py family_of; the TF32 family fitted on the H200 gives 1.36-1.51).
The same ratio tells a card's tensor-core rate where its datasheet leaves it open: the Titan
RTX's 130 TFLOPS count FP16 accumulation; at that rate its FP16 runs give 0.53, at the half
rate GeForce Turing runs FP32 accumulation at (what PyTorch's FP16 GEMMs use) 1.05, and its
short, still-cool runs reach the share of that half rate the RTX 2080 Ti's reach of theirs.

Where a card has no runs of its own published, its file takes the median share of the measured
cards of its product line (`SIBLINGS`): NVIDIA's RTX A-series workstation boards (GA10x,
blower-cooled, clocks rated the same way) hold 0.83-0.90 of boost at 70-300 W and 26-84 SMs,
and each of the three lies within 9 % of the other two's median (printed as a check). The RTX A4500,
A5000 and A5500, 200-230 W on 56-80 SMs (1.73-2.16 W per SM-GHz of boost, the siblings'
1.87-2.24), state that median. GeForce boards are not given one: they boost above
their rated clock (the RTX 2080 Ti's runs need 1.24 of it), and neither are data-centre boards
of another cooling and power class (the A10: 150 W on 72 SMs, 1.2 W per SM-GHz).

Where only a sweep's best figure is published (benchmarks/measured/torch_mm_peaks.csv: three
Tesla T4s), the size is unknown, but no size runs above the card's rate at its highest clock:
the T4's FP16 products (FP32 accumulation) reach 41.9-42.7 TFLOP/s where half the
datasheet's 65 allows 32.5 at its 1590 MHz cap, so this professional Turing part runs FP32
accumulation at full rate, as the Quadro RTX datasheets state for theirs.
"""

from __future__ import annotations

import csv
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # its sibling, the fit script

from fit_library_efficiency import MATH  # noqa: E402  (measured dtype -> math, storage)

from simulator.config.hardware import load_hardware  # noqa: E402
from simulator.gpu import library  # noqa: E402
from simulator.gpu.compute import GemmShape, ceiling, gemm_plan  # noqa: E402
from simulator.workload.trace import DTYPE_BYTES, Unit  # noqa: E402

SQUARE_GEMMS = Path(__file__).resolve().parent / "measured" / "torch_mm_square.csv"
PEAKS = Path(__file__).resolve().parent / "measured" / "torch_mm_peaks.csv"
PEAK_KEYS = {"fp32": "fp32", "fp16": "fp16_tensor"}  # dtype -> the hardware file's peak
LONGEST = 2  # a sweep's largest sizes whose FP32 runs give the sustained clock
LARGEST = (8192, 10240)  # the sizes whose runs of every type load the card for a second or so
# cards without published runs -> the measured cards of their product line (module docstring)
RTX_A_MEASURED = ("rtx-a2000", "rtx-a4000", "rtx-a6000")
SIBLINGS = {card: RTX_A_MEASURED for card in ("rtx-a4500", "rtx-a5000", "rtx-a5500")}


def boost_share(row: dict) -> tuple[float, float]:
    """(clock as a share of boost the measured FLOP/s need, seconds the run kept the card
    busy)."""
    hw = load_hardware(row["card"])
    n, measured = int(row["size"]), float(row["tflops"]) * 1e12
    math_dtype, storage = MATH[row["dtype"]]
    c = ceiling(hw, Unit.MATRIX, math_dtype)
    shape = GemmShape(1, n, n, n)
    plan, lib = gemm_plan(shape, library.kernel_family(c.key, hw.chip), hw.sm_count,
                          DTYPE_BYTES[storage])
    return (measured / (c.flops_per_s * plan.efficiency * lib),
            int(row["calls"]) * shape.flops / measured)


def measure(rows: list[dict]) -> list[tuple[dict, float, float]]:
    """Each row with its boost share and busy seconds (boost_share)."""
    return [(r, *boost_share(r)) for r in rows]


def measured_runs() -> list[tuple[dict, float, float]]:
    """Every published run (SQUARE_GEMMS), measured."""
    with SQUARE_GEMMS.open(newline="") as f:
        return measure(list(csv.DictReader(f)))


def derive(measured: list[tuple[dict, float, float]]) -> dict[str, float]:
    """Per card, the mean boost share of the FP32 runs of its sweeps' largest sizes."""
    sweeps: dict[tuple[str, str], list[tuple[int, float]]] = defaultdict(list)
    for r, share, _ in measured:
        if r["dtype"] == "fp32":
            sweeps[r["card"], r["source"]].append((int(r["size"]), share))
    long_runs: dict[str, list[float]] = defaultdict(list)
    for (card, _), runs in sweeps.items():
        long_runs[card] += [share for _, share in sorted(runs)[-LONGEST:]]
    return {card: sum(s) / len(s) for card, s in long_runs.items()}


def sibling_shares(derived: dict[str, float]) -> dict[str, float]:
    """Per card without runs of its own, the median derived share of its product line's
    measured cards (SIBLINGS)."""
    return {card: statistics.median(derived[s] for s in line) for card, line in SIBLINGS.items()}


def left_out_errors(derived: dict[str, float]) -> dict[str, float]:
    """Each measured sibling's derived share against the median of the others': how far the
    product line's median would have put its clock."""
    return {card: statistics.median(derived[s] for s in line if s != card) / derived[card] - 1
            for line in set(SIBLINGS.values()) for card in line}


def _clock_line(card: str, share: float) -> str:
    """A card's share of boost, the clock it gives, and the clock its file states."""
    hw = load_hardware(card)
    boost = hw.boost_clock_mhz
    clock = f"{share * boost:.0f} MHz of {boost:.0f}" if boost else "boost not stated"
    stated = f"{hw.sustained_clock_mhz:.0f} MHz" if hw.sustained_clock_mhz else "none"
    return f"  {card:<10} share {share:.3f}  {clock}  (file states {stated})"


def main() -> int:
    measured = measured_runs()
    print(f"{'card':<10} {'dtype':<5} {'size':>6} {'TFLOP/s':>8} {'busy s':>7} "
          f"{'clock share of boost':>21}")
    for r, share, busy_s in measured:
        print(f"{r['card']:<10} {r['dtype']:<5} {r['size']:>6} {float(r['tflops']):>8.2f} "
              f"{busy_s:>7.2f} {share:>21.3f}")
    print(f"\nsustained clock (mean share of the FP32 runs of each sweep's {LONGEST} largest "
          "sizes, times the boost clock):")
    derived = derive(measured)
    for card, share in derived.items():
        print(_clock_line(card, share))
    print("\ncards without runs of their own: the median share of their product line's "
          "measured cards (" + ", ".join(RTX_A_MEASURED) + ")")
    for card, share in sibling_shares(derived).items():
        print(_clock_line(card, share))
    print("  each measured one against the others' median: " + "  ".join(
        f"{card} {error:+.1%}" for card, error in left_out_errors(derived).items()))
    sizes = " and ".join(str(n) for n in LARGEST)
    print(f"\neach kernel family against the FP32 one (mean share of the runs of {sizes} "
          "squared over the FP32 runs' of the same sizes): 1.0 where the family's fitted "
          "efficiency holds on the card at one clock")
    for card, ratios in family_ratios(measured).items():
        print(f"  {card:<10} " + "  ".join(f"{d} {r:.2f}" for d, r in ratios.items()))
    print("\nbest published figures against the card's peak at its highest clock (the "
          "file's, boost):")
    for r, peak in peak_shares():
        best = float(r["tflops_max"])
        half = f"; {best / (peak / 2):.2f} of half" if r["dtype"] != "fp32" else ""
        print(f"  {r['card']:<10} {r['dtype']:<5} {best:7.2f} TFLOP/s of {peak:6.1f} "
              f"({best / peak:.2f}{half})  {r['note']}")
    return 0


def peak_shares() -> list[tuple[dict, float]]:
    """Each published best figure (PEAKS) with the card's peak TFLOP/s at its boost clock for
    that dtype: a share above 0.5 of a tensor-core peak rules out a half rate."""
    with PEAKS.open(newline="") as f:
        rows = list(csv.DictReader(f))
    return [(r, load_hardware(r["card"]).peak_tflops[PEAK_KEYS[r["dtype"]]]) for r in rows]


def family_ratios(measured: list[tuple[dict, float, float]]) -> dict[str, dict[str, float]]:
    """Per card and dtype, the largest products' mean boost share over the FP32 ones': how far
    each tensor-core family's fitted efficiency is from the card, if it holds the FP32 clock
    (the sizes, not a busy time, pick the runs: tensor-core runs of a size are shorter)."""
    shares: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r, share, _ in measured:
        if int(r["size"]) in LARGEST:
            shares[r["card"]][r["dtype"]].append(share)
    out = {}
    for card, by_dtype in shares.items():
        fp32 = by_dtype.get("fp32")
        if fp32:
            base = sum(fp32) / len(fp32)
            out[card] = {d: sum(v) / len(v) / base for d, v in by_dtype.items() if d != "fp32"}
    return out


if __name__ == "__main__":
    raise SystemExit(main())
