"""Capture a user's PyTorch training step as our operator trace (needs `pip install .[torch]`).

The user's function takes a device and returns a zero-argument `step` that runs one training
step (zero_grad, forward, loss, backward, optimizer.step) on a model, batch and optimizer it made
on that device. We call it with the meta device: every op runs its shape function only, so no
data, no GPU and no FLOP is spent. The first step warms up (optimizer state appears); the second
is recorded under a TorchDispatchMode: each aten kernel becomes an op with the storages it reads
and writes (views are not kernels and are skipped), its FLOPs from FlopCounterMode's formulas,
and its phase (backward while autograd's engine runs, optimizer between the optimizer-step
hooks). Categories are settled afterwards: the optimizer's parameters, their .grad and its state.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

from simulator.errors import InputError
from simulator.workload.trace import Access, Category, Op, Phase, Tensor, Trace, Unit

_DTYPES = {"float64": "fp64", "float32": "fp32", "float16": "fp16", "bfloat16": "bf16",
           "int64": "int64", "int32": "int32", "int8": "int8", "uint8": "uint8", "bool": "bool"}
_KINDS = (("mm", "matmul"), ("addmm", "matmul"), ("bmm", "matmul"), ("baddbmm", "matmul"),
          ("convolution", "conv"), ("scaled_dot_product", "attention"), ("norm", "norm"),
          ("embedding", "embedding"), ("nll_loss", "loss"), ("_foreach", "optimizer"),
          ("copy", "copy"), ("clone", "copy"), ("sum", "reduction"), ("mean", "reduction"),
          ("dropout_backward", "elementwise"), ("dropout", "dropout"))


def op_kind(name: str) -> str:
    """Our op kind for an aten op (its overload packet's name without `aten.`)."""
    return next((k for key, k in _KINDS if key in name), "elementwise")


def load_function(target: str):
    """MODULE:FUNCTION, MODULE importable or a path to a .py file."""
    if ":" not in target:
        raise InputError(f"expected MODULE:FUNCTION, got '{target}'")
    module_name, func_name = target.rsplit(":", 1)
    try:
        if module_name.endswith(".py"):
            path = Path(module_name)
            sys.path.insert(0, str(path.parent.resolve()))
            module = importlib.import_module(path.stem)
        else:
            sys.path.insert(0, str(Path.cwd()))
            module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InputError(f"cannot import '{module_name}': {exc}") from None
    func = getattr(module, func_name, None)
    if not callable(func):
        raise InputError(f"'{module_name}' has no function '{func_name}'")
    return func


MULTI_TENSOR = ("_foreach", "_fused", "_amp_foreach")  # ATen's multi-tensor kernels


def capture(make_step, name: str) -> Trace:
    try:
        import torch
        import torch.optim.optimizer as optim_hooks
        from torch.multiprocessing.reductions import StorageWeakRef
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_flatten
        from torch.utils.flop_counter import flop_registry
    except ImportError:
        raise InputError("capture needs PyTorch: pip install '.[torch]'") from None

    step = make_step(torch.device("meta"))
    step()  # the first step creates the optimizer state; the second is the steady state

    tensors: list[Tensor] = []
    by_storage: dict[int, tuple[Any, Tensor]] = {}
    ops: list[Op] = []
    optimizers: list = []
    state = {"phase": None}

    def ours(t, created: bool) -> Tensor:
        storage = t.untyped_storage()
        ref = StorageWeakRef(storage)
        hit = by_storage.get(ref.cdata)
        if hit is not None and not hit[0].expired():
            return hit[1]
        dtype = _DTYPES.get(str(t.dtype).replace("torch.", ""))
        if dtype is None:
            raise InputError(f"capture: unsupported dtype {t.dtype}")
        elem = t.element_size()
        phase = state["phase"] or Phase.FORWARD
        category = (Category.BUFFER if not created else Category.ACTIVATION
                    if phase is Phase.FORWARD else Category.TEMPORARY)
        mine = Tensor(len(tensors), f"storage{len(tensors)}", (storage.nbytes() // elem,),
                      dtype, category)
        tensors.append(mine)
        by_storage[ref.cdata] = (ref, mine)
        return mine

    def torch_tensors(value) -> list:
        return [t for t in tree_flatten(value)[0] if isinstance(t, torch.Tensor)]

    def access(t, created: bool) -> Access:
        return Access(ours(t, created), t.numel() * t.element_size())

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            schema = func._schema
            out = func(*args, **kwargs)
            returns_views = all(r.alias_info is not None and not r.alias_info.is_write
                                for r in schema.returns) and schema.returns
            mutated = [a.name for a in schema.arguments
                       if a.alias_info is not None and a.alias_info.is_write]
            if returns_views and not mutated:
                return out  # a view: metadata, no kernel
            phase = state["phase"] or (Phase.BACKWARD if torch._C._current_graph_task_id() != -1
                                       else Phase.FORWARD)
            state_phase, state["phase"] = state["phase"], phase
            written = torch_tensors(out)
            for i, a in enumerate(schema.arguments):
                if a.name in mutated:
                    written += torch_tensors(args[i] if i < len(args) else kwargs.get(a.name))
            reads = [access(t, created=False) for t in torch_tensors((args, kwargs))]
            writes = [access(t, created=True) for t in written]
            state["phase"] = state_phase
            packet = func._overloadpacket
            flops = 0
            if packet in flop_registry:
                flops = int(flop_registry[packet](*args, **kwargs, out_val=out))
            name = str(packet).replace("aten.", "")
            kind = op_kind(name)
            dtype = next((a.tensor.dtype for a in writes
                          if a.tensor.dtype.startswith(("fp", "bf"))), "fp32")
            layout = ""
            if kind == "conv" and args and isinstance(args[0], torch.Tensor) and \
                    args[0].dim() == 4:
                nhwc = args[0].is_contiguous(memory_format=torch.channels_last)
                layout = "nhwc" if nhwc and not args[0].is_contiguous() else "nchw"
            # a multi-tensor kernel (_foreach_*, _fused_adam_, the grad scaler's unscale) takes
            # its lists first
            lists = args[0] if name.startswith(MULTI_TENSOR) and args and \
                isinstance(args[0], (list, tuple)) else None
            ops.append(Op(len(ops), name, kind, phase, flops, _unique(reads),
                          _unique(writes), dtype, Unit.MATRIX if flops else Unit.VECTOR,
                          layout=layout, list_length=len(lists) if lists else 1))
            return out

    def pre_hook(optimizer, args, kwargs):
        state["phase"] = Phase.OPTIMIZER
        optimizers.append(optimizer)

    def post_hook(optimizer, args, kwargs):
        state["phase"] = None

    h1 = optim_hooks.register_optimizer_step_pre_hook(pre_hook)
    h2 = optim_hooks.register_optimizer_step_post_hook(post_hook)
    try:
        with Recorder():
            step()
    finally:
        h1.remove()
        h2.remove()
    if not optimizers:
        raise InputError("capture: the step ran no optimizer.step()")
    opt = optimizers[0]

    def category_of(t, category: Category) -> list[Tensor]:
        hit = by_storage.get(StorageWeakRef(t.untyped_storage()).cdata)
        if hit is None:
            return []
        hit[1].category = category
        return [hit[1]]

    params: list[Tensor] = []
    state_tensors: list[Tensor] = []
    for group in opt.param_groups:
        for p in group["params"]:
            params += category_of(p, Category.PARAMETER)
            if p.grad is not None:
                category_of(p.grad, Category.GRADIENT)
            for v in opt.state.get(p, {}).values():
                if isinstance(v, torch.Tensor) and v.device.type == "meta":
                    state_tensors += category_of(v, Category.OPTIMIZER_STATE)
    for t in params:
        t.requires_grad = True
    capture.last_optimizer = type(opt).__name__  # for the trace file's header
    for op in ops:  # what a forward op makes from no tensor at all is the batch
        if op.phase is Phase.FORWARD and not op.reads:
            for a in op.writes:
                if a.tensor.category is Category.ACTIVATION:
                    a.tensor.category = Category.INPUT
    return Trace(name, ops, tensors, params, state_tensors)


def _unique(accesses: list[Access]) -> tuple[Access, ...]:
    seen: dict[int, Access] = {}
    for a in accesses:
        if a.tensor.id not in seen or a.nbytes > seen[a.tensor.id].nbytes:
            seen[a.tensor.id] = a
    return tuple(seen.values())
