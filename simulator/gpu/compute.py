"""Compute ceilings: which peak an op's arithmetic runs at, per data type and execution unit.

Matrix ops (matmul, convolution, attention) run on tensor cores where the hardware has them for
that type; fp32 matmuls use CUDA cores unless TF32 is allowed (the op's math_dtype says tf32).
Where a unit is missing (Turing has no BF16 or TF32 tensor cores; RDNA2 has no matrix units) the
op falls back to the next unit listed, and the report names the ceiling it used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from simulator.config.hardware import Hardware
from simulator.errors import InputError
from simulator.gpu.clocks import clocks
from simulator.gpu.convolution import conv_algorithms, is_weight_grad
from simulator.gpu.library import (
    TILES,
    ConvCosts,
    GemmShape,
    KernelFamily,
    conv_costs,
    kernel_family,
)
from simulator.units import TERA
from simulator.workload.trace import DTYPE_BYTES, Op, Unit

# Ceiling preference per (unit, math type), best first.
_MATRIX = {
    "tf32": ("tf32_tensor", "fp32"),
    "fp32": ("fp32",),
    "fp16": ("fp16_tensor", "fp16_vector", "fp32"),
    "bf16": ("bf16_tensor", "fp32"),
    "fp64": ("fp64",),
    "fp8": ("fp8_tensor", "fp16_tensor", "fp32"),
    "int8": ("int8_tensor", "fp32"),
}
_VECTOR = {
    "fp16": ("fp16_vector", "fp32"),
    "bf16": ("fp32",),
    "fp64": ("fp64",),
}


@dataclass(frozen=True)
class Ceiling:
    key: str              # the hardware file's peak_tflops key
    flops_per_s: float


def ceiling(hw: Hardware, unit: Unit, math_dtype: str) -> Ceiling:
    table = _MATRIX if unit is Unit.MATRIX else _VECTOR
    for key in table.get(math_dtype, ("fp32",)):
        value = hw.peak_tflops.get(key)
        if value:
            return Ceiling(key, value * TERA)
    check_compute(hw)
    tried = ", ".join(table.get(math_dtype, ("fp32",)))
    raise InputError(f"no compute peak for {math_dtype} on the {unit.value} unit; expected a "
                     f"number for one of: {tried}", file=hw.path, path="$.compute.peak_tflops")


def check_compute(hw: Hardware) -> None:
    """A training step needs compute peaks: a file of a memory system alone has none."""
    if not any(hw.peak_tflops.values()):
        raise InputError("no compute peaks: this file describes a memory system only; expected "
                         "a 'compute' block (the dram command needs none)", file=hw.path,
                         path="$.compute")


def op_ceiling(hw: Hardware, op: Op) -> Ceiling:
    return ceiling(hw, op.unit, op.math_dtype or op.dtype)


# GPU idle time between back-to-back kernels when the CPU launches ahead of the GPU: the
# per-kernel cost a tiny kernel cannot hide (CUDA's back-to-back launch rate is a few
# microseconds per kernel). An assumption, not a measurement; a hardware file may state its own
# compute.kernel_launch_overhead_us.
DEFAULT_KERNEL_LAUNCH_OVERHEAD_US = 2.0

# Split-K: when the output has too few tiles to fill the SMs, the K loop is split across blocks
# (then summed), each part at least this long. Only single products: cuBLAS's batched GEMMs
# (torch.bmm) put the batch in the grid's third dimension and never split K. NeuSight's
# profiles of torch.bmm (github.com/sitar-lab/NeuSight, scripts/asplos/data/dataset/train/
# collect/bmm/p2.1.0/) launch exactly `batch` blocks deep in 17,681 of 17,697 products on a T4
# and all 17,694 on a V100, few tiles or many; their nn.Linear products (collect/linear/)
# launch deeper grids (split K) in about half the cases.
MIN_SPLIT_K = 128

TILED_KINDS = ("matmul", "conv")  # ops that run as tiled GEMMs


@dataclass(frozen=True)
class KernelCompute:
    """Time the op's arithmetic takes, with the losses a roofline at peak does not show."""

    ceiling: Ceiling         # the datasheet peak; the kernel runs at the sustained clock
    time_s: float
    tile_efficiency: float   # useful share of the padded output tiles
    wave_efficiency: float   # share of SMs busy over the waves of tiles
    library_efficiency: float = 1.0  # main loop x per-tile overhead (gpu/library.py)
    algorithm: str = ""      # a convolution's: gpu/convolution.py
    fixed_s: float = 0.0     # of time_s, what no FLOP/s peak shortens (a convolution's
    # transform kernels and per-kernel time: ConvCosts)
    dram_s: float = 0.0      # of fixed_s, the transforms' bytes through DRAM, which the SM
    # clock does not pace


