"""cuDNN's convolution algorithms, as the GEMMs they run.

With `torch.backends.cudnn.benchmark` on (NeuSight's and NVIDIA's training scripts set it),
cuDNN times its algorithms on the first call and keeps the fastest; the model does the same
with the ones below, each a GEMM through the library's kernel family (gpu/library.py):

- implicit GEMM: the convolution as one GEMM, M = batch x output pixels, N = output channels,
  K = input channels x kernel area (weight gradient: M = output channels, N = the rest of the
  weight), gathering its operands on the fly; split along K only for the weight gradient
  (whose K, batch x output pixels, is long and whose output is small); output tiles of
  128 x 128, 64 or 32 (CONV_TILES, the sizes in cuDNN's kernel names: scudnn_128x64_...),
  after a small kernel that computes the gather's offsets (computeOffsetsKernel);
- Winograd F(2x2, 3x3), fused (CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD): for a 3x3, stride-1
  forward or data gradient. Each 2x2 output tile comes from a 4x4 input tile; 16 products of
  (batch x tiles) x C_out x C_in, 2.25x fewer multiplies than direct. cuDNN's kernel
  (scudnn_winograd_128x128) keeps a block's tiles through all 16 in shared memory: one block
  per 8 x 16 output pixels of one image and 32 output channels (its grid, as NeuSight's T4
  profiles record it, is batch x ceil(C_out / 32) by ceil(P / 8) by ceil(Q / 16)), 32 tiles x
  16 points x 32 channels = a 128 x 128 tile whose K runs C_in. Few output channels or small
  images leave most of a block idle. A kernel before it (generateWinogradTilesKernel) turns
  the 3x3 filters into 4x4 ones through DRAM, which decides small-batch, many-channel cases;
- Winograd F(4x4, 3x3), non-fused (..._WINOGRAD_NONFUSED): 36 independent GEMMs of
  (batch x 4x4 tiles) x C_out x C_in, 4x fewer multiplies, but the transformed input, filter
  and output go through memory (written, then read), in four kernels (data, filter and output
  transforms beside the GEMM, as NeuSight's profiles list them): worth it when channels are
  many. The GEMM is cuBLAS's SGEMM (volta_sgemm_128x64_nn and its kin in those profiles),
  with cuBLAS's tiles and per-tile overhead.
- Winograd F(4x4, 3x3), non-fused, for the weight gradient of a 3x3, stride-1 convolution
  (CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED, cuDNN API reference,
  cudnnConvolutionBwdFilterAlgo_t: docs.nvidia.com/deeplearning/cudnn/api): the input's
  tiles (winogradWgradData4x4) and the output gradient's (winogradWgradDelta4x4) go through
  the same 36-point transforms, 36 GEMMs of C_out x C_in summed over the batch's tiles
  (K = batch x 4x4 tiles) give the transformed filter gradient, and winogradWgradOutput4x4
  turns its 36 points back into 3x3 filters: the forward's arithmetic and bytes, the roles
  swapped. cuDNN has no fused Winograd for the weight gradient.

The Winograd algorithms take FP32 and FP16 data only (WINOGRAD_DTYPES); an FP64 convolution
runs the implicit GEMM.

Transform kernels move their bytes at a share of the DRAM's peak (ConvCosts.
transform_bandwidth); every kernel adds a fixed time (ConvCosts.kernel_us).

Winograd's arithmetic: Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks"
(CVPR 2016). cuDNN runs it for FP32 data; the tensor-core paths run implicit GEMM only.

Tensor-core kernels take NHWC data. Given NCHW (PyTorch's default memory format), cuDNN
transposes the activations into NHWC and the result back, each transpose a read and a write
of the tensor through DRAM (NVIDIA's Deep Learning Performance Guide, "Convolutional Layers
User's Guide", Tensor Layouts in Memory: docs.nvidia.com/deeplearning/performance/
dl-performance-convolutional): `nchw_transpose_bytes`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from simulator.gpu.library import TILES, ConvCosts, GemmShape, KernelFamily
from simulator.workload.trace import DTYPE_BYTES, Op

CONV_TILES = ((128, 128), (128, 64), (128, 32))
# The fused Winograd kernel's block: 8 x 16 output pixels (32 tiles of 2 x 2) of one image by
# 32 output channels, over 16 points: 128 x 128 outputs of its GEMMs
FUSED_WINOGRAD_TILE = 128
FUSED_WINOGRAD_CHANNELS = 32


@dataclass(frozen=True)
class ConvAlgorithm:
    name: str
    gemm: GemmShape
    transform_bytes: int = 0  # bytes its separate transform kernels move through DRAM
    main_loop: float = 1.0    # its kernel's main loop against a plain GEMM's (ConvCosts)
    split_k: bool = False     # K split across blocks when the output has too few tiles
    kernels: int = 1          # kernels it launches (each costs ConvCosts.kernel_us)
    blocks: GemmShape | None = None  # whole 128 x 128 tiles it launches, where its own
    # geometry pads the work (the fused Winograd kernel); None: `gemm` through its tiles
    cudnn_kernel: bool = True  # cuDNN's own kernel (its per-tile overhead); False: cuBLAS's

    def family(self, gemm_family: KernelFamily, costs: ConvCosts) -> KernelFamily:
        """The GEMM family with this algorithm's own losses (gpu/library.py ConvCosts)."""
        k_overhead = costs.k_overhead if self.cudnn_kernel else gemm_family.k_overhead
        return replace(gemm_family, mainloop=gemm_family.mainloop * self.main_loop,
                       k_overhead=k_overhead)

    @property
    def flops(self) -> int:
        return self.gemm.flops

    @property
    def launched(self) -> tuple[GemmShape, tuple[tuple[int, int], ...]]:
        """The GEMM its kernel runs and the tiles it may run it in: its own whole blocks where
        it has them, else the useful GEMM through cuDNN's tiles (CONV_TILES) or, for a cuBLAS
        GEMM, cuBLAS's."""
        if self.blocks is not None:
            return self.blocks, ((FUSED_WINOGRAD_TILE, FUSED_WINOGRAD_TILE),)
        return self.gemm, CONV_TILES if self.cudnn_kernel else TILES


