"""Fit the compute side's coefficients on kernel times: the GEMM library's kernel families
(simulator/gpu/library.py) and GPU Boost's response time (simulator/gpu/clocks.py).

    python benchmarks/fit_library_efficiency.py [--write]

Training data: the H200's GEMMs in benchmarks/measured/h200/kernels.csv (torch.mm and
torch.bmm, fp32 on the CUDA cores; TF32, FP16 and BF16 on the tensor cores), measured with the
SM clock at a known 1980 MHz. Only compute-bound cases are used: those at least 4x the
framework's per-op floor and with arithmetic intensity above 4x the card's ridge point, so
that neither the host nor the memory decides their time. For each family, a grid search
picks `mainloop` (0.30-1.00), `k_overhead` (0-512 K elements) and `unaligned` (0.10-1.00)
minimising the median
absolute log error of the compute time (measured less the host's dispatch and the launch gap).

Then the response time: with the families fixed, the T4's compute-bound lone GEMMs
(benchmarks/measured/t4_fp32_gemm.csv, same selection) are timed from a cool card
(gpu/clocks.py: boost at the start, sinking toward the 900 MHz the T4 holds), for each
response time on a log grid from 0.05 to 5 ms; the one with the least median absolute log
error is kept. Only the T4 GEMMs see this one coefficient; its convolutions and vector ops
and the L4 stay unseen.

Prints the fits and their errors; `--write` stores the families in
simulator/gpu/library_efficiency.json (the response time is printed, to be copied into
gpu/clocks.py). benchmarks/measured_fidelity.py checks both on the GDDR6 cards.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from simulator.config.hardware import load_hardware  # noqa: E402
from simulator.gpu import library  # noqa: E402
from simulator.gpu.clocks import POWER_RESPONSE_S, ClockState, clocks  # noqa: E402
from simulator.gpu.compute import (  # noqa: E402
    GemmShape,
    ceiling,
    gemm_plan,
    launch_overhead_s,  # noqa: E402
)
from simulator.gpu.dispatch import DISPATCH_US  # noqa: E402
from simulator.workload.trace import DTYPE_BYTES, Unit  # noqa: E402

DATA = Path(__file__).resolve().parent / "measured" / "h200" / "kernels.csv"
MATH = {"fp32": ("fp32", "fp32"), "tf32": ("tf32", "fp32"), "fp16": ("fp16", "fp16"),
        "bf16": ("bf16", "bf16")}  # measured dtype -> (math type, storage type)
FLOOR_MULTIPLE = 4.0
RIDGE_MULTIPLE = 4.0
MAINLOOP = np.round(np.arange(0.30, 1.0001, 0.01), 2)
K_OVERHEAD = np.arange(0, 513, 16)
UNALIGNED = np.round(np.arange(0.1, 1.0001, 0.05), 2)


def cases(hw) -> dict[str, list[dict]]:
    """Compute-bound GEMMs by family: shape, peak at the sustained clock, compute seconds."""
    host_s = DISPATCH_US["matmul"] * 1e-6 + launch_overhead_s(hw)
    out: dict[str, list[dict]] = {f: [] for f in library.FAMILIES}
    with DATA.open(newline="") as f:
        for row in csv.DictReader(f):
            if row["kind"] != "gemm":
                continue
            math_dtype, dtype = MATH[row["dtype"]]
            b, m, n, k = (int(row[c]) for c in ("batch", "m", "n", "k"))
            flops = 2 * b * m * n * k
            nbytes = b * (m * k + k * n + m * n) * DTYPE_BYTES[dtype]
            c = ceiling(hw, Unit.MATRIX, math_dtype)
            ridge = c.flops_per_s / hw.peak_bandwidth_Bps
            measured = float(row["latency_ms"]) * 1e-3
            if measured < FLOOR_MULTIPLE * host_s or flops / nbytes < RIDGE_MULTIPLE * ridge:
                continue
            out[library.family_of(c.key)].append(dict(
                shape=GemmShape(b, m, n, k), flops=flops, element_bytes=DTYPE_BYTES[dtype],
                peak=c.flops_per_s * clocks(hw).scale, compute_s=measured - host_s))
    return out


def predict(case: dict, fam: library.KernelFamily, sms: int) -> float:
    plan, lib = gemm_plan(case["shape"], fam, sms, case["element_bytes"])
    return case["flops"] / (case["peak"] * plan.efficiency * lib)


def fit(rows: list[dict], name: str, sms: int) -> tuple[library.KernelFamily, float, float]:
    """Grid over k_overhead and unaligned; for each, the mainloop that centres the log errors
    (time is proportional to 1 / mainloop), rounded to the grid."""
    measured = np.array([r["compute_s"] for r in rows])
    best = None
    for k0 in K_OVERHEAD:
        for unaligned in UNALIGNED:
            fam = library.KernelFamily(name, 1.0, float(k0), float(unaligned))
            log_ratio = np.log(np.array([predict(r, fam, sms) for r in rows]) / measured)
            mainloop = float(np.clip(np.exp(np.median(log_ratio)), MAINLOOP[0], MAINLOOP[-1]))
            mainloop = float(MAINLOOP[np.abs(MAINLOOP - mainloop).argmin()])
            err = np.abs(log_ratio - np.log(mainloop))
            score = float(np.median(err))
            if best is None or score < best[0]:
                best = (score, library.KernelFamily(name, mainloop, float(k0), float(unaligned)),
                        float(np.quantile(err, 0.9)))
    score, fam, p90 = best
    return fam, float(np.expm1(score)), float(np.expm1(p90))


T4_GEMMS = Path(__file__).resolve().parent / "measured" / "t4_fp32_gemm.csv"
RESPONSE_S = np.geomspace(0.05e-3, 5e-3, 41)


def t4_cases(hw) -> list[dict]:
    host_s = DISPATCH_US["matmul"] * 1e-6 + launch_overhead_s(hw)
    c = ceiling(hw, Unit.MATRIX, "fp32")
    ridge = c.flops_per_s / hw.peak_bandwidth_Bps
    fam = library.families()["simt"]
    out = []
    with T4_GEMMS.open(newline="") as f:
        for row in csv.DictReader(f):
            b, m, n, k = (int(row[x]) for x in ("batch", "m", "n", "k"))
            flops = 2 * b * m * n * k
            measured = float(row["latency_ms"]) * 1e-3
            if measured < FLOOR_MULTIPLE * host_s or \
                    flops / (4 * b * (m * k + k * n + m * n)) < RIDGE_MULTIPLE * ridge:
                continue
            case = dict(shape=GemmShape(b, m, n, k), flops=flops, element_bytes=4,
                        peak=c.flops_per_s)
            out.append(dict(boost_s=predict(case, fam, hw.sm_count),
                            compute_s=measured - host_s))
    return out


def fit_response(rows: list[dict], clk) -> tuple[float, float, float]:
    measured = np.array([r["compute_s"] for r in rows])
    best = None
    for tau in RESPONSE_S:
        pred = np.array([ClockState(clk, 0.0, float(tau)).stretch(r["boost_s"]) for r in rows])
        err = np.abs(np.log(pred / measured))
        score = float(np.median(err))
        if best is None or score < best[0]:
            best = (score, float(tau), float(np.quantile(err, 0.9)))
    score, tau, p90 = best
    return tau, float(np.expm1(score)), float(np.expm1(p90))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true",
                    help=f"store the fit in {library.COEFFICIENTS.name}")
    args = ap.parse_args()
    hw = load_hardware("h200")
    doc = {"trained_on": "benchmarks/measured/h200/kernels.csv (gemm rows, compute-bound)",
           "script": "benchmarks/fit_library_efficiency.py", "families": {}}
    for name, rows in cases(hw).items():
        fam, median, p90 = fit(rows, name, hw.sm_count)
        doc["families"][name] = {"mainloop": fam.mainloop, "k_overhead": fam.k_overhead,
                                 "unaligned": fam.unaligned,
                                 "cases": len(rows), "median_abs_error": round(median, 4),
                                 "p90_abs_error": round(p90, 4)}
        print(f"{name:<11} {len(rows):4d} cases  mainloop {fam.mainloop:.2f}  k_overhead "
              f"{fam.k_overhead:4.0f}  unaligned {fam.unaligned:.2f}  median |err| "
              f"{median:6.1%}  p90 {p90:6.1%}")
    if args.write:
        library.COEFFICIENTS.write_text(json.dumps(doc, indent=2) + "\n")
        library.families.cache_clear()
        print(f"wrote {library.COEFFICIENTS}")
    t4 = load_hardware("t4")
    rows = t4_cases(t4)
    tau, median, p90 = fit_response(rows, clocks(t4))
    print(f"power response: {len(rows)} T4 GEMMs, time constant {tau * 1e3:.3f} ms "
          f"(gpu/clocks.py POWER_RESPONSE_S: {POWER_RESPONSE_S * 1e3:.3f} ms)  median |err| "
          f"{median:6.1%}  p90 {p90:6.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