def gemm_shape(op: Op) -> GemmShape | None:
    """The GEMM a matmul or convolution runs, read off its first written tensor and its FLOPs
    (K = FLOPs / 2MN): convolutions are implicit GEMMs (M = batch x output pixels, N = output
    channels), their weight gradients M = output channels, N = the rest of the weight; a matmul
    whose inputs all carry the output's batch dimensions is a batched GEMM."""
    if op.kind not in TILED_KINDS or not op.writes or not op.flops:
        return None
    out = op.writes[0].tensor
    shape = out.shape
    if len(shape) < 2:
        return None
    batch = 1
    if is_weight_grad(op):
        m, n = shape[0], math.prod(shape[1:])
    elif op.kind == "conv":
        n = shape[1]
        m = math.prod(shape) // n
    elif len(shape) >= 3 and all(len(a.tensor.shape) >= 3 for a in op.reads):
        batch, m, n = math.prod(shape[:-2]), shape[-2], shape[-1]
    else:
        m, n = _operand_dims(op, out.numel) or (math.prod(shape[:-1]), shape[-1])
    return GemmShape(batch, m, n, max(1, op.flops // (2 * batch * m * n)))


def _operand_dims(op: Op, out_numel: int) -> tuple[int, int] | None:
    """(M, N) of a plain matmul from its operands, whatever view its output has: with
    K = FLOPs / 2MN, the operands hold M x K and K x N elements."""
    k = op.flops // (2 * out_numel)
    if k <= 0:
        return None
    sizes = sorted({a.tensor.numel for a in op.reads}, reverse=True)
    for i, a in enumerate(sizes):
        for b in sizes[i:]:
            if a % k == 0 and b % k == 0 and (a // k) * (b // k) == out_numel:
                return b // k, a // k
    return None


@dataclass(frozen=True)
class TilePlan:
    """How the library lays a GEMM out on the SMs."""

    tile: tuple[int, int]
    split_k: int             # K split across this many blocks when too few tiles fill the SMs
    tile_efficiency: float   # useful share of the padded output tiles
    wave_efficiency: float   # share of SMs busy over the waves of tiles

    @property
    def efficiency(self) -> float:
        return self.tile_efficiency * self.wave_efficiency


def tile_plan(shape: GemmShape, tile: tuple[int, int], sms: int | None,
              split_k: bool = True) -> TilePlan:
    """Tiles = batch x ceil(M/tm) x ceil(N/tn), split along K when too few to fill the SMs (a
    single product's: MIN_SPLIT_K), run in waves of one tile per SM; the last wave and the
    padded tile edges do no useful work."""
    tm, tn = tile
    rows, cols = math.ceil(shape.m / tm), math.ceil(shape.n / tn)
    tile_eff = shape.m * shape.n / (rows * tm * cols * tn)
    if not sms:
        return TilePlan(tile, 1, tile_eff, 1.0)
    tiles = shape.batch * rows * cols
    split = max(1, min(sms // tiles, shape.k // MIN_SPLIT_K)) \
        if split_k and shape.batch == 1 and tiles < sms else 1
    tiles *= split
    return TilePlan(tile, split, tile_eff, tiles / (math.ceil(tiles / sms) * sms))


def gemm_plan(shape: GemmShape, family: KernelFamily, sms: int | None,
              element_bytes: int | None = None, split_k: bool = True,
              tiles: tuple[tuple[int, int], ...] = TILES,
              b_along_n: bool = True) -> tuple[TilePlan, float]:
    """The tile plan the library picks (the one that finishes first) and the library's own
    efficiency on it: main loop x per-tile overhead x operand alignment (`element_bytes`:
    the operands' element size, None where the layout is the library's own, convolutions;
    `b_along_n`: KernelFamily.alignment_efficiency)."""
    align = 1.0 if element_bytes is None else \
        family.alignment_efficiency(shape.k, shape.n, element_bytes, b_along_n)

    def library(plan: TilePlan) -> float:
        return family.mainloop * align * family.k_efficiency(shape.k / plan.split_k) * \
            family.tile_efficiency(plan.tile, tiles[0])

    plan = max((tile_plan(shape, t, sms, split_k) for t in tiles),
               key=lambda p: p.efficiency * library(p))
    return plan, library(plan)


def _peak_at_clock(hw: Hardware, c: Ceiling, clock_scale: float | None) -> float:
    """The ceiling's FLOP/s at `clock_scale` x the boost clock; None: the sustained clock."""
    return c.flops_per_s * (clocks(hw).scale if clock_scale is None else clock_scale)


def kernel_compute(hw: Hardware, op: Op, clock_scale: float | None = None,
                   costs: ConvCosts | None = None) -> KernelCompute:
    """The op's arithmetic through the library's kernel (its tile plan, main loop and per-tile
    overhead: gpu/library.py) at `clock_scale` x the boost clock; None: the clock the card
    holds under sustained load (gpu/clocks.py). `costs`: convolutions' own losses, when not
    the fitted ones (gpu/library.py)."""
    c = op_ceiling(hw, op)
    peak = _peak_at_clock(hw, c, clock_scale)
    if op.unit is not Unit.MATRIX or not op.flops:
        return KernelCompute(c, op.flops / peak, 1.0, 1.0)
    if gemm_shape(op) is None:  # a fused kernel (attention): its main loop, no tile plan known
        mainloop = kernel_family(c.key, hw.chip).mainloop
        return KernelCompute(c, op.flops / (peak * mainloop), 1.0, 1.0, mainloop)
    if op.kind == "matmul":
        return min(matmul_candidates(hw, op, clock_scale), key=lambda k: k.time_s)
    # cuDNN in benchmark mode runs whichever of its algorithms is fastest
    return min(conv_candidates(hw, op, clock_scale, costs), key=lambda k: k.time_s)


def _units(hw: Hardware, c: Ceiling, peak: float) -> list[tuple[Ceiling, float, KernelFamily]]:
    """The units whose kernels the library may run an op of ceiling `c` on, each with its
    FLOP/s at the clock `peak` is at and its kernel family: TF32 allowed lets cuBLAS and cuDNN
    pick an FP32 kernel on the CUDA cores where it finishes first (TF32 permits the tensor
    cores, it does not require them: CUBLAS_COMPUTE_32F_FAST_TF32 in the cuBLAS
    documentation)."""
    units = [(c, peak, kernel_family(c.key, hw.chip))]
    if c.key == "tf32_tensor":
        simt = ceiling(hw, Unit.VECTOR, "fp32")
        units.append((simt, simt.flops_per_s * peak / c.flops_per_s,
                      kernel_family(simt.key, hw.chip)))
    return units


def matmul_candidates(hw: Hardware, op: Op, clock_scale: float | None = None
                      ) -> list[KernelCompute]:
    """A matmul through the library's kernels on each unit it may use (`_units`)."""
    c = op_ceiling(hw, op)
    shape = gemm_shape(op)
    out = []
    for unit, unit_peak, fam in _units(hw, c, _peak_at_clock(hw, c, clock_scale)):
        plan, library = gemm_plan(shape, fam, hw.sm_count,
                                  DTYPE_BYTES[op.reads[0].tensor.dtype],
                                  b_along_n=op.layout != "tn")
        out.append(KernelCompute(unit, op.flops / (unit_peak * plan.efficiency * library),
                                 plan.tile_efficiency, plan.wave_efficiency, library))
    return out


def conv_candidates(hw: Hardware, op: Op, clock_scale: float | None = None,
                    costs: ConvCosts | None = None) -> list[KernelCompute]:
    """A convolution through each algorithm cuDNN has for it (gpu/convolution.py), timed as
    kernel_compute times a GEMM; with TF32 allowed its FP32 kernels (Winograd among them) stay
    candidates beside the TF32 ones."""
    c = op_ceiling(hw, op)
    peak = _peak_at_clock(hw, c, clock_scale)
    clock_share = peak / c.flops_per_s  # the kernels' fixed time runs on the SM clock too
    units = _units(hw, c, peak)
    costs = costs or conv_costs()
    shape = gemm_shape(op)
    out = []
    for unit, unit_peak, fam in units:
        for algo in conv_algorithms(op, shape, fam.cuda_cores, costs):
            gemm, tiles = algo.launched
            plan, library = gemm_plan(gemm, algo.family(fam, costs), hw.sm_count,
                                      split_k=algo.split_k, tiles=tiles)
            if algo.blocks is not None:  # whole blocks: the useful share is its own
                plan = replace(plan, tile_efficiency=algo.flops / gemm.flops)
            dram_s = algo.transform_bytes / (hw.peak_bandwidth_Bps * costs.transform_bandwidth)
            fixed_s = dram_s + algo.kernels * costs.kernel_us * 1e-6 / clock_share
            time_s = algo.flops / (unit_peak * plan.efficiency * library) + fixed_s
            out.append(KernelCompute(unit, time_s, plan.tile_efficiency, plan.wave_efficiency,
                                     library, algo.name, fixed_s, dram_s))
    return out


def launch_overhead_s(hw: Hardware) -> float:
    us = hw.kernel_launch_overhead_us
    return (DEFAULT_KERNEL_LAUNCH_OVERHEAD_US if us is None else us) * 1e-6
