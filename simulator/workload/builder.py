"""Records a training step the way PyTorch's autograd runs it.

Layer functions (layers.py) emit their forward op and push a backward closure on a tape;
`backward()` runs the tape in reverse, which is the order autograd's engine follows for the
sequential graphs we generate. Gradients that reach a tensor twice are summed by an extra op, as
autograd's input buffers do, and the first gradient of a parameter becomes its `.grad` in place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from simulator.config.workload import Execution
from simulator.workload.trace import (
    DTYPE_BYTES,
    FLOAT_DTYPES,
    Access,
    Category,
    Op,
    Pattern,
    Phase,
    Tensor,
    Trace,
    Unit,
)

AccessLike = Tensor | Access
# the name before a kept gradient's own of each fill kernel zero_grad(set_to_none=False) runs
ZERO_GRAD_PREFIX = "zero_grad."


def _access(a: AccessLike) -> Access:
    return a if isinstance(a, Access) else Access(a, a.nbytes)


class TraceBuilder:
    def __init__(self, workload: str, dtype: str, execution: Execution | None = None):
        self.workload = workload
        self.execution = execution or Execution()
        # gradients of slices of a packed parameter, waiting to be concatenated
        self.slice_grads: dict[int, list[Tensor]] = {}
        self.dtype = dtype  # the default data type of activations and parameters
        self.phase = Phase.FORWARD
        self.ops: list[Op] = []
        self.tensors: list[Tensor] = []
        self.parameters: list[Tensor] = []
        self.optimizer_state: list[Tensor] = []
        self.releases: dict[int, int] = {}
        self.causal_attention_flops = 0  # FLOPs (forward and backward) of causal attention
        self.op_prefix = ""  # names ops of one micro-batch apart from another's
        self.cast_cache: dict[int, Tensor] = {}  # autocast's per-forward copies of weights
        self.quant_scales: dict[int, Tensor] = {}  # int8 weight -> its per-channel scales
        self._by_name: dict[str, Tensor] = {}
        self._tape: list[Callable[[], None]] = []
        self._grads: dict[int, Tensor] = {}
        self._shared_grads: set[int] = set()
        self.held_gradients: list[Tensor] = []  # .grad tensors zero_grad keeps (zero_grad: zeros)

    # --- tensors -------------------------------------------------------------------------
    def tensor(self, name: str, shape: Iterable[int], category: Category, dtype: str | None = None,
               requires_grad: bool = False, retained: bool = False) -> Tensor:
        t = Tensor(len(self.tensors), name, tuple(int(s) for s in shape), dtype or self.dtype,
                   category, requires_grad, retained)
        self.tensors.append(t)
        return t

    def parameter(self, name: str, shape: Iterable[int], matmul_weight: bool = False) -> Tensor:
        """A parameter by name: a later micro-batch asking again gets the same tensor. With int8
        weight quantization a matmul or convolution weight is stored as frozen int8 with one
        fp32 scale per output channel (a buffer), dequantized where it is used."""
        found = self._by_name.get(name)
        if found is not None:
            return found
        shape = tuple(shape)
        if matmul_weight and self.execution.weight_quantization == "int8":
            w = self._persistent(name, shape, Category.PARAMETER, "int8")
            w.requires_grad = False
            self.quant_scales[w.id] = self.buffer(f"{name}.scale", (shape[0],), "fp32")
            return w
        return self._persistent(name, shape, Category.PARAMETER, None)

    def _persistent(self, name: str, shape: Iterable[int], category: Category,
                    dtype: str | None) -> Tensor:
        found = self._by_name.get(name)
        if found is not None:
            return found
        t = self.tensor(name, shape, category, dtype,
                        requires_grad=category is Category.PARAMETER)
        self._by_name[name] = t
        if category is Category.PARAMETER:
            self.parameters.append(t)
        return t

    def activation(self, name: str, shape: Iterable[int], *inputs: Tensor,
                   dtype: str | None = None) -> Tensor:
        """A forward output: it needs a gradient when any input does; its type is the widest
        floating type among the inputs (type promotion) unless given."""
        if dtype is None:
            floats = [t.dtype for t in inputs if t.dtype in FLOAT_DTYPES]
            dtype = max(floats, key=lambda d: DTYPE_BYTES[d]) if floats else self.dtype
        return self.tensor(name, shape, Category.ACTIVATION, dtype,
                           requires_grad=any(t.requires_grad for t in inputs))

    def temporary(self, name: str, shape: Iterable[int], dtype: str | None = None) -> Tensor:
        return self.tensor(name, shape, Category.TEMPORARY, dtype)

    def inplace(self, x: Tensor, name: str) -> Tensor:
        """The result of an in-place op on x: a new tensor for autograd, x's storage for memory."""
        t = self.tensor(name, x.shape, x.category, x.dtype, requires_grad=x.requires_grad,
                        retained=x.retained)
        t.alias_of = x.storage
        return t

    def buffer(self, name: str, shape: Iterable[int], dtype: str | None = None) -> Tensor:
        return self._persistent(name, shape, Category.BUFFER, dtype)

    def release_at(self, tensor: Tensor, op_index: int) -> None:
        """Keep `tensor` allocated until op `op_index` (a Python variable still holds it)."""
        self.releases[tensor.id] = op_index

    # --- ops -------------------------------------------------------------------------------
    def op(self, name: str, kind: str, reads: Iterable[AccessLike], writes: Iterable[AccessLike],
           flops: int = 0, unit: Unit = Unit.VECTOR, dtype: str | None = None,
           math_dtype: str = "", layout: str = "", list_length: int = 1,
           host_waits: bool = False) -> Op:
        writes = tuple(_access(a) for a in writes)
        if dtype is None:  # the type of what it computes: its first floating output's
            dtype = next((a.tensor.dtype for a in writes if a.tensor.dtype in FLOAT_DTYPES),
                         self.dtype)
        op = Op(len(self.ops), self.op_prefix + name, kind, self.phase, int(flops),
                tuple(_access(a) for a in reads), writes, dtype, unit, math_dtype, layout,
                list_length, host_waits)
        self.ops.append(op)
        return op

    # --- autograd -------------------------------------------------------------------------
    def on_backward(self, fn: Callable[[], None]) -> None:
        self._tape.append(fn)

    def grad_of(self, t: Tensor) -> Tensor | None:
        return self._grads.get(t.id)

    def new_grad(self, t: Tensor, name: str | None = None) -> Tensor:
        """A tensor to hold one gradient contribution for `t`.

        The first contribution to a parameter becomes its .grad (AccumulateGrad steals it)
        unless zero_grad kept the .grad, which the contribution is added into; everything else
        is a temporary.
        """
        is_new_param_grad = (t.category is Category.PARAMETER and t.id not in self._grads
                             and self.execution.zero_grad == "none")
        cat = Category.GRADIENT if is_new_param_grad else Category.TEMPORARY
        return self.tensor(name or f"grad({t.name})", t.shape, cat, t.dtype)

    def accumulate(self, t: Tensor, g: Tensor, share: bool = False) -> None:
        """Add gradient contribution `g` to `t`'s gradient.

        `share=True` passes the same tensor on to another input (the backward of an add does);
        a later sum into a shared gradient is then out of place, as autograd does.
        """
        if not t.requires_grad:
            return
        old = self._grads.get(t.id)
        if old is None and t.category is Category.PARAMETER \
                and self.execution.zero_grad == "zeros":
            old = self._held_grad(t)  # AccumulateGrad adds into the zeroed .grad in place
        if old is None:
            self._grads[t.id] = g
            if share:
                self._shared_grads.add(g.id)
            return
        if old.id in self._shared_grads:
            out = self.tensor(f"grad({t.name})", t.shape, old.category, t.dtype)
            self.op(f"{t.name}.grad_accumulate", "elementwise", [old, g], [out])
            self._grads[t.id] = out
        else:
            self.op(f"{t.name}.grad_accumulate", "elementwise", [old, g], [old])
        if share:
            self._shared_grads.add(g.id)

    def _held_grad(self, p: Tensor) -> Tensor:
        """The .grad zero_grad(set_to_none=False) left on parameter `p`: allocated before the
        step, zeros until the backward adds into it."""
        g = self.tensor(f"{p.name}.grad", p.shape, Category.GRADIENT, p.dtype)
        self._grads[p.id] = g
        self.held_gradients.append(g)
        return g

    def zero_grad(self) -> None:
        """optimizer.zero_grad() with set_to_none=False: each kept .grad filled with zeros by a
        kernel of its own (the loop over parameters runs in Python)."""
        for g in self.held_gradients:
            self.op(f"{ZERO_GRAD_PREFIX}{g.name}", "elementwise", [], [g])

    def checkpointed(self, level: str, fn: Callable[[], Tensor]) -> Tensor:
        """Run fn (a block's forward) under torch.utils.checkpoint when the workload asks for
        this level of recomputation: its inner activations are not kept for the backward pass,
        which runs fn again (ops marked recompute/) right before fn's own backward."""
        if self.execution.checkpointing != level:
            return fn()
        outer = self._tape
        self._tape = []
        y = fn()
        self._tape = outer  # nothing inside fn is saved for backward

        def backward() -> None:
            gy = self.grad_of(y)
            if gy is None:
                return
            outer_tape, outer_prefix, outer_cache = self._tape, self.op_prefix, self.cast_cache
            self._tape, self.op_prefix = [], outer_prefix + "recompute/"
            self.cast_cache = {}  # the recomputation runs under a fresh autocast region
            y2 = fn()
            self.op_prefix, self.cast_cache = outer_prefix, outer_cache
            inner, self._tape = self._tape, outer_tape
            self._grads[y2.id] = gy
            for step in reversed(inner):
                step()

        self.on_backward(backward)
        return y

    def backward(self, loss: Tensor) -> None:
        """loss.backward(): seed the gradient with ones and run the tape in reverse. Called once
        per micro-batch: later calls add into the .grad tensors the first one created."""
        self.phase = Phase.BACKWARD
        seed = self.temporary(f"grad({loss.name})", loss.shape, loss.dtype)
        self.op("loss.backward_seed", "elementwise", [], [seed])
        self._grads[loss.id] = seed
        for fn in reversed(self._tape):
            fn()
        self._tape.clear()

    def param_grad(self, p: Tensor) -> Tensor:
        g = self._grads.get(p.id)
        if g is None:
            raise RuntimeError(f"parameter {p.name} received no gradient")
        return g

    def trace(self) -> Trace:
        return Trace(self.workload, self.ops, self.tensors, self.parameters,
                     self.optimizer_state, self.releases, self.causal_attention_flops,
                     eager=not self.execution.cuda_graphs,
                     operand_values=self.execution.operand_values,
                     held_gradients=tuple(g.id for g in self.held_gradients))


def gather(t: Tensor, nbytes: int, run_bytes: int = 0) -> Access:
    """`nbytes` of `t` read or written at scattered places, `run_bytes` contiguous at each."""
    return Access(t, nbytes, Pattern.GATHER, run_bytes)


def part(t: Tensor, nbytes: int, pattern: Pattern = Pattern.SEQUENTIAL) -> Access:
    return Access(t, nbytes, pattern)