def is_weight_grad(op: Op) -> bool:
    """A convolution's weight gradient: it reads the output gradient (N, C_out, P, Q) and the
    input (N, C_in, H, W), both of the batch, and writes (C_out, C_in, kh, kw). Told by the
    shapes, since under autocast the weight it differentiates is a cast copy, not a
    parameter: a forward has the same pattern only when N = C_in = C_out, and then its
    output (P x Q) is larger than what it reads second (the kh x kw weight), where a weight
    gradient's output (the kernel) is smaller than its input image."""
    if op.kind != "conv" or len(op.reads) < 2 or not op.writes:
        return False
    gy, x, out = op.reads[0].tensor.shape, op.reads[1].tensor.shape, op.writes[0].tensor.shape
    return len(gy) == len(x) == len(out) == 4 and gy[0] == x[0] and \
        out[:2] == (gy[1], x[1]) and (out[0] != gy[0] or out[2] * out[3] < x[2] * x[3])


# The data types cuDNN's Winograd algorithms take, fused and non-fused, forward and backward:
# FLOAT_CONFIG and the half configurations, not DOUBLE_CONFIG (cuDNN API reference, the
# supported configurations of cudnnConvolutionForward, cudnnConvolutionBackwardData and
# cudnnConvolutionBackwardFilter: docs.nvidia.com/deeplearning/cudnn/api). An FP64
# convolution runs the implicit GEMM at the full count of multiplies.
WINOGRAD_DTYPES = frozenset({"fp32", "fp16"})


