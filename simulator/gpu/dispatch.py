"""The host's share of a step: eager PyTorch's time to dispatch each op and launch its kernel.

In eager mode every op passes through Python, the dispatcher, autograd and the CUDA runtime
before its kernel reaches the GPU. The host runs ahead of the GPU while kernels are long, so
the cost hides; when kernels are shorter than it, the GPU waits on the host (small batches,
small models, the optimizer's many small steps). A lone op timed between two CUDA events takes
at least this long however small its kernel, which is why the measured floors below exist.

Host time per op, by op kind, in microseconds: the 5th percentile of lone-op times on the T4
host of NeuSight's kernel measurements (PyTorch 2.1, `benchmarks/measured/t4_fp32_*.csv`), less
the GPU's launch gap and a tiny kernel's few microseconds. The H200 host of
`benchmarks/measured/h200/` (PyTorch 2.11, four years later) measures the same floors within
about 20 % (elementwise 23-26 us, softmax 23, mm 29-32, layer norm 42), so the figures are
the framework's and carry across cards; a much faster or slower host CPU shifts them.
Streamed, the host moves on after `issue_s` of it; the kernel is ready `dispatch_s` after
the op's call.
"""

from __future__ import annotations

from simulator.workload.trace import Op

# Host microseconds per op of each kind (see the module docstring for where they come from).
DISPATCH_US = {
    "elementwise": 22.0,  # T4: add/mul/tanh 25-26 us lone
    "copy": 22.0,         # H200: clone 26 us lone, as elementwise
    "dropout": 29.5,      # H200: F.dropout 30.7 us lone where add and mul take 23.0-23.3 (the
    #                       smallest of kernels.csv): native_dropout's RNG offset and its mask
    "reduction": 26.0,    # T4: softmax 33 us lone; H200: softmax 23, sum 27
    "norm": 44.0,         # T4: LayerNorm 48 us lone (a module call: Python adds to the op)
    "matmul": 32.0,       # T4: bmm 36 us lone; H200: mm 29-32 (cuBLAS's heuristics run on the host)
    "conv": 36.0,         # H200: the smallest cuDNN convolutions 36-45 us lone
    "attention": 32.0,    # one fused kernel through the dispatcher, as a matmul
    "embedding": 22.0,    # an index gather, as elementwise
    "loss": 44.0,         # log-softmax and NLL: two kernels
    "optimizer": 44.0,    # a foreach op: one launch per chunk of up to ~100 tensors
}
DEFAULT_DISPATCH_US = 26.0  # an op of a kind not listed: a generic ATen op

# The share of that time the host is busy with the op: issued back to back, ops leave the
# host this much faster than one alone reaches the GPU (the rest is latency the next ops'
# dispatch overlaps). Streamed over lone time on the H200 host, 1000 ops each
# (benchmarks/measured/h200/dispatch.csv: elementwise 5.0 of 10.5-11.0 us, mm 11.6 of 19.3).
ISSUE_SHARE = {"elementwise": 0.47, "copy": 0.49, "reduction": 0.48, "norm": 0.62,
               "matmul": 0.62, "conv": 0.67}
DEFAULT_ISSUE_SHARE = 0.5   # a kind not measured: about the measured ones' middle


def dispatch_s(op: Op, eager: bool = True) -> float:
    """Seconds from the op's call to its kernel being ready to launch, for an op alone; none
    when a captured CUDA graph (or a native program) launches the kernels (`eager` False)."""
    return DISPATCH_US.get(op.kind, DEFAULT_DISPATCH_US) * 1e-6 if eager else 0.0


def issue_s(op: Op, eager: bool = True) -> float:
    """Seconds the host is busy with the op before it moves to the next (within dispatch_s)."""
    return dispatch_s(op, eager) * ISSUE_SHARE.get(op.kind, DEFAULT_ISSUE_SHARE)
