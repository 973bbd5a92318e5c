"""The operator-level trace of one training step: tensors, the ops that read and write them.

A trace is plain data. It knows nothing of DRAM timing; the replay turns its accesses into
traffic, and `memory.py` turns tensor lifetimes into live bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum

DTYPE_BYTES = {
    "fp64": 8, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1,
    "int64": 8, "int32": 4, "int8": 1, "uint8": 1, "bool": 1,
}
FLOAT_DTYPES = ("fp64", "fp32", "fp16", "bf16")


class Phase(str, Enum):
    FORWARD = "forward"    # forward pass, loss included
    BACKWARD = "backward"
    OPTIMIZER = "optimizer"


PHASES = tuple(Phase)


class Category(str, Enum):
    """What a tensor is for; the memory report groups live bytes by these."""

    PARAMETER = "parameters"
    GRADIENT = "gradients"              # parameter gradients (.grad)
    OPTIMIZER_STATE = "optimizer_state"
    BUFFER = "buffers"                  # module buffers: BatchNorm running statistics
    INPUT = "inputs"                    # the batch and its labels
    ACTIVATION = "activations"          # forward outputs, saved or not
    TEMPORARY = "temporaries"           # activation gradients, optimizer scratch


# Categories that stay allocated after their last use within the step.
PERSISTENT = frozenset({Category.PARAMETER, Category.GRADIENT, Category.OPTIMIZER_STATE,
                        Category.BUFFER})


class Unit(str, Enum):
    """Which execution unit does the op's FLOPs: matrix (tensor cores) or vector (CUDA cores)."""

    MATRIX = "matrix"
    VECTOR = "vector"


@dataclass(eq=False)
class Tensor:
    """One storage, or a view of one (`alias_of`: an in-place op's result, which autograd
    treats as a new tensor). Identity matters: two storages are two allocations."""

    id: int
    name: str
    shape: tuple[int, ...]
    dtype: str
    category: Category
    requires_grad: bool = False
    retained: bool = False  # the training loop holds it (logits, loss) until the step ends
    alias_of: Tensor | None = None  # the storage this tensor shares (None: its own)

    @property
    def storage(self) -> Tensor:
        return self.alias_of if self.alias_of is not None else self

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * DTYPE_BYTES[self.dtype]

    def __repr__(self) -> str:
        return f"Tensor({self.name}, {self.shape}, {self.dtype})"


class Pattern(str, Enum):
    SEQUENTIAL = "sequential"
    STRIDED = "strided"
    GATHER = "gather"


@dataclass(frozen=True)
class Access:
    """Bytes of one tensor that an op reads or writes, and how they are laid out in time."""

    tensor: Tensor
    nbytes: int
    pattern: Pattern = Pattern.SEQUENTIAL
    # a gather's contiguous bytes per index (an embedding row: d_model x element size), which
    # it reads as one run of lines at one place; 0: one 128 B line at each place
    run_bytes: int = 0
    # a row kernel's reads of each row (its last dim): the passes after the first follow it
    # within the block that owns the row (layer norm: moments, then normalize; softmax: max,
    # sum, write), so they find the row in the L2 while the rows in flight fit it (gpu/l2.py).
    # `nbytes` counts one pass; `block_threads`: the threads of a row's block
    passes: int = 1
    block_threads: int = 0


@dataclass
class Op:
    index: int
    name: str
    # matmul, conv, attention, elementwise, dropout, norm, reduction, copy, embedding, loss,
    # optimizer
    kind: str
    phase: Phase
    flops: int       # FlopCounterMode convention: matmul, convolution and attention only
    reads: tuple[Access, ...]
    writes: tuple[Access, ...]
    dtype: str       # the data type of its arithmetic
    unit: Unit
    math_dtype: str = ""  # set when the matrix unit runs another type (tf32 for fp32 convolutions)
    layout: str = ""      # a convolution's activation layout: nchw or nhwc (channels_last);
    # tn: a matmul whose operands both run along K (a linear layer's forward)
    # tensors in each list a multi-tensor (foreach) kernel walks in step; 1: each operand one
    # tensor; 0: not known (a trace file that does not say), read off the shapes
    list_length: int = 0
    # the host reads what the op computed (`.item()`, a Python branch on a tensor): it waits
    # for the GPU to finish the op before it dispatches the next one
    host_waits: bool = False

    @property
    def bytes_read(self) -> int:
        return sum(a.nbytes for a in self.reads)

    @property
    def bytes_written(self) -> int:
        return sum(a.nbytes for a in self.writes)

    @property
    def bytes_moved(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def arithmetic_intensity(self) -> float:
        """FLOP per DRAM byte, counting each byte the op reads or writes once."""
        return self.flops / self.bytes_moved if self.bytes_moved else math.inf


@dataclass
class Trace:
    """One training step, in execution order."""

    workload: str
    ops: list[Op]
    tensors: list[Tensor]
    parameters: list[Tensor]
    optimizer_state: list[Tensor]
    # tensors the step holds past their last access, mapped to the op index that releases them
    releases: dict[int, int] = field(default_factory=dict)
    # attention FLOPs under a causal mask: counted in full (FlopCounterMode's convention), though
    # a kernel that skips the masked blocks does about half of them
    causal_attention_flops: int = 0
    # each op dispatched by the host as eager PyTorch does (gpu/dispatch.py); False: the
    # kernels launched ahead by a captured CUDA graph or a native program
    eager: bool = True
    # the values its kernels compute on (random, or zeros: a benchmark fed torch.zeros), which
    # set the clock a power-capped card holds (gpu/clocks.py)
    operand_values: str = "random"
    # ids of the .grad tensors allocated before the step and kept after it (zero_grad with
    # set_to_none=False fills them with zeros instead of freeing them)
    held_gradients: tuple[int, ...] = ()

    @property
    def parameter_count(self) -> int:
        return sum(p.numel for p in self.parameters)

    @property
    def parameter_bytes(self) -> int:
        return sum(p.nbytes for p in self.parameters)

    @property
    def optimizer_state_bytes(self) -> int:
        return sum(t.nbytes for t in self.optimizer_state)

    @property
    def host_wait_count(self) -> int:
        """Results the host reads per step, each a wait for the GPU (Op.host_waits)."""
        return sum(op.host_waits for op in self.ops)

    def flops(self, phase: Phase | None = None) -> int:
        return sum(op.flops for op in self.ops if phase is None or op.phase == phase)

    def ops_in(self, phase: Phase) -> list[Op]:
        return [op for op in self.ops if op.phase == phase]