def winograd_geometry(op: Op) -> tuple[int, int, int, int, int] | None:
    """(batch, C_in, C_out, P, Q) of a 3x3, stride-1 convolution, forward, data gradient or
    weight gradient (C_in and C_out as the op runs them: a data gradient's C_in is the
    forward's output channels; P x Q the image, the same size in and out); None for any
    other."""
    if op.kind != "conv" or len(op.reads) < 2 or not op.writes:
        return None
    if is_weight_grad(op):  # reads (gy, x), writes the weight's gradient
        gy, x, w = op.reads[0].tensor, op.reads[1].tensor, op.writes[0].tensor
        if w.shape[2:] != (3, 3) or gy.shape[2:] != x.shape[2:]:
            return None
        n, c_out, p, q = gy.shape
        return n, x.shape[1], c_out, p, q
    src, w, out = op.reads[0].tensor, op.reads[1].tensor, op.writes[0].tensor
    if len(w.shape) != 4 or w.shape[2:] != (3, 3):
        return None
    if len(src.shape) != 4 or len(out.shape) != 4 or src.shape[2:] != out.shape[2:]:
        return None
    n, c_out, p, q = out.shape
    return n, src.shape[1], c_out, p, q


def nchw_transpose_bytes(op: Op) -> int:
    """What cuDNN's NCHW <-> NHWC transposes around a tensor-core convolution move: each
    activation the op reads or writes (its 4-D tensors other than the weight) read once and
    written once; none for channels-last data."""
    if op.layout != "nchw":
        return 0
    weight = op.writes[0] if is_weight_grad(op) else op.reads[1]
    return sum(2 * a.nbytes for a in (*op.reads, *op.writes)
               if a is not weight and len(a.tensor.shape) == 4)


def conv_algorithms(op: Op, implicit: GemmShape, simt: bool,
                    costs: ConvCosts) -> list[ConvAlgorithm]:
    """The algorithms cuDNN may pick for this convolution (`implicit`: its implicit GEMM;
    `simt`: on the CUDA cores, where the Winograd ones apply to the data types they take)."""
    transposes = 0 if simt else nchw_transpose_bytes(op)
    weight_grad = is_weight_grad(op)
    # cuDNN's implicit GEMM: a kernel computing the gather's offsets, then the GEMM
    out = [ConvAlgorithm("implicit_gemm", implicit, transposes, split_k=weight_grad, kernels=2)]
    winograd = simt and op.reads[0].tensor.dtype in WINOGRAD_DTYPES
    geometry = winograd_geometry(op) if winograd else None
    if geometry is None:
        return out
    n, c_in, c_out, p, q = geometry
    elem = DTYPE_BYTES[op.reads[0].tensor.dtype]
    image, filters, output = n * c_in * p * q, c_in * c_out, n * c_out * p * q
    if not weight_grad:  # cuDNN has no fused Winograd weight gradient
        tiles2 = n * math.ceil(p / 2) * math.ceil(q / 2)
        blocks = GemmShape(1, n * math.ceil(p / 8) * math.ceil(q / 16) * FUSED_WINOGRAD_TILE,
                           math.ceil(c_out / FUSED_WINOGRAD_CHANNELS) * FUSED_WINOGRAD_TILE,
                           c_in)
        # fused: a kernel turns the 3x3 filters into 4x4 ones (read 9, write 16 per filter),
        # then the main kernel transforms the image tiles and the outputs in place
        out.append(ConvAlgorithm("winograd_fused_2x2", GemmShape(1, tiles2, c_out, 16 * c_in),
                                 (9 + 16) * filters * elem, costs.winograd_fused, kernels=2,
                                 blocks=blocks))
    # non-fused: data, filter and output transforms, each a kernel reading its source and
    # writing the 36-point transform (the output one the reverse), around a cuBLAS SGEMM; for
    # the weight gradient the image's and the output gradient's tiles are transformed, the
    # GEMM sums over the tiles, and the filters come out of the last transform
    tiles4 = n * math.ceil(p / 4) * math.ceil(q / 4)
    moved = (image + 36 * tiles4 * c_in + 9 * filters + 36 * filters +
             36 * tiles4 * c_out + output) * elem
    gemm = (GemmShape(36, c_out, c_in, tiles4) if weight_grad
            else GemmShape(36, tiles4, c_out, c_in))
    out.append(ConvAlgorithm("winograd_nonfused_4x4", gemm, moved, costs.winograd_nonfused,
                             kernels=4, cudnn_kernel=False))
    return out
