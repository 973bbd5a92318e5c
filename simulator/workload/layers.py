"""PyTorch layers as op emitters: each records its forward kernels and pushes its backward.

FLOPs follow torch.utils.flop_counter.FlopCounterMode: 2 per multiply-add, counted for matmuls,
convolutions and attention only. Kernels and saved tensors follow PyTorch on CUDA (fused dropout
with a 1-byte mask, memory-efficient attention), unless the execution options say otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from simulator.config.models import window_output
from simulator.workload.builder import TraceBuilder, gather, part
from simulator.workload.trace import DTYPE_BYTES, Access, Category, Pattern, Tensor, Unit


def _matmul_math(b: TraceBuilder, conv: bool, dtype: str) -> str:
    ex = b.execution
    if dtype == "fp32" and (ex.allow_tf32_conv if conv else ex.allow_tf32_matmul):
        return "tf32"
    return dtype


def _mm(b: TraceBuilder, name: str, reads, writes, flops: int, kind: str = "matmul",
        layout: str = "", dims: tuple[int, ...] = ()) -> None:
    """`layout`: a convolution's activations (set here), or "tn" for a product whose operands
    both run along K (a linear layer's forward). `dims`: a product's M, N and K; cuBLAS before
    11 runs a 16-bit one on the tensor cores only where all are multiples of 8 (its documented
    restriction; NVIDIA's Matrix Multiplication Background guide times the same shapes under
    cuBLAS 10.1 and 11.0), else FP32 math on the CUDA cores (`execution.cublas_major`)."""
    dtype = writes[0].dtype
    if kind == "conv":
        layout = "nhwc" if b.execution.channels_last else "nchw"
    b.op(name, kind, reads, writes, flops, Unit.MATRIX, dtype=dtype,
         math_dtype=_gemm_math(b, kind == "conv", dtype, dims), layout=layout)


def _gemm_math(b: TraceBuilder, conv: bool, dtype: str, dims: tuple[int, ...]) -> str:
    """The math a product of these M, N and K runs (_mm)."""
    math = _matmul_math(b, conv, dtype)
    if math in ("fp16", "bf16") and b.execution.cublas_major < 11 \
            and any(d % CUBLAS10_TENSOR_MULTIPLE for d in dims):
        return "fp32"
    return math


def bmm(b: TraceBuilder, name: str, reads, writes: list[Tensor], flops: int,
        dims: tuple[int, ...] = ()) -> None:
    """A batched product, on the tensor cores (or TF32) where the execution allows; `dims`:
    its M, N and K (_mm)."""
    _mm(b, name, reads, writes, flops, dims=dims)


CUBLAS10_TENSOR_MULTIPLE = 8  # cuBLAS 10: m, n and k multiples of 8 for tensor-core GEMMs


# --- autocast (mixed precision) -------------------------------------------------------------
def cast(b: TraceBuilder, x: Tensor, dtype: str, name: str) -> Tensor:
    """x.to(dtype): a copy kernel each way."""
    y = b.activation(name, x.shape, x, dtype=dtype)
    b.op(name, "copy", [x], [y])
    _backward_to_input(b, x, y, name, "copy", lambda gy: [gy])
    return y


def autocast_low(b: TraceBuilder, t: Tensor | None) -> Tensor | None:
    """An input of a matmul-class op under torch.autocast: cast to the low-precision type, a
    weight once per forward pass (autocast caches those casts). An int8 weight is dequantized
    to the compute type first, also once per forward pass."""
    if t is not None and t.dtype == "int8" and t.id in b.quant_scales:
        t = _dequantized(b, t)
    low = b.execution.autocast
    if t is None or low is None or t.dtype != "fp32":
        return t
    if t.category is Category.PARAMETER:
        c = b.cast_cache.get(t.id)
        if c is None:
            c = b.cast_cache[t.id] = cast(b, t, low, f"{t.name}.to_{low}")
        return c
    return cast(b, t, low, f"{b.op_prefix}{t.name}.to_{low}")


def _dequantized(b: TraceBuilder, w: Tensor) -> Tensor:
    key = -1 - w.id  # beside autocast's entries in the per-forward cache
    found = b.cast_cache.get(key)
    if found is None:
        found = b.cast_cache[key] = b.activation(f"{w.name}.dequantized", w.shape,
                                                 dtype=b.execution.autocast or b.dtype)
        b.op(f"{w.name}.dequantize", "elementwise", [w, b.quant_scales[w.id]], [found])
    return found


def autocast_fp32(b: TraceBuilder, t: Tensor) -> Tensor:
    """An input of an op autocast runs in fp32 (norms, softmax, losses)."""
    if b.execution.autocast is None or t.dtype == "fp32":
        return t
    return cast(b, t, "fp32", f"{t.name}.to_fp32")


# --- dense layers -------------------------------------------------------------------------
def linear(b: TraceBuilder, x: Tensor, w: Tensor, bias: Tensor | None, name: str,
           w_shape: tuple[int, int] | None = None) -> Tensor:
    """y = x @ W^T + bias. `w_shape` selects a slice of a packed weight (MHA in_proj)."""
    x, w, bias = autocast_low(b, x), autocast_low(b, w), autocast_low(b, bias)
    out_f, in_f = w_shape or w.shape
    rows = x.numel // in_f
    wb = out_f * in_f * DTYPE_BYTES[w.dtype]
    bb = (bias.nbytes * out_f // bias.shape[0]) if bias is not None else 0
    lead = x.shape[:-1] if x.shape[-1] == in_f else (rows,)  # a flattened view of x
    y = b.activation(f"{name}.out", lead + (out_f,), x, w, *([bias] if bias is not None else []))
    flops = 2 * rows * in_f * out_f
    reads = [x, part(w, wb)] + ([part(bias, bb)] if bias is not None else [])
    dims = (rows, out_f, in_f)  # each of the three products runs on these
    _mm(b, name, reads, [y], flops, layout="tn", dims=dims)  # x's and W's rows run along in_f

    def backward() -> None:
        gy = b.grad_of(y)
        if gy is None:
            return
        if x.requires_grad:
            gx = b.new_grad(x)
            _mm(b, f"{name}.grad_input", [gy, part(w, wb)], [gx], flops, dims=dims)
            b.accumulate(x, gx)
        # a slice of a packed weight gets a gradient of its own, concatenated by the caller
        packed = w_shape is not None
        if w.requires_grad:  # a frozen (quantized) weight gets none
            gw = _param_grad(b, w, w_shape, f"{name}.weight_slice", packed)
            _mm(b, f"{name}.grad_weight", [gy, x], [gw], flops, dims=dims)
            _deliver(b, w, gw, packed)
        if bias is not None and bias.requires_grad:
            gb = _param_grad(b, bias, (out_f,), f"{name}.bias_slice", packed)
            b.op(f"{name}.grad_bias", "reduction", [gy], [gb])
            _deliver(b, bias, gb, packed)

    b.on_backward(backward)
    return y


def _param_grad(b: TraceBuilder, t: Tensor, shape, name: str, packed: bool) -> Tensor:
    return b.temporary(f"grad({name})", shape, t.dtype) if packed else b.new_grad(t)


def _deliver(b: TraceBuilder, t: Tensor, g: Tensor, packed: bool) -> None:
    if packed:
        b.slice_grads.setdefault(t.id, []).append(g)
    else:
        b.accumulate(t, g)


def concat_slice_grads(b: TraceBuilder, param: Tensor, name: str) -> None:
    """Backward of w.split(...): cat the slice gradients into the parameter's gradient."""
    param = autocast_low(b, param)  # under autocast the slices come from the cast copy

    def backward() -> None:
        slices = b.slice_grads.pop(param.id, [])
        if not slices:
            return
        g = b.new_grad(param)
        b.op(f"{name}.grad_cat", "copy", slices, [g])
        b.accumulate(param, g)

    b.on_backward(backward)


def embedding(b: TraceBuilder, idx: Tensor, w: Tensor, name: str) -> Tensor:
    rows = idx.numel
    dim = w.shape[1]
    # one row per index, but never more than the table: repeated rows come from cache
    row = dim * w.nbytes // w.numel
    row_bytes = min(rows * row, w.nbytes)
    y = b.activation(f"{name}.out", idx.shape + (dim,), w)
    b.op(name, "embedding", [idx, gather(w, row_bytes, row)], [y])

    def backward() -> None:
        gy = b.grad_of(y)
        if gy is None:
            return
        gw = b.new_grad(w)
        # embedding_dense_backward: zero the whole table, then scatter-add one row per index
        b.op(f"{name}.grad_weight", "embedding", [gy, idx], [gw, gather(gw, row_bytes, row)])
        b.accumulate(w, gw)

    b.on_backward(backward)
    return y


# --- elementwise ----------------------------------------------------------------------------
def _backward_to_input(b: TraceBuilder, x: Tensor, y: Tensor, name: str, kind: str,
                       reads: Callable[[Tensor], list]) -> None:
    """Push the one-kernel backward of y = f(x): it reads `reads(grad(y))`, writes grad(x)."""
    def backward() -> None:
        gy = b.grad_of(y)
        if gy is None or not x.requires_grad:
            return
        gx = b.new_grad(x)
        b.op(f"{name}.backward", kind, reads(gy), [gx])
        b.accumulate(x, gx)

    b.on_backward(backward)


def dropout(b: TraceBuilder, x: Tensor, p: float, name: str) -> Tensor:
    """native_dropout on CUDA: output plus a 1-byte keep mask saved for backward."""
    if p <= 0:
        return x
    y = b.activation(f"{name}.out", x.shape, x)
    mask = b.activation(f"{name}.mask", x.shape, dtype="bool")
    b.op(name, "dropout", [x], [y, mask])
    _backward_to_input(b, x, y, name, "elementwise", lambda gy: [gy, mask])
    return y


def _pointwise(b: TraceBuilder, x: Tensor, name: str, saved: str) -> Tensor:
    """y = f(x), one kernel; its backward one kernel reading grad(y) and what autograd saved
    (`saved`: "input" or "output")."""
    y = b.activation(f"{name}.out", x.shape, x)
    b.op(name, "elementwise", [x], [y])
    _backward_to_input(b, x, y, name, "elementwise",
                       lambda gy: [gy, x if saved == "input" else y])
    return y


def relu(b: TraceBuilder, x: Tensor, name: str) -> Tensor:
    return _pointwise(b, x, name, "output")  # threshold_backward reads the output


def gelu(b: TraceBuilder, x: Tensor, name: str) -> Tensor:
    return _pointwise(b, x, name, "input")


def _scaled(b: TraceBuilder, x: Tensor, name: str, grad_kernel: bool = True) -> Tensor:
    """x times (or plus) a Python number: one pass; its backward one pass over the gradient
    (times the number), or none (plus: the gradient is handed on)."""
    y = b.activation(f"{name}.out", x.shape, x)
    b.op(name, "elementwise", [x], [y])
    if grad_kernel:
        _backward_to_input(b, x, y, name, "elementwise", lambda gy: [gy])
    else:
        def backward() -> None:
            gy = b.grad_of(y)
            if gy is not None:
                b.accumulate(x, gy, share=True)
        b.on_backward(backward)
    return y


def scale(b: TraceBuilder, x: Tensor, name: str) -> Tensor:
    """x times a Python number (`x * c`, or in place `x.mul_(c)`, the same traffic)."""
    return _scaled(b, x, name)


def gelu_new(b: TraceBuilder, x: Tensor, name: str) -> Tensor:
    """GELU's tanh approximation as Hugging Face's NewGELUActivation writes it in Python (GPT-2's
    default `activation_function`), each step a kernel of its own in eager PyTorch:
    0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x ** 3))). Eight passes forward; in
    backward x ** 3 costs three (x ** 2, times 3, times the gradient), tanh one (it reads its
    output), the product two (one per factor), the additions none."""
    half = _scaled(b, x, f"{name}.half")
    cube = b.activation(f"{name}.cube.out", x.shape, x)
    b.op(f"{name}.cube", "elementwise", [x], [cube])

    def cube_backward() -> None:
        g = b.grad_of(cube)
        if g is None or not x.requires_grad:
            return
        sq = b.temporary(f"{name}.cube.backward.square", x.shape)
        b.op(f"{name}.cube.backward.square", "elementwise", [x], [sq])
        sq3 = b.temporary(f"{name}.cube.backward.times3", x.shape)
        b.op(f"{name}.cube.backward.times3", "elementwise", [sq], [sq3])
        gx = b.new_grad(x)
        b.op(f"{name}.cube.backward", "elementwise", [g, sq3], [gx])
        b.accumulate(x, gx)

    b.on_backward(cube_backward)
    inner = _scaled(b, cube, f"{name}.scale_cube")
    total = add(b, x, inner, f"{name}.sum")
    arg = _scaled(b, total, f"{name}.scale_sum")
    t = _pointwise(b, arg, f"{name}.tanh", "output")  # tanh_backward reads the output
    one_plus = _scaled(b, t, f"{name}.one_plus", grad_kernel=False)
    return _product(b, half, one_plus, f"{name}.out", f"{name}.product")


def _product(b: TraceBuilder, x: Tensor, y: Tensor, out: str, name: str) -> Tensor:
    """x * y elementwise; its backward, as eager PyTorch's MulBackward0, one kernel per factor
    (grad times the other factor)."""
    z = b.activation(out, x.shape, x, y)
    b.op(name, "elementwise", [x, y], [z])

    def backward() -> None:
        g = b.grad_of(z)
        if g is None:
            return
        for factor, other in ((x, y), (y, x)):
            if factor.requires_grad:
                gf = b.new_grad(factor)
                b.op(f"{name}.backward", "elementwise", [g, other], [gf])
                b.accumulate(factor, gf)

    b.on_backward(backward)
    return z


def add(b: TraceBuilder, x: Tensor, y: Tensor, name: str) -> Tensor:
    """A residual sum x + y into a new tensor."""
    return _sum(b, x, y, b.activation(f"{name}.out", x.shape, x, y), name)


def _sum(b: TraceBuilder, x: Tensor, y: Tensor, z: Tensor, name: str) -> Tensor:
    """Emit z = x + y; its backward hands the same gradient to both inputs."""
    b.op(name, "elementwise", [x, y], [z])

    def backward() -> None:
        gz = b.grad_of(z)
        if gz is None:
            return
        b.accumulate(y, gz, share=True)
        b.accumulate(x, gz, share=True)

    b.on_backward(backward)
    return z


def _norm_backward(b: TraceBuilder, name: str, x: Tensor, y: Tensor, params: list[Tensor],
                   reads: list[Tensor], second_pass: list[Tensor] | None = None,
                   row_threads: int = 0) -> None:
    """A normalization's backward: one kernel reads grad(y) and the saved `reads`, and writes
    the gradients of x and of each parameter; `second_pass`: what it reads again, with
    grad(y), after its reductions (batch norm; layer norm's gamma and beta kernel).
    `row_threads`: the input's gradient comes from a block of so many threads per row that
    reads the row's grad(y) and x twice, a sum over the row and then the write (layer norm)."""
    def backward() -> None:
        gy = b.grad_of(y)
        if gy is None:
            return
        gx = b.new_grad(x)
        grads = [b.new_grad(p) for p in params]
        again = [gy, *second_pass] if second_pass else []
        first = [gy, *reads]
        if row_threads:
            first = [Access(t, t.nbytes, passes=2, block_threads=row_threads)
                     if t in (gy, x) else t for t in first]
        b.op(f"{name}.backward", "norm", [*first, *again], [gx, *grads])
        for p, g in zip(params, grads, strict=True):
            b.accumulate(p, g)
        b.accumulate(x, gx)

    b.on_backward(backward)


# PyTorch's one-pass (vectorized) layer norm takes rows that are a multiple of this many
# elements; other rows take two kernels, row moments then normalization, each reading x
# (aten/src/ATen/native/cuda/layer_norm_kernel.cu, LayerNormKernelImplInternal). The one
# kernel gives each row a block of 32 x 4 threads, reads the row for its moments and again to
# normalize it; the backward's input-gradient kernel (layer_norm_grad_input_kernel, 128
# threads a row) reads the row's grad(y) and x for two sums, then again to write.
LAYER_NORM_VECTOR = 4
LAYER_NORM_ROW_THREADS = 128


def _row_norm_reads(x: Tensor) -> list[Access | Tensor]:
    """How layer norm's and RMSNorm's forward read x: one kernel reading each row twice, or,
    for rows the vectorized kernel does not take, two kernels each reading all of x."""
    if x.shape[-1] % LAYER_NORM_VECTOR:
        return [x, x]
    return [Access(x, x.nbytes, passes=2, block_threads=LAYER_NORM_ROW_THREADS)]


def layer_norm(b: TraceBuilder, x: Tensor, w: Tensor, bias: Tensor, name: str) -> Tensor:
    """Its backward is two kernels, the input's gradient and then gamma's and beta's, each
    reading grad(y) and x."""
    x = autocast_fp32(b, x)
    rows = x.numel // x.shape[-1]
    y = b.activation(f"{name}.out", x.shape, x, w)
    mean = b.activation(f"{name}.mean", (rows,), dtype="fp32")
    rstd = b.activation(f"{name}.rstd", (rows,), dtype="fp32")
    b.op(name, "norm", [*_row_norm_reads(x), w, bias], [y, mean, rstd])
    _norm_backward(b, name, x, y, [w, bias], [x, mean, rstd, w], second_pass=[x],
                   row_threads=LAYER_NORM_ROW_THREADS)
    return y


# PyTorch's softmax and log_softmax over the last dim (aten/src/ATen/native/cuda/SoftMax.cu,
# v2.1): rows of at most 1024 elements and 4 KB take a kernel that holds a row in a warp's
# registers and reads it once; longer rows a block per row (cunn_SoftMaxForward) that reads
# the row once for its max, once for the sum of exponentials and once to write, and a
# backward that reads grad once for a sum and again, with the output, to write, with
# SoftMax_getBlockSize's threads. Softmax's backward (not log_softmax's) first multiplies
# grad by the output in a kernel of its own and runs that backward on the product
# (softmax_backward_cuda_out). (Later releases keep a long row that fits in shared memory
# there, one pass: cunn_SoftMaxForwardSmem.)
SOFTMAX_WARP_ROW = (1024, 4096)  # elements, bytes
SOFTMAX_MAX_THREADS = 1024


def softmax_block_threads(cols: int, elem: int) -> int:
    """SoftMax_getBlockSize: a power of two near half the row's 16-byte vectors."""
    ilp = max(16 // elem, 1)
    limit = min(cols // ilp, SOFTMAX_MAX_THREADS)
    if ilp > 1:
        limit //= 2
    threads = 1
    while threads < limit:
        threads *= 2
    return max(threads, 32)


def softmax_reads(t: Tensor, passes: int) -> Access | Tensor:
    """How a softmax kernel over t's last dim reads t: once per row in the warp kernel, else
    `passes` times, row by row."""
    cols, elem = t.shape[-1], DTYPE_BYTES[t.dtype]
    if cols <= SOFTMAX_WARP_ROW[0] and cols * elem <= SOFTMAX_WARP_ROW[1]:
        return t
    return Access(t, t.nbytes, passes=passes, block_threads=softmax_block_threads(cols, elem))


def softmax_backward(b: TraceBuilder, name: str, grad: Tensor, out: Tensor,
                     grad_in: Tensor) -> None:
    """softmax_backward_cuda_out: tmp = grad * output, one kernel, then the softmax backward
    over tmp (its sum, then the write into `grad_in`, which reads the output too)."""
    tmp = b.temporary(f"{name}.grad_times_out", out.shape, out.dtype)
    b.op(f"{name}.backward_mul", "elementwise", [grad, out], [tmp])
    b.op(f"{name}.backward", "elementwise", [softmax_reads(tmp, 2), out], [grad_in])


def copy(b: TraceBuilder, x: Tensor, shape: tuple[int, ...], name: str) -> Tensor:
    """A permute/transpose made contiguous: reads strided, writes sequential."""
    y = b.activation(f"{name}.out", shape, x)
    b.op(name, "copy", [part(x, x.nbytes, Pattern.STRIDED)], [y])
    _backward_to_input(b, x, y, name, "copy",
                       lambda gy: [part(gy, gy.nbytes, Pattern.STRIDED)])
    return y


# --- attention ------------------------------------------------------------------------------
@dataclass(frozen=True)
class AttentionShape:
    batch: int
    heads: int
    q_len: int
    kv_len: int
    head_dim: int
    causal: bool = False

    def bmm_flops(self) -> int:
        """One (q_len x head_dim) @ (head_dim x kv_len) product per batch and head."""
        return 2 * self.batch * self.heads * self.q_len * self.kv_len * self.head_dim


def attention(b: TraceBuilder, q: Tensor, k: Tensor, v: Tensor, s: AttentionShape,
              dropout_p: float, name: str) -> Tensor:
    """scaled_dot_product_attention. q, k and v name the storages they are views of (the same
    packed tensor for self-attention's in_proj, say). FLOPs count the full score matrix, as
    FlopCounterMode does, causal or not. Returns the output as (batch, heads, q_len, head_dim)."""
    q, k, v = (autocast_low(b, t) for t in (q, k, v))
    out_shape = (s.batch, s.heads, s.q_len, s.head_dim)
    if s.causal:  # counted in full, as FlopCounterMode does; remembered for the report
        b.causal_attention_flops += (2 + 5 if b.execution.attention == "fused" else 2 + 4) \
            * s.bmm_flops()
    if b.execution.attention == "fused":
        return _attention_fused(b, q, k, v, s, out_shape, name)
    return _attention_math(b, q, k, v, s, dropout_p, out_shape, name,
                           eager=b.execution.attention == "eager")


def _sources(*tensors: Tensor) -> list[Tensor]:
    out: list[Tensor] = []
    for t in tensors:
        if not any(t is u for u in out):
            out.append(t)
    return out


def _attention_fused(b, q, k, v, s: AttentionShape, out_shape, name) -> Tensor:
    """Memory-efficient attention: no score matrix in DRAM, dropout from a Philox seed, a
    logsumexp saved per row; the backward recomputes the scores (5 bmm-equivalents)."""
    srcs = _sources(q, k, v)
    out = b.activation(f"{name}.out", out_shape, *srcs)
    lse_len = -(-s.q_len // 32) * 32
    lse = b.activation(f"{name}.logsumexp", (s.batch, s.heads, lse_len), dtype="fp32")
    b.op(name, "attention", srcs, [out, lse], 2 * s.bmm_flops(), Unit.MATRIX,
         math_dtype=_matmul_math(b, False, out.dtype))

    def backward() -> None:
        gout = b.grad_of(out)
        if gout is None:
            return
        grads = [b.new_grad(t) for t in srcs]
        b.op(f"{name}.backward", "attention", [gout, *srcs, out, lse], grads, 5 * s.bmm_flops(),
             Unit.MATRIX, math_dtype=_matmul_math(b, False, out.dtype))
        for t, g in zip(srcs, grads, strict=True):
            b.accumulate(t, g)

    b.on_backward(backward)
    return out


def _attention_math(b, q_src, k_src, v_src, s: AttentionShape, dropout_p, out_shape,
                    name, eager: bool = False) -> Tensor:
    """The unfused paths. `math` (_scaled_dot_product_attention_math): scale q, bmm, softmax,
    dropout, bmm. `eager`, as Hugging Face's eager attention modules write it (BertSelfAttention,
    GPT2Attention._attn in transformers 4.x): bmm, divide the scores by sqrt(head_dim), mask
    them (a causal mask by torch.where, else the padding mask added), softmax, dropout, bmm:
    two more passes over the score matrix. q, k and v are strided views of their sources; the
    score matrix lives in DRAM.

    Eager, the views reach bmm through torch.matmul, which folds a 4-D operand's (batch, heads)
    dims into one bmm batch with `reshape`: a view where the two dims collapse into one stride,
    else a contiguous copy (torch.reshape's documented rule; at::native's _matmul_impl in
    aten/src/ATen/native/LinearAlgebra.cpp). A head split, view(b, s, h, d).permute(0, 2, 1, 3),
    collapses only when batch or heads is 1, so from batch 2 on q, k's transpose and v are each
    copied before their bmm, which reads (and saves for backward) the copy."""
    bh = s.batch * s.heads
    elem = DTYPE_BYTES[q_src.dtype]
    q_bytes = bh * s.q_len * s.head_dim * elem
    kv_bytes = bh * s.kv_len * s.head_dim * elem
    strided = Pattern.STRIDED
    md = _gemm_math(b, False, q_src.dtype, (s.q_len, s.kv_len, s.head_dim))
    srcs = _sources(q_src, k_src, v_src)
    v_grads: list[Tensor] = []

    copied = eager and s.batch > 1 and s.heads > 1  # matmul's reshape cannot stay a view
    if eager:  # q is read as matmul hands it to bmm; the scale comes after the bmm
        q = q_src
        q_read = bmm_operand(b, q_src, q_bytes, (bh, s.q_len, s.head_dim), copied,
                              f"{name}.q_copy")
    else:
        q = b.activation(f"{name}.q_scaled", (bh, s.q_len, s.head_dim), q_src)
        b.op(f"{name}.scale", "elementwise", [part(q_src, q_bytes, strided)], [q])
        q_read = q
    k_read = bmm_operand(b, k_src, kv_bytes, (bh, s.head_dim, s.kv_len), copied,
                          f"{name}.k_copy")
    scores = b.activation(f"{name}.scores", (bh, s.q_len, s.kv_len), q, k_src)
    b.op(f"{name}.qk", "matmul", [q_read, k_read], [scores], s.bmm_flops(), Unit.MATRIX,
         math_dtype=md)

    def backward_qk() -> None:
        gs = b.grad_of(scores)
        if gs is None:
            return
        q_shape = (bh, s.q_len, s.head_dim)
        gq = b.temporary(f"grad({name}.q_scaled)", q_shape)
        b.op(f"{name}.qk.grad_q", "matmul", [gs, k_read], [gq], s.bmm_flops(), Unit.MATRIX,
             math_dtype=md)
        gk = b.temporary(f"grad({name}.k)", (bh, s.kv_len, s.head_dim))
        b.op(f"{name}.qk.grad_k", "matmul", [gs, q_read], [gk], s.bmm_flops(), Unit.MATRIX,
             math_dtype=md)
        if eager:
            gqs = gq
        else:
            gqs = b.temporary(f"grad({name}.q)", q_shape)
            b.op(f"{name}.scale.backward", "elementwise", [gq], [gqs])
        # select/unbind backward: the q, k, v gradients are laid back into their sources
        grads = [b.new_grad(t) for t in srcs]
        b.op(f"{name}.grad_pack", "copy", [part(p, p.nbytes, strided) for p in [gqs, gk, *v_grads]],
             grads)
        for t, g in zip(srcs, grads, strict=True):
            b.accumulate(t, g)

    b.on_backward(backward_qk)
    if eager:
        scores = _eager_scale_and_mask(b, scores, s, name)
    probs_in = autocast_fp32(b, scores)
    probs = b.activation(f"{name}.probs", scores.shape, probs_in)
    b.op(f"{name}.softmax", "elementwise", [softmax_reads(probs_in, 3)], [probs])

    def backward_softmax() -> None:
        gp = b.grad_of(probs)
        if gp is None:
            return
        gs = b.new_grad(probs_in)
        softmax_backward(b, f"{name}.softmax", gp, probs, gs)
        b.accumulate(probs_in, gs)

    b.on_backward(backward_softmax)
    dropped = autocast_low(b, dropout(b, probs, dropout_p, f"{name}.dropout"))
    v_read = bmm_operand(b, v_src, kv_bytes, (bh, s.kv_len, s.head_dim), copied,
                          f"{name}.v_copy")
    out = b.activation(f"{name}.out", out_shape, dropped, v_src)
    b.op(f"{name}.av", "matmul", [dropped, v_read], [out], s.bmm_flops(), Unit.MATRIX,
         math_dtype=md)

    def backward_av() -> None:
        gout = b.grad_of(out)
        if gout is None:
            return
        gd = b.new_grad(dropped)
        b.op(f"{name}.av.grad_probs", "matmul", [gout, v_read], [gd], s.bmm_flops(),
             Unit.MATRIX, math_dtype=md)
        b.accumulate(dropped, gd)
        gv = b.temporary(f"grad({name}.v)", (bh, s.kv_len, s.head_dim))
        b.op(f"{name}.av.grad_v", "matmul", [dropped, gout], [gv], s.bmm_flops(), Unit.MATRIX,
             math_dtype=md)
        v_grads.append(gv)

    b.on_backward(backward_av)
    return out


def bmm_operand(b: TraceBuilder, src: Tensor, nbytes: int, shape: tuple[int, ...],
                copied: bool, name: str) -> Access | Tensor:
    """A head-split view of `src` as bmm reads it: the view itself, read in place, or a
    contiguous copy where the reshape before the bmm makes one (eager torch.matmul's:
    _attention_math; torch.einsum's: models/transformer_xl.py)."""
    if not copied:
        return part(src, nbytes, Pattern.STRIDED)
    out = b.activation(f"{name}.out", shape, src)
    b.op(name, "copy", [part(src, nbytes, Pattern.STRIDED)], [out])
    return out


def _eager_scale_and_mask(b: TraceBuilder, scores: Tensor, s: AttentionShape,
                          name: str) -> Tensor:
    """scores / sqrt(head_dim), then the mask: torch.where with the (q_len, kv_len) causal mask
    a decoder keeps as a bool buffer, or + the encoder's additive padding mask, one value per
    batch row and key. Dividing by a constant and the where each run backward as one pass over
    the gradient; an add hands its gradient on."""
    scaled = _scaled(b, scores, f"{name}.scale")
    masked = b.activation(f"{name}.masked", scores.shape, scaled)
    if s.causal:
        mask = b.buffer(f"{name}.causal_mask", (1, 1, s.q_len, s.kv_len), dtype="bool")
        b.op(f"{name}.mask", "elementwise", [mask, scaled], [masked])
        _backward_to_input(b, scaled, masked, f"{name}.mask", "elementwise",
                           lambda g: [mask, g])
        return masked
    pad = b.activation(f"{name}.padding_mask", (s.batch, 1, 1, s.kv_len), dtype=scores.dtype)
    return _sum(b, scaled, pad, masked, f"{name}.mask")


# --- losses ---------------------------------------------------------------------------------
def cross_entropy(b: TraceBuilder, logits: Tensor, target: Tensor, name: str) -> Tensor:
    """log_softmax then nll_loss (mean), as F.cross_entropy decomposes on CUDA."""
    logits = autocast_fp32(b, logits)
    logp = b.activation(f"{name}.log_softmax", logits.shape, logits)
    b.op(f"{name}.log_softmax", "elementwise", [softmax_reads(logits, 3)], [logp])
    loss = b.tensor(f"{name}.loss", (), Category.ACTIVATION, "fp32", requires_grad=True,
                    retained=True)
    rows = logits.numel // logits.shape[-1]
    elem = logits.nbytes // logits.numel
    total_weight = b.activation(f"{name}.total_weight", (), dtype="fp32")
    b.op(f"{name}.nll_loss", "loss", [target, gather(logp, rows * elem, elem)],
         [loss, total_weight])

    def backward() -> None:
        gl = b.grad_of(loss)
        glogp = b.temporary(f"grad({logp.name})", logp.shape)
        # nll_loss_backward: zero-fill, then one element per row
        b.op(f"{name}.nll_loss.backward", "loss", [gl, target, total_weight],
             [glogp, gather(glogp, rows * elem, elem)])
        gx = b.new_grad(logits)
        # (its sum is over grad alone: the output is read once)
        b.op(f"{name}.log_softmax.backward", "elementwise", [softmax_reads(glogp, 2), logp],
             [gx])
        b.accumulate(logits, gx)

    b.on_backward(backward)
    return loss


# --- convolutional --------------------------------------------------------------------------
def conv2d(b: TraceBuilder, x: Tensor, w: Tensor, bias: Tensor | None, stride: int, padding: int,
           name: str) -> Tensor:
    x, w, bias = autocast_low(b, x), autocast_low(b, w), autocast_low(b, bias)
    n, c_in, h, wd = x.shape
    c_out, _, kh, kw = w.shape
    ho, wo = window_output(h, kh, stride, padding), window_output(wd, kw, stride, padding)
    y = b.activation(f"{name}.out", (n, c_out, ho, wo), x, w,
                     *([bias] if bias is not None else []))
    flops = 2 * n * c_out * ho * wo * c_in * kh * kw
    reads = [x, w] + ([bias] if bias is not None else [])
    _mm(b, name, reads, [y], flops, kind="conv")

    def backward() -> None:
        gy = b.grad_of(y)
        if gy is None:
            return
        if x.requires_grad:
            gx = b.new_grad(x)
            _mm(b, f"{name}.grad_input", [gy, w], [gx], flops, kind="conv")
            b.accumulate(x, gx)
        if w.requires_grad:
            gw = b.new_grad(w)
            _mm(b, f"{name}.grad_weight", [gy, x], [gw], flops, kind="conv")
            b.accumulate(w, gw)
        if bias is not None:
            gb = b.new_grad(bias)
            b.op(f"{name}.grad_bias", "reduction", [gy], [gb])
            b.accumulate(bias, gb)

    b.on_backward(backward)
    return y


def max_pool2d(b: TraceBuilder, x: Tensor, kernel: int, stride: int, name: str,
               padding: int = 0) -> Tensor:
    n, c, h, w = x.shape
    ho, wo = window_output(h, kernel, stride, padding), window_output(w, kernel, stride, padding)
    y = b.activation(f"{name}.out", (n, c, ho, wo), x)
    idx = b.activation(f"{name}.indices", (n, c, ho, wo), dtype="int64")
    b.op(name, "elementwise", [x], [y, idx])
    # max_pool2d_with_indices_backward: zero-fill, scatter through the indices
    _backward_to_input(b, x, y, name, "elementwise", lambda gy: [gy, idx])
    return y


# --- decoder-only transformers --------------------------------------------------------------
def rms_norm(b: TraceBuilder, x: Tensor, w: Tensor, name: str) -> Tensor:
    """A fused RMSNorm (torch.nn.functional.rms_norm): saves the per-row 1/rms."""
    x = autocast_fp32(b, x)
    rows = x.numel // x.shape[-1]
    y = b.activation(f"{name}.out", x.shape, x, w)
    rstd = b.activation(f"{name}.rstd", (rows,), dtype="fp32")
    b.op(name, "norm", [*_row_norm_reads(x), w], [y, rstd])
    _norm_backward(b, name, x, y, [w], [x, rstd, w], row_threads=LAYER_NORM_ROW_THREADS)
    return y


def rotary(b: TraceBuilder, x: Tensor, cos: Tensor, sin: Tensor, name: str) -> Tensor:
    """x * cos + rotate_half(x) * sin, as one elementwise kernel each way."""
    y = b.activation(f"{name}.out", x.shape, x)
    b.op(name, "elementwise", [x, cos, sin], [y])
    _backward_to_input(b, x, y, name, "elementwise", lambda gy: [gy, cos, sin])
    return y


def silu_mul(b: TraceBuilder, gate: Tensor, up: Tensor, name: str) -> Tensor:
    """SwiGLU's silu(gate) * up: the silu output is a tensor of its own, as in eager PyTorch."""
    act = b.activation(f"{name}.silu", gate.shape, gate)
    b.op(f"{name}.silu", "elementwise", [gate], [act])
    _backward_to_input(b, gate, act, f"{name}.silu", "elementwise", lambda ga: [ga, gate])
    return _product(b, act, up, f"{name}.out", f"{name}.mul")


# --- residual networks ----------------------------------------------------------------------
def batch_norm_params(b: TraceBuilder, name: str, c: int
                      ) -> tuple[Tensor, Tensor, list[Tensor]]:
    """nn.BatchNorm2d(c)'s weight and bias, and its running statistics as buffers."""
    return (b.parameter(f"{name}.weight", (c,)), b.parameter(f"{name}.bias", (c,)),
            [b.buffer(f"{name}.running_mean", (c,)), b.buffer(f"{name}.running_var", (c,)),
             b.buffer(f"{name}.num_batches_tracked", (), "int64")])


def batch_norm2d(b: TraceBuilder, x: Tensor, w: Tensor, bias: Tensor, running: list[Tensor],
                 name: str) -> Tensor:
    """Training-mode BatchNorm (cuDNN): saves per-channel mean and inverse std, and updates the
    running statistics in place. Its kernels pass over the activations twice, once for the
    per-channel sums and once to apply them (forward: x; backward: grad(y) and x), so each
    op reads those twice: from the L2 the second time when they fit there (gpu/l2.py)."""
    c = x.shape[1]
    y = b.activation(f"{name}.out", x.shape, x, w, dtype=x.dtype)  # cuDNN: fp16 in, fp16 out
    mean = b.activation(f"{name}.save_mean", (c,), dtype="fp32")
    invstd = b.activation(f"{name}.save_invstd", (c,), dtype="fp32")
    b.op(name, "norm", [x, x, w, bias, *running], [y, mean, invstd, *running])
    _norm_backward(b, name, x, y, [w, bias], [x, w, mean, invstd], second_pass=[x])
    return y


def relu_(b: TraceBuilder, x: Tensor, name: str) -> Tensor:
    """nn.ReLU(inplace=True): writes over its input; the backward reads that storage."""
    y = b.inplace(x, f"{name}.out")
    b.op(name, "elementwise", [x], [y])
    _backward_to_input(b, x, y, name, "elementwise", lambda gy: [gy, y])
    return y


def add_(b: TraceBuilder, x: Tensor, y: Tensor, name: str) -> Tensor:
    """x += y: the sum lands in x's storage; its backward hands the gradient to both."""
    z = b.inplace(x, f"{name}.out")
    z.requires_grad = x.requires_grad or y.requires_grad
    return _sum(b, x, y, z, name)


def adaptive_avg_pool2d(b: TraceBuilder, x: Tensor, name: str,
                        size: tuple[int, int] = (1, 1)) -> Tensor:
    """nn.AdaptiveAvgPool2d(size): to 1x1 a reduction (ResNet's global pooling); to a larger
    size a pass that averages a window per output, a kernel even where the size is the input's
    own (VGG's 7x7 on a 7x7 map: ATen has no shortcut for it)."""
    n, c = x.shape[:2]
    y = b.activation(f"{name}.out", (n, c, *size), x)
    b.op(name, "reduction" if size == (1, 1) else "elementwise", [x], [y])
    _backward_to_input(b, x, y, name, "elementwise", lambda gy: [gy])
    return y


def scale_loss(b: TraceBuilder, loss: Tensor, name: str = "grad_scaler.scale") -> Tensor:
    """GradScaler.scale(loss): the backward starts from loss x scale."""
    y = b.tensor(name, loss.shape, Category.ACTIVATION, loss.dtype, requires_grad=True,
                 retained=True)
    b.op(name, "elementwise", [loss], [y])
    _backward_to_input(b, loss, y, name, "elementwise", lambda gy: [gy])
    return y
