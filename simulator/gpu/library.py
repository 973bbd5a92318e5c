"""How close the libraries' GEMM and convolution kernels get to the sustained peak.

cuBLAS and cuDNN run a matmul or convolution as a tiled GEMM: each thread block computes one
output tile, looping over K. Beyond tile and wave quantization (gpu/compute.py), two losses
separate a real kernel from the peak:

- the main loop itself: instruction issue, shared-memory traffic and synchronisation keep even
  a full tile below the peak (`mainloop`, a share of the sustained peak);
- the work outside the main loop: filling the software pipeline, the first operand loads and
  the epilogue's stores, about the same per tile whatever K is (`k_overhead`, in K elements
  of main-loop time). A tile whose K loop is K long runs at K / (K + k_overhead).

- small tiles: a thread block's output tile of tm x tn reuses each operand element it loads
  tm x tn / (tm + tn) times; a smaller tile reuses less and keeps fewer warps in flight, so its
  main loop runs at (reuse / reuse of the largest tile) ^ `tile_reuse` of a large one's;
- operands whose rows are not a multiple of 16 bytes: the tensor-core kernels load operand
  tiles in 16-byte vectors, so an unaligned K or N (an FP16 matrix 2500 wide, say) sends the
  library to slower kernels (`unaligned`, a factor on the main loop's efficiency). NVIDIA's
  Matrix Multiplication Background guide (docs.nvidia.com/deeplearning/performance/
  dl-performance-matrix-multiplication) asks for multiples of 16 bytes for this reason.

All are properties of a kernel family, not of a card: `simt` (FP32 FMA on the CUDA cores:
SGEMM, FP32 implicit-GEMM convolutions), `simt_volta` (the same on Volta, compute capability
7.0, below), `tensor_tf32` (Hopper's TF32 MMA: 32-bit operands, twice the operand bytes per
FLOP of 16-bit MMA) and `tensor` (16-bit and 8-bit MMA: FP16, BF16, FP8, INT8; and TF32 on
Ampere and Ada, `family_of`). `benchmarks/fit_library_efficiency.py` fits them on kernel times
of one card at a known clock (`simt`, `tensor_tf32`, `tensor`: the H200's,
`benchmarks/measured/h200/kernels.csv`; `simt_volta`: the V100's GEMMs from NeuSight's
profiles, `benchmarks/measured/neusight_v100_gemm.csv`) and writes them to
`library_efficiency.json` beside this file; it checks `simt_volta` on the V100's GEMMs of
another campaign, and `benchmarks/measured_fidelity.py` checks the rest on GDDR6 cards they
were not taken from.

Volta has a SIMT family of its own because its SGEMM main loop runs nearer the peak: at its
boost clock the V100's cuBLAS kernels (`volta_sgemm_*`) reach 0.93 of it where the H200's
reach 0.73, and the H200's family times the V100's GEMMs about a third too slow. A likely
reason: Volta's SM has 16 FP32 lanes per scheduler, so an FMA instruction issues every other
cycle and the cycles between are free for the main loop's shared-memory loads; where a
scheduler has 32 lanes (Ampere GA10x, Ada, Hopper) each of those loads takes an FMA's slot.
Turing's SM is Volta's in this, and the T4 runs the same `volta_sgemm_*` kernels, yet its
GEMMs, at the clock its file states, run at the H200 family's share
(benchmarks/measured_fidelity.py): Turing keeps `simt` until a Turing card's clock under
SGEMM load is measured apart from its kernels' share.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from functools import cache
from pathlib import Path

from simulator.gpu.occupancy import chip_limits

COEFFICIENTS = Path(__file__).with_name("library_efficiency.json")
FAMILIES = ("simt", "simt_volta", "tensor_tf32", "tensor")
SIMT_FAMILIES = ("simt", "simt_volta")  # FMA on the CUDA cores
ALIGNMENT_BYTES = 16
# Output tiles (M x N) of one thread block the GEMM libraries choose among, largest first; the
# library picks the one that finishes first. cuBLAS also has narrower ones (128x32, 32x32),
# left out: how much slower per SM they run is not known well enough to model.
TILES = ((128, 128), (128, 64), (64, 64))


@dataclass(frozen=True)
class GemmShape:
    batch: int  # independent matrices (bmm); 1 when batch dimensions fold into M
    m: int
    n: int
    k: int

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.m * self.n * self.k


@dataclass(frozen=True)
class KernelFamily:
    name: str
    mainloop: float      # share of the sustained peak a full tile's main loop reaches
    k_overhead: float    # per-tile time outside the main loop, in K elements of main loop
    unaligned: float = 1.0  # main-loop factor when K or N rows are not 16-byte multiples
    tile_reuse: float = 0.0  # exponent of a smaller tile's main-loop loss (0: none)

    @property
    def cuda_cores(self) -> bool:
        """FMA on the CUDA cores (FP32 kernels, where cuDNN's Winograd algorithms apply)."""
        return self.name in SIMT_FAMILIES

    def k_efficiency(self, k: float) -> float:
        return k / (k + self.k_overhead) if k > 0 else 1.0

    def tile_efficiency(self, tile: tuple[int, int], largest: tuple[int, int]) -> float:
        return (reuse(tile) / reuse(largest)) ** self.tile_reuse

    def alignment_efficiency(self, k: int, n: int, element_bytes: int,
                             b_along_n: bool = True) -> float:
        """`b_along_n`: B's rows run along N (torch.mm's row-major K x N); False where both
        operands run along K (a linear layer's x W^T, cuBLAS's TN GEMM), so N is only the
        output's row, which the epilogue stores once per tile: cuBLASLt takes each matrix's
        alignment apart (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, _B_, _C_ and _D_ in the
        cuBLAS documentation)."""
        rows = (k, n) if b_along_n else (k,)
        aligned = all((r * element_bytes) % ALIGNMENT_BYTES == 0 for r in rows)
        return 1.0 if aligned else self.unaligned


def reuse(tile: tuple[int, int]) -> float:
    """Times a tile's main loop uses each operand element it loads."""
    tm, tn = tile
    return tm * tn / (tm + tn)


def family_of(ceiling_key: str, chip: str | None = None) -> str:
    """Tensor-core peaks (`*_tensor`) run MMA kernels, the rest FMA on the CUDA cores. TF32
    runs a family of its own (`tensor_tf32`, fitted on Hopper) except on the warp-level MMA
    chips of compute capability 8.x (Ampere, Ada; `chip`, the hardware file's): there a TF32
    MMA issues at half the 16-bit rate with operands twice as wide, the same operand bytes per
    cycle, and cuBLAS's TF32 kernels reach the share of their peak its 16-bit ones reach
    (benchmarks/derive_sustained_clock.py: TF32 over FP16 on the L4, A40 and RTX A4000 within
    8 % under the 16-bit family, 1.36-1.51 under the Hopper one). FMA on Volta (compute
    capability 7.0) runs `simt_volta` (the module docstring)."""
    if ceiling_key == "tf32_tensor":
        return "tensor" if warp_mma_tf32(chip) else "tensor_tf32"
    if ceiling_key.endswith("_tensor"):
        return "tensor"
    return "simt_volta" if _capability(chip) == "7.0" else "simt"


def _capability(chip: str | None) -> str | None:
    """The chip's compute capability; None for a chip not known."""
    limits = chip_limits(chip) if chip else None
    return limits[0] if limits else None


def warp_mma_tf32(chip: str | None) -> bool:
    """Whether the chip runs TF32 as warp-level MMA (mma.sync, compute capability 8.x) rather
    than Hopper's warpgroup MMA; False for a chip not known."""
    capability = _capability(chip)
    return capability is not None and capability.startswith("8.")


@cache
def families() -> dict[str, KernelFamily]:
    doc = json.loads(COEFFICIENTS.read_text())
    return {name: KernelFamily(name, float(f["mainloop"]), float(f["k_overhead"]),
                               float(f.get("unaligned", 1.0)), float(f.get("tile_reuse", 0.0)))
            for name, f in ((n, doc["families"][n]) for n in FAMILIES)}


def kernel_family(ceiling_key: str, chip: str | None = None) -> KernelFamily:
    return families()[family_of(ceiling_key, chip)]


@dataclass(frozen=True)
class ConvCosts:
    """What cuDNN's convolution algorithms cost beyond a GEMM (gpu/convolution.py): the per-tile
    overhead of cuDNN's own kernels (implicit GEMM, fused Winograd: `k_overhead`, K elements, in
    place of the cuBLAS family's; the operand gather runs from precomputed offsets), the
    Winograd kernels' main loops (`winograd_fused`, `winograd_nonfused`: factors on the
    family's), the share of the DRAM's peak their separate transform kernels reach
    (`transform_bandwidth`: gathers and scatters of 4x4 and 6x6 tiles, not streaming copies),
    and a fixed GPU time per kernel an algorithm launches (`kernel_us`)."""

    k_overhead: float = 0.0
    winograd_fused: float = 1.0
    winograd_nonfused: float = 1.0
    transform_bandwidth: float = 1.0
    kernel_us: float = 0.0   # GPU time per kernel an algorithm launches, beyond its work


CONV_COST_KEYS = tuple(f.name for f in fields(ConvCosts))


@cache
def conv_costs() -> ConvCosts:
    doc = json.loads(COEFFICIENTS.read_text()).get("convolution", {})
    return ConvCosts(**{k: float(doc[k]) for k in CONV_COST_KEYS if k in doc})
