"""Fit the compute side's coefficients on kernel times: the GEMM library's kernel families
(simulator/gpu/library.py) and GPU Boost's response time (simulator/gpu/clocks.py).

    python benchmarks/fit_library_efficiency.py [--write]

Families: the H200's GEMMs in benchmarks/measured/h200/kernels.csv (torch.mm and torch.bmm;
fp32 on the CUDA cores, TF32, FP16 and BF16 on the tensor cores), measured with the SM clock
at a known 1980 MHz (the card does not throttle). A case is used when its arithmetic decides
its time: at least twice the framework's per-op floor, its operands moved at the DRAM's peak
in under a quarter of its kernel time. Per family, a robust least-squares fit (scipy,
soft-L1 loss on log time ratios) finds `mainloop`, `k_overhead`, `unaligned` and
`tile_reuse` of gpu/library.py.

Volta's SIMT family (`simt_volta`): the same fit on the V100 PCIe's FP32 GEMMs of NeuSight's
profiles (benchmarks/measured/neusight_v100_gemm.csv, `train` rows: torch.bmm and nn.Linear,
cuBLAS's volta_sgemm_* kernels), at its boost clock, each case less the V100 host's per-op
floor. It is then checked on the V100's GEMMs of NeuSight's test set (`test` rows: another
campaign, transformer layers' shapes), beside the H200-fitted `simt` family on the same cases.

Convolutions: with the families fixed, NeuSight's FP32 convolution forwards on a V100 PCIe
(benchmarks/measured/v100_fp32_conv2d.csv, 3x3 stride 1, the same generator as the T4's),
through `simt_volta`, fit gpu/library.py's ConvCosts (cuDNN's own per-tile overhead, the
Winograd kernels' main loops, the share of the DRAM peak their transform kernels reach, a
fixed time per kernel) the same way, each case the longer of its arithmetic (cuDNN's
fastest algorithm: gpu/convolution.py) and its operands at the DRAM's peak, the V100 at its
boost clock (it states no sustained one, and a lone kernel starts cool).

Response time: with the families fixed, the T4's compute-bound lone GEMMs
(benchmarks/measured/t4_fp32_gemm.csv, the same selection) are timed from a cool card
(gpu/clocks.py: boost at the start, sinking toward the 900 MHz the T4 holds); the response
time with the least robust error is kept. Only the T4's GEMMs see this one coefficient; its
convolutions and vector ops and the other cards stay unseen.

Prints the fits and their median and p90 absolute errors, then what the fixed time per
convolution kernel stands for: the V100's convolutions without it (the other costs as fitted)
and its GEMMs, measured over predicted by measured duration; `--write` stores the families in
simulator/gpu/library_efficiency.json (the response time is printed, to be copied into
gpu/clocks.py). benchmarks/measured_fidelity.py checks both on the GDDR6 cards.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import sys
from itertools import pairwise
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares, minimize_scalar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # its sibling, measured_fidelity

from measured_fidelity import conv_trace  # noqa: E402  (the case as the harness builds it)

from simulator.config.hardware import Hardware, load_hardware  # noqa: E402
from simulator.gpu import library  # noqa: E402
from simulator.gpu.clocks import POWER_RESPONSE_S, ClockState, clocks  # noqa: E402
from simulator.gpu.compute import (  # noqa: E402
    GemmShape,
    ceiling,
    gemm_plan,
    kernel_compute,
    launch_overhead_s,
)
from simulator.gpu.dispatch import DISPATCH_US  # noqa: E402
from simulator.workload.trace import DTYPE_BYTES, Unit  # noqa: E402

MEASURED = Path(__file__).resolve().parent / "measured"
H200_KERNELS = MEASURED / "h200" / "kernels.csv"
T4_GEMMS = MEASURED / "t4_fp32_gemm.csv"
V100_CONVS = MEASURED / "v100_fp32_conv2d.csv"
V100_GEMMS = MEASURED / "neusight_v100_gemm.csv"
# NeuSight's V100 host against its T4 host, whose per-op floors the dispatch model carries:
# the 5th percentile of their lone `add` times (scripts/asplos/data/dataset/train/collect/
# add/p2.1.0/, 1,750 cases each), 32.2 and 25.9 us
V100_HOST_SCALE = 32.2 / 25.9
MATH = {"fp32": ("fp32", "fp32"), "tf32": ("tf32", "fp32"), "fp16": ("fp16", "fp16"),
        "bf16": ("bf16", "bf16")}  # measured dtype -> (math type, storage type)
FLOOR_MULTIPLE = 2.0     # a case takes at least this many per-op floors ...
MEMORY_SHARE = 0.25      # ... and its operands at peak bandwidth under this share of it
# (name, lower bound, upper bound, start) of each fitted family coefficient
PARAMETERS = (("mainloop", 0.2, 1.0, 0.7), ("k_overhead", 0.0, 1024.0, 64.0),
              ("unaligned", 0.05, 1.0, 0.8), ("tile_reuse", 0.0, 2.0, 0.3))
LOSS_SCALE = 0.1         # soft-L1: log errors beyond ~10 % count linearly, not squared


def gemm_case(hw: Hardware, row: dict, math_dtype: str, dtype: str,
              host_scale: float = 1.0) -> dict | None:
    """A lone GEMM whose arithmetic decides its time, with the compute seconds measured
    (`host_scale`: the measuring host's per-op floor against the T4's)."""
    b, m, n, k = (int(row[c]) for c in ("batch", "m", "n", "k"))
    host_s = DISPATCH_US["matmul"] * 1e-6 * host_scale + launch_overhead_s(hw)
    compute_s = float(row["latency_ms"]) * 1e-3 - host_s
    elem = DTYPE_BYTES[dtype]
    memory_s = b * (m * k + k * n + m * n) * elem / hw.peak_bandwidth_Bps
    if compute_s < (FLOOR_MULTIPLE - 1) * host_s or memory_s > MEMORY_SHARE * compute_s:
        return None
    c = ceiling(hw, Unit.MATRIX, math_dtype)
    shape = GemmShape(b, m, n, k)
    return dict(shape=shape, flops=shape.flops, element_bytes=elem,
                peak=c.flops_per_s, family=library.family_of(c.key, hw.chip), compute_s=compute_s)


def h200_cases(hw: Hardware) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    with H200_KERNELS.open(newline="") as f:
        for row in csv.DictReader(f):
            if row["kind"] == "gemm":
                case = gemm_case(hw, row, *MATH[row["dtype"]])
                if case:
                    case["peak"] *= clocks(hw).scale  # at the clock it held
                    out.setdefault(case["family"], []).append(case)
    return out


def v100_cases(hw: Hardware, campaign: str) -> list[dict]:
    """The V100's FP32 GEMMs of one NeuSight campaign (`train`: the profiles the family is
    fitted on; `test`: the test set's, held out), at its boost clock (a lone kernel starts
    cool, and the card states no sustained clock)."""
    with V100_GEMMS.open(newline="") as f:
        cases = [gemm_case(hw, row, "fp32", "fp32", V100_HOST_SCALE)
                 for row in csv.DictReader(f) if row["set"] == campaign]
    return [c for c in cases if c]


def boost_s(case: dict, fam: library.KernelFamily, sms: int) -> float:
    """Seconds of the case's arithmetic at the case's peak."""
    plan, lib = gemm_plan(case["shape"], fam, sms, case["element_bytes"])
    return case["flops"] / (case["peak"] * plan.efficiency * lib)


def _held_out(rows: list[dict], fam: library.KernelFamily, sms: int
              ) -> tuple[float, float, float]:
    """Median and p90 absolute error and median signed error of `fam` on cases not fitted."""
    log_ratio = np.log([boost_s(r, fam, sms) / r["compute_s"] for r in rows])
    return (*_errors(log_ratio), float(np.median(np.expm1(log_ratio))))


def _errors(log_ratio: np.ndarray) -> tuple[float, float]:
    err = np.expm1(np.abs(log_ratio))
    return float(np.median(err)), float(np.quantile(err, 0.9))


def fit_family(rows: list[dict], name: str, sms: int) -> tuple[library.KernelFamily, float,
                                                                 float]:
    measured = np.log([r["compute_s"] for r in rows])

    def residuals(x: np.ndarray) -> np.ndarray:
        fam = library.KernelFamily(name, *x)
        return np.log([boost_s(r, fam, sms) for r in rows]) - measured

    lo, hi, start = zip(*((p[1], p[2], p[3]) for p in PARAMETERS), strict=True)
    fit = least_squares(residuals, start, bounds=(lo, hi), loss="soft_l1", f_scale=LOSS_SCALE,
                        diff_step=1e-3)
    x = [round(float(v), 3) for v in fit.x]
    return (library.KernelFamily(name, *x), *_errors(residuals(np.array(x))))


CONV_PARAMETERS = (("k_overhead", 0.0, 2048.0, 27.0), ("winograd_fused", 0.1, 1.5, 1.0),
                   ("winograd_nonfused", 0.1, 1.5, 1.0), ("transform_bandwidth", 0.05, 1.0, 0.6),
                   ("kernel_us", 0.0, 200.0, 5.0))


def conv_cases(hw: Hardware) -> list[dict]:
    host_s = DISPATCH_US["conv"] * 1e-6 * V100_HOST_SCALE + launch_overhead_s(hw)
    out = []
    with V100_CONVS.open(newline="") as f:
        for row in csv.DictReader(f):
            compute_s = float(row["latency_ms"]) * 1e-3 - host_s
            if compute_s >= (FLOOR_MULTIPLE - 1) * host_s:
                out.append(dict(op=conv_trace(row).ops[0], compute_s=compute_s,
                                algorithm=row["algorithm"]))
    return out


def operand_seconds(rows: list[dict], hw: Hardware) -> list[float]:
    """Each convolution case's operands at the DRAM's peak."""
    return [r["op"].bytes_moved / hw.peak_bandwidth_Bps for r in rows]


def conv_seconds(rows: list[dict], costs: library.ConvCosts, hw: Hardware,
                 memory: list[float]) -> list[float]:
    """Each convolution case's compute seconds through `costs`: the longer of its arithmetic
    (cuDNN's fastest algorithm) and its operands at the DRAM's peak (`memory`)."""
    return [max(kernel_compute(hw, r["op"], clock_scale=1.0, costs=costs).time_s, mem)
            for r, mem in zip(rows, memory, strict=True)]


def fit_conv(rows: list[dict], hw: Hardware) -> tuple[library.ConvCosts, float, float]:
    measured = np.log([r["compute_s"] for r in rows])
    memory = operand_seconds(rows, hw)

    def residuals(x: np.ndarray) -> np.ndarray:
        return np.log(conv_seconds(rows, library.ConvCosts(*x), hw, memory)) - measured

    lo, hi, start = zip(*((p[1], p[2], p[3]) for p in CONV_PARAMETERS), strict=True)
    fit = least_squares(residuals, start, bounds=(lo, hi), loss="soft_l1", f_scale=LOSS_SCALE,
                        diff_step=1e-2)
    x = [round(float(v), 3) for v in fit.x]
    return (library.ConvCosts(*x), *_errors(residuals(np.array(x))))


# bounds (s) of the duration bins the per-kernel time is read against: the V100's measured compute
DURATION_BINS = (0.0, 0.2e-3, 0.5e-3, 1e-3, 2e-3, 5e-3, float("inf"))


def by_duration(measured: list[float], predicted: list[float]) -> list[tuple[int, float]]:
    """(cases, median of measured over predicted) per DURATION_BINS bin of measured time."""
    m, p = np.array(measured), np.array(predicted)
    out = []
    for lo, hi in pairwise(DURATION_BINS):
        inside = (m >= lo) & (m < hi)
        out.append((int(inside.sum()), float(np.median(m[inside] / p[inside]))
                    if inside.any() else float("nan")))
    return out


def duration_ratios(convs: list[dict], costs: library.ConvCosts, gemms: list[dict],
                    volta: library.KernelFamily, hw: Hardware
                    ) -> dict[str, list[tuple[int, float]]]:
    """by_duration of the V100's convolutions through `costs` less the fixed time per kernel,
    and of its GEMMs through `volta`, which has no such term."""
    bare = dataclasses.replace(costs, kernel_us=0.0)
    return {"conv, no kernel_us": by_duration(
                [r["compute_s"] for r in convs],
                conv_seconds(convs, bare, hw, operand_seconds(convs, hw))),
            "GEMMs, simt_volta": by_duration(
                [r["compute_s"] for r in gemms],
                [boost_s(r, volta, hw.sm_count) for r in gemms])}


def _duration_line(name: str, bins: list[tuple[int, float]]) -> str:
    return f"{name:<24}" + "".join(f"  {n:5d} x{ratio:5.2f}" for n, ratio in bins)


def t4_cases(hw: Hardware) -> list[dict]:
    with T4_GEMMS.open(newline="") as f:
        cases = [gemm_case(hw, row, "fp32", "fp32") for row in csv.DictReader(f)]
    return [dict(boost_s=boost_s(c, library.families()[c["family"]], hw.sm_count),
                 compute_s=c["compute_s"]) for c in cases if c]


def fit_response(rows: list[dict], clk) -> tuple[float, float, float]:
    measured = np.log([r["compute_s"] for r in rows])

    def residuals(tau: float) -> np.ndarray:
        return np.log([ClockState(clk, 0.0, tau).stretch(r["boost_s"]) for r in rows]) - \
            measured

    def loss(log_tau: float) -> float:  # the same soft-L1 loss as the families' fit
        z = (residuals(float(np.exp(log_tau))) / LOSS_SCALE) ** 2
        return float(np.sum(2 * (np.sqrt(1 + z) - 1)))

    fit = minimize_scalar(loss, bounds=(np.log(0.02e-3), np.log(20e-3)), method="bounded")
    tau = float(f"{np.exp(fit.x):.3g}")
    return (tau, *_errors(residuals(tau)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true",
                    help=f"store the families in {library.COEFFICIENTS.name}")
    args = ap.parse_args()
    hw = load_hardware("h200")
    v100 = load_hardware("v100-pcie-32gb")
    doc = {"trained_on": {"h200": "benchmarks/measured/h200/kernels.csv (gemm rows whose "
                                  "arithmetic decides their time)",
                          "simt_volta": "benchmarks/measured/neusight_v100_gemm.csv (its "
                                        "train rows, the same selection)"},
           "script": "benchmarks/fit_library_efficiency.py", "families": {}}
    training = {name: (rows, hw.sm_count) for name, rows in h200_cases(hw).items()}
    training["simt_volta"] = (v100_cases(v100, "train"), v100.sm_count)
    fitted = {}
    for name, (rows, sms) in training.items():
        fam, median, p90 = fit_family(rows, name, sms)
        fitted[name] = fam
        doc["families"][name] = {p[0]: getattr(fam, p[0]) for p in PARAMETERS} | {
            "cases": len(rows), "median_abs_error": round(median, 4),
            "p90_abs_error": round(p90, 4)}
        print(f"{name:<11} {len(rows):4d} cases  " + "  ".join(
            f"{p[0]} {getattr(fam, p[0]):g}" for p in PARAMETERS) +
            f"  median |err| {median:6.1%}  p90 {p90:6.1%}")
    held_out = v100_cases(v100, "test")
    for name in ("simt_volta", "simt"):
        median, p90, signed = _held_out(held_out, fitted[name], v100.sm_count)
        print(f"held out: the V100's {len(held_out)} GEMMs of NeuSight's test set through "
              f"{name:<10}  median |err| {median:6.1%}  p90 {p90:6.1%}  median {signed:+.1%}")
    if args.write:  # the families first: the convolutions' fit runs through them
        library.COEFFICIENTS.write_text(json.dumps(doc, indent=2) + "\n")
        library.families.cache_clear()
    rows = conv_cases(v100)
    costs, median, p90 = fit_conv(rows, v100)
    doc["convolution"] = {p[0]: getattr(costs, p[0]) for p in CONV_PARAMETERS} | {
        "cases": len(rows), "median_abs_error": round(median, 4), "p90_abs_error": round(p90, 4)}
    print(f"{'conv':<11} {len(rows):4d} cases  " + "  ".join(
        f"{p[0]} {getattr(costs, p[0]):g}" for p in CONV_PARAMETERS) +
        f"  median |err| {median:6.1%}  p90 {p90:6.1%}")
    bins = " ".join(f"{lo * 1e3:g}-{hi * 1e3:g}" for lo, hi in
                    pairwise(DURATION_BINS))
    print(f"the V100's measured compute over predicted by measured time (ms: {bins}), cases x "
          "median ratio:")
    for name, bins_of in duration_ratios(rows, costs, training["simt_volta"][0],
                                         fitted["simt_volta"], v100).items():
        print(_duration_line(name, bins_of))
    if args.write:
        library.COEFFICIENTS.write_text(json.dumps(doc, indent=2) + "\n")
        library.conv_costs.cache_clear()
        print(f"wrote {library.COEFFICIENTS}")
    t4 = load_hardware("t4")
    rows = t4_cases(t4)
    tau, median, p90 = fit_response(rows, clocks(t4))
    print(f"power response: {len(rows)} T4 GEMMs, time constant {tau * 1e3:.3g} ms "
          f"(gpu/clocks.py POWER_RESPONSE_S: {POWER_RESPONSE_S * 1e3:.4g} ms)  median |err| "
          f"{median:6.1%}  p90 {p90:6.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
