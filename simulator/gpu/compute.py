"""Compute ceilings: which peak an op's arithmetic runs at, per data type and execution unit.

Matrix ops (matmul, convolution, attention) run on tensor cores where the hardware has them for
that type; fp32 matmuls use CUDA cores unless TF32 is allowed (the op's math_dtype says tf32).
Where a unit is missing (Turing has no BF16 or TF32 tensor cores; RDNA2 has no matrix units) the
op falls back to the next unit listed, and the report names the ceiling it used.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.config.hardware import Hardware
from simulator.errors import InputError
from simulator.units import TERA
from simulator.workload.trace import Op, Unit

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
    if not any(hw.peak_tflops.values()):
        raise InputError("no compute peaks: this file describes a memory system only; expected "
                         "a 'compute' block (the dram command needs none)", file=hw.path,
                         path="$.compute")
    tried = ", ".join(table.get(math_dtype, ("fp32",)))
    raise InputError(f"no compute peak for {math_dtype} on the {unit.value} unit; expected a "
                     f"number for one of: {tried}", file=hw.path, path="$.compute.peak_tflops")


def op_ceiling(hw: Hardware, op: Op) -> Ceiling:
    return ceiling(hw, op.unit, op.math_dtype or op.dtype)
