"""What the GPU runtime holds on the card before a training step allocates anything: the
driver's context (with the kernels it loads) and the math libraries' workspaces. A step fits
only in the capacity less this reserve: an out-of-memory error counts both.

Per card family, each figure with a public source:
- NVIDIA context, 426 MiB: PyTorch 2.10 with CUDA 13.0 on an RTX 6000 Ada, after its first
  CUDA call (nvidia-smi, https://github.com/unslothai/unsloth-zoo/pull/1053). Lazy module
  loading (CUDA >= 11.7, PyTorch's default since 1.13) keeps it near 300-430 MB: 287 MB
  measured in https://github.com/pytorch/pytorch/pull/86509, "around 400MB" in
  https://github.com/pytorch/pytorch/issues/109888; a B200 holds 612 MiB
  (https://github.com/unslothai/unsloth/pull/8669). The largest figure of the GDDR6
  generation is taken, so that a verdict of "fits" does not rest on the smallest.
- NVIDIA workspaces: PyTorch's cuBLAS default, CUBLAS_WORKSPACE_CONFIG ":4096:2:16:8"
  (2 x 4 MiB + 8 x 16 KiB = 8.125 MiB) before Hopper, ":4096:8" (32 MiB) on Hopper and later,
  plus cuBLASLt's 1 MiB (aten/src/ATen/cuda/CublasHandlePool.cpp, getChosenWorkspaceSize;
  https://pytorch.org/docs/stable/notes/randomness.html documents the variable).
- AMD (ROCm): PyTorch's HIP initialisation holds more than CUDA's
  (https://github.com/vllm-project/vllm/pull/43236), with no published figure: the NVIDIA
  context and hipBLAS's default workspace, the same ":4096:2:16:8", stand as a lower bound.
cuDNN's convolution workspaces are not here: PyTorch takes them from the caching allocator
per call, and they are part of the step.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.units import MiB

CONTEXT_BYTES = 426 * MiB
CUBLAS_WORKSPACE_BYTES = (4096 * 2 + 16 * 8) * 1024      # ":4096:2:16:8"
CUBLAS_WORKSPACE_HOPPER_BYTES = 4096 * 8 * 1024          # ":4096:8", sm 9.0 and later
CUBLASLT_WORKSPACE_BYTES = 1 * MiB
# chips whose cuBLAS workspace is the larger one (GH100 and later data-center parts)
_LARGE_WORKSPACE_CHIPS = ("GH", "GB")


@dataclass(frozen=True)
class RuntimeReserve:
    """Bytes the runtime holds on the card, and where each figure comes from."""

    context_bytes: int
    workspace_bytes: int
    source: str

    @property
    def total_bytes(self) -> int:
        return self.context_bytes + self.workspace_bytes


def runtime_reserve(vendor: str, chip: str) -> RuntimeReserve:
    """The reserve of a card by its family (vendor, and the chip for the workspace size)."""
    large = chip.upper().startswith(_LARGE_WORKSPACE_CHIPS)
    workspace = (CUBLAS_WORKSPACE_HOPPER_BYTES if large else CUBLAS_WORKSPACE_BYTES) \
        + CUBLASLT_WORKSPACE_BYTES
    if vendor == "AMD":
        return RuntimeReserve(CONTEXT_BYTES, workspace,
                              "ROCm: the CUDA context and workspace figures as a lower bound "
                              "(simulator/config/runtime.py)")
    return RuntimeReserve(CONTEXT_BYTES, workspace,
                          "CUDA context with lazy loading, 426 MiB, and PyTorch's cuBLAS and "
                          "cuBLASLt workspaces (simulator/config/runtime.py)")
