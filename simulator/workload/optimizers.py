"""Optimizer steps as PyTorch's torch.optim runs them on CUDA: state, kernels, traffic.

Each optimizer is written once, as the list of kernels its `foreach` path launches (one per
list op: PyTorch's default on CUDA). `for_loop` (the single-tensor path) runs the same kernels
parameter by parameter; its Python variable for the last temporary (Adam's `denom`, RMSprop's
`avg`, Adagrad's `std`) keeps that tensor alive until the next parameter's is assigned, which is
why the single-tensor loop can hold three parameter-sized temporaries at once. `fused` is one
kernel that reads every tensor once and writes what it updates (PyTorch ships fused Adam, AdamW,
SGD and Adagrad; for the others this models what such a kernel would move). The `step` counters
of for_loop and foreach live on the host (capturable=False) and cost no device traffic; fused
keeps them on the device and increments them with one more kernel.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from simulator.config.workload import GradClipSpec, OptimizerSpec
from simulator.workload.builder import TraceBuilder, part
from simulator.workload.trace import Category, Phase, Tensor

TMP = "tmp_"  # names of per-parameter temporaries start with this


@dataclass(frozen=True)
class Kernel:
    name: str
    reads: tuple[str, ...]   # "param", "grad", a state name, or a temporary (TMP...)
    writes: tuple[str, ...]


@dataclass(frozen=True)
class Update:
    state: tuple[str, ...]           # parameter-sized state tensors
    kernels: tuple[Kernel, ...]
    # for_loop: the Python variables that outlive their parameter, as (temporary, the kernel
    # after which the variable holds the next parameter's)
    held: tuple[tuple[str, str], ...] = ()
    step_counter: bool = True
    scalars: tuple[str, ...] = ()   # temporaries of one value per parameter (norms, ratios)


def _decay(spec: OptimizerSpec, decoupled: bool) -> tuple[list[Kernel], str]:
    """Weight decay: AdamW scales the parameters; the others add wd*param to a new gradient."""
    if not spec.weight_decay:
        return [], "grad"
    if decoupled:
        return [Kernel("decay_params", ("param",), ("param",))], "grad"
    return [Kernel("grad_plus_decay", ("grad", "param"), (TMP + "grad",))], TMP + "grad"


def update_for(spec: OptimizerSpec) -> Update:
    k = Kernel
    kind = spec.type
    if kind == "sgd":
        ks, g = _decay(spec, decoupled=False)
        state: tuple[str, ...] = ()
        if spec.momentum:
            state = ("momentum_buffer",)
            ks += [k("momentum_scale", ("momentum_buffer",), ("momentum_buffer",)),
                   k("momentum_add_grad", ("momentum_buffer", g), ("momentum_buffer",))]
            g = "momentum_buffer"
        ks.append(k("param_update", ("param", g), ("param",)))
        return Update(state, tuple(ks), step_counter=False)
    if kind in ("adam", "adamw"):
        ks, g = _decay(spec, decoupled=kind == "adamw")
        state = ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if spec.amsgrad else ())
        ks += [k("exp_avg_lerp", ("exp_avg", g), ("exp_avg",)),
               k("exp_avg_sq_scale", ("exp_avg_sq",), ("exp_avg_sq",)),
               k("exp_avg_sq_addcmul", ("exp_avg_sq", g), ("exp_avg_sq",))]
        src = "exp_avg_sq"
        if spec.amsgrad:
            ks.append(k("max_exp_avg_sq", ("max_exp_avg_sq", "exp_avg_sq"), ("max_exp_avg_sq",)))
            src = "max_exp_avg_sq"
        if spec.implementation == "for_loop":
            # denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps): two new tensors
            ks += [k("sqrt", (src,), (TMP + "root",)),
                   k("div", (TMP + "root",), (TMP + "denom",)),
                   k("add_eps", (TMP + "denom",), (TMP + "denom",))]
        else:
            ks += [k("denom_sqrt", (src,), (TMP + "denom",)),
                   k("denom_div", (TMP + "denom",), (TMP + "denom",)),
                   k("denom_add_eps", (TMP + "denom",), (TMP + "denom",))]
        ks.append(k("param_addcdiv", ("param", "exp_avg", TMP + "denom"), ("param",)))
        return Update(state, tuple(ks), held=((TMP + "denom", "add_eps"),))
    if kind == "adamax":
        ks, g = _decay(spec, decoupled=False)
        ks += [k("exp_avg_lerp", ("exp_avg", g), ("exp_avg",)),
               k("exp_inf_scale", ("exp_inf",), ("exp_inf",)),
               k("grad_abs", (g,), (TMP + "norm",)),
               k("norm_add_eps", (TMP + "norm",), (TMP + "norm",)),
               k("exp_inf_maximum", ("exp_inf", TMP + "norm"), ("exp_inf",)),
               k("param_addcdiv", ("param", "exp_avg", "exp_inf"), ("param",))]
        return Update(("exp_avg", "exp_inf"), tuple(ks),
                      held=((TMP + "norm", "norm_add_eps"),))
    if kind == "rmsprop":
        ks, g = _decay(spec, decoupled=False)
        state = ("square_avg",)
        ks += [k("square_avg_scale", ("square_avg",), ("square_avg",)),
               k("square_avg_addcmul", ("square_avg", g), ("square_avg",))]
        if spec.centered:
            state += ("grad_avg",)
            ks += [k("grad_avg_lerp", ("grad_avg", g), ("grad_avg",)),
                   k("avg_addcmul", ("square_avg", "grad_avg"), (TMP + "avg",)),
                   k("avg_sqrt", (TMP + "avg",), (TMP + "avg",))]
        else:
            ks.append(k("avg_sqrt", ("square_avg",), (TMP + "avg",)))
        ks.append(k("avg_add_eps", (TMP + "avg",), (TMP + "avg",)))
        if spec.momentum:
            state += ("momentum_buffer",)
            ks += [k("buf_scale", ("momentum_buffer",), ("momentum_buffer",)),
                   k("buf_addcdiv", ("momentum_buffer", g, TMP + "avg"), ("momentum_buffer",)),
                   k("param_update", ("param", "momentum_buffer"), ("param",))]
        else:
            ks.append(k("param_addcdiv", ("param", g, TMP + "avg"), ("param",)))
        assigned = "avg_sqrt" if spec.centered else "avg_add_eps"
        return Update(state, tuple(ks), held=((TMP + "avg", assigned),))
    if kind == "adagrad":
        ks, g = _decay(spec, decoupled=False)
        ks += [k("sum_addcmul", ("sum", g), ("sum",)),
               k("std_sqrt", ("sum",), (TMP + "std",)),
               k("std_add_eps", (TMP + "std",), (TMP + "std",)),
               k("param_addcdiv", ("param", g, TMP + "std"), ("param",))]
        return Update(("sum",), tuple(ks), held=((TMP + "std", "std_add_eps"),))
    if kind == "bert_adam":  # its step after clipping the gradient (_step_group), line by line
        ks = [k("next_m_scale", ("next_m",), ("next_m",)),         # next_m.mul_(b1)
              k("next_m_add_grad", ("next_m", "grad"), ("next_m",)),  # .add_(1 - b1, grad)
              k("next_v_scale", ("next_v",), ("next_v",)),
              k("next_v_addcmul", ("next_v", "grad"), ("next_v",)),
              k("sqrt", ("next_v",), (TMP + "root",)),             # next_v.sqrt() + e
              k("add_eps", (TMP + "root",), (TMP + "denom",)),
              k("update_div", ("next_m", TMP + "denom"), (TMP + "update",))]
        if spec.weight_decay:  # update += weight_decay * p.data
            ks += [k("decay_scale", ("param",), (TMP + "decay",)),
                   k("update_add_decay", (TMP + "update", TMP + "decay"), (TMP + "update",))]
        ks += [k("update_with_lr", (TMP + "update",), (TMP + "update_with_lr",)),
               k("negate", (TMP + "update_with_lr",), (TMP + "negated",)),
               k("param_add", ("param", TMP + "negated"), ("param",))]
        return Update(("next_m", "next_v"), tuple(ks), step_counter=False,
                      held=((TMP + "update", "update_div"),
                            (TMP + "update_with_lr", "update_with_lr")))
    if kind == "lamb":  # lamb_kernel as TorchScript's fuser groups it; the norms are reductions
        ks = [k("moments_and_adam_step", ("exp_avg", "exp_avg_sq", "grad", "param"),
                ("exp_avg", "exp_avg_sq", TMP + "adam_step")),
              k("weight_norm", ("param",), (TMP + "weight_norm",)),
              k("adam_norm", (TMP + "adam_step",), (TMP + "adam_norm",)),
              k("trust_ratio", (TMP + "weight_norm", TMP + "adam_norm"), (TMP + "trust_ratio",)),
              k("param_update", ("param", TMP + "adam_step", TMP + "trust_ratio"), ("param",))]
        return Update(("exp_avg", "exp_avg_sq"), tuple(ks), step_counter=False,
                      held=((TMP + "adam_step", "moments_and_adam_step"),),
                      scalars=(TMP + "weight_norm", TMP + "adam_norm", TMP + "trust_ratio"))
    raise ValueError(f"unknown optimizer {kind}")  # the schema's enum is tested against this


def step(b: TraceBuilder, spec: OptimizerSpec, unscale: bool = False,
         clip: GradClipSpec | None = None, master_weights: bool = False) -> None:
    """Append the optimizer phase to the trace: the gradients unscaled (GradScaler's check, or
    apex's copy into fp32 master gradients), clipped, then the update of each parameter group,
    and the fp32 masters copied back into the model's parameters."""
    b.phase = Phase.OPTIMIZER
    params = [p for p in b.parameters if p.requires_grad]  # frozen weights are not stepped
    grads = [b.param_grad(p) for p in params]
    model_params = params
    if master_weights:  # apex amp O2's multi_tensor_scale: fp16 gradients into fp32 masters'
        params = [_state_tensor(b, p, "master", dtype="fp32") for p in model_params]
        masters_grads = [b.tensor(f"{p.name}.master_grad", p.shape, Category.GRADIENT, "fp32")
                         for p in model_params]
        found = [b.temporary("loss_scaler.overflow", (1,), "fp32")] if unscale else []
        b.op("master_weights.unscale_grads" if unscale else "master_weights.copy_grads",
             "optimizer", grads, [*masters_grads, *found], list_length=len(grads))
        if unscale:  # apex's LossScaler.update_scale reads the overflow flag on the host
            host_read(b, found[0], "loss_scaler.overflow")
        grads = masters_grads
    elif unscale:  # _amp_foreach_non_finite_check_and_unscale_: every gradient read and written
        found_inf = b.temporary("grad_scaler.found_inf", (1,), "fp32")
        b.op("grad_scaler.unscale", "optimizer", grads, [*grads, found_inf],
             list_length=len(grads))
        if spec.implementation != "fused":  # GradScaler.step: `if not found_inf.item()`; a
            host_read(b, found_inf, "grad_scaler.found_inf")  # fused step reads it itself
    if clip is not None:
        clip_grad_norm(b, grads, clip.implementation, "grad_clip")
    for label, group_spec, idx in _groups(spec, params):
        _step_group(b, group_spec, [params[i] for i in idx], [grads[i] for i in idx], label)
    if master_weights:
        b.op("master_weights.copy_to_model", "optimizer", params, model_params,
             list_length=len(params))


def _groups(spec: OptimizerSpec,
            params: list[Tensor]) -> list[tuple[str, OptimizerSpec, list[int]]]:
    """The parameter groups torch.optim steps one after the other, each with the name its
    ops carry: one, or with weight_decay_on "matrices" the decayed weights, then the 1-D
    biases and norm scales (`<optimizer>.no_decay`)."""
    if spec.weight_decay_on != "matrices":
        return [(spec.type, spec, list(range(len(params))))]
    decayed = [i for i, p in enumerate(params) if len(p.shape) >= 2]
    kept = [i for i, p in enumerate(params) if len(p.shape) < 2]
    groups = [(spec.type, spec, decayed),
              (f"{spec.type}.no_decay", dataclasses.replace(spec, weight_decay=0.0), kept)]
    return [g for g in groups if g[2]]


def host_read(b: TraceBuilder, t: Tensor, name: str) -> None:
    """`t.item()` (or a Python branch on `t`): a copy to the host, which waits for the GPU to
    get there before it dispatches anything more."""
    b.op(f"{name}.item", "copy", [t], [], host_waits=True)


def clip_grad_norm(b: TraceBuilder, grads: list[Tensor], implementation: str,
                   prefix: str) -> None:
    """torch.nn.utils.clip_grad_norm_: each gradient's norm, their norm, the clip coefficient
    (max_norm over it plus 1e-6, clamped to 1: four scalar kernels), every gradient scaled by
    it. foreach: the norms and the scaling are one multi-tensor kernel each; for_loop: one per
    gradient. PyTorch before 1.5 reads each norm on the host instead (`.item()`, a wait each)
    and works out the coefficient in Python (`execution.clip_norms_on_host`). PyTorch before
    1.10 branches on `clip_coef < 1` instead of clamping
    (`execution.clip_coef_on_host`): the host waits for the GPU at every call; PyTorch 1.9 also
    tests the norm for NaN and infinity there first (`execution.clip_nonfinite_on_host`: two
    more waits; pytorch/pytorch issue 60691). apex: NVIDIA's
    GradientClipper (DeepLearningExamples' BERT): apex's multi-tensor L2 norm, read on the
    host (`.item()`), then a multi-tensor scale."""
    n = len(grads)
    if implementation == "apex":
        total = b.temporary(f"{prefix}.total_norm", (1,), "fp32")
        b.op(f"{prefix}.l2norm", "optimizer", grads, [total], list_length=n)
        host_read(b, total, f"{prefix}.total_norm")
        b.op(f"{prefix}.scale", "optimizer", grads, grads, list_length=n)
        return
    if b.execution.clip_norms_on_host:  # `total_norm += param_norm.item() ** norm_type`
        for g in grads:
            norm = b.temporary(f"{prefix}.norm_of.{g.name}", (), "fp32")
            b.op(f"{prefix}.norm.{g.name}", "reduction", [g], [norm])
            host_read(b, norm, f"{prefix}.norm.{g.name}")
        for g in grads:  # the coefficient is a Python float: `p.grad.data.mul_(clip_coef)`
            b.op(f"{prefix}.scale.{g.name}", "elementwise", [g], [g])
        return
    norms = b.temporary(f"{prefix}.norms", (n,), "fp32")
    if implementation == "foreach":
        b.op(f"{prefix}.norms", "optimizer", grads, [norms], list_length=n)
    else:
        for g in grads:
            b.op(f"{prefix}.norm.{g.name}", "reduction", [g], [part(norms, 4)])
    stacked = b.temporary(f"{prefix}.stacked", (n,), "fp32")
    b.op(f"{prefix}.stack", "copy", [norms], [stacked])
    total = b.temporary(f"{prefix}.total_norm", (), "fp32")
    b.op(f"{prefix}.total_norm", "reduction", [stacked], [total])
    if b.execution.clip_nonfinite_on_host:  # `if total_norm.isnan() or total_norm.isinf()`
        for check in ("isnan", "isinf"):
            flag = b.temporary(f"{prefix}.{check}", (), "bool")
            b.op(f"{prefix}.{check}", "elementwise", [total], [flag])
            host_read(b, flag, f"{prefix}.{check}")
    coef = b.temporary(f"{prefix}.coef", (), "fp32")
    # max_norm / (total + 1e-6): a float over a tensor is its reciprocal times the float
    # (Tensor.__rtruediv__); then clamp(max=1)
    on_host = b.execution.clip_coef_on_host
    for step_name in ("add_eps", "reciprocal", "mul_max_norm", "lt" if on_host else "clamp"):
        b.op(f"{prefix}.coef_{step_name}", "elementwise", [total], [coef])
    if on_host:
        host_read(b, coef, f"{prefix}.coef_lt")
    if implementation == "foreach":
        b.op(f"{prefix}.scale", "optimizer", [*grads, coef], grads, list_length=n)
    else:
        for g in grads:
            b.op(f"{prefix}.scale.{g.name}", "elementwise", [g, coef], [g])


def _step_group(b: TraceBuilder, spec: OptimizerSpec, params: list[Tensor],
                grads: list[Tensor], name: str) -> None:
    rule = update_for(spec)
    state = {key: [_state_tensor(b, p, key, dtype=spec.state_dtype) for p in params]
             for key in rule.state}
    lists = {"param": params, "grad": grads, **state}
    clip_each = spec.type == "bert_adam" and spec.max_grad_norm > 0
    if spec.implementation == "fused":
        if clip_each:  # each gradient's norm first: the kernel scales as it reads
            _clip_each_foreach(b, name, grads, scale=False)
        reads = [params, grads] + [state[s] for s in rule.state]
        writes = [params] + [state[s] for s in rule.state]
        if rule.step_counter:
            steps = [_state_tensor(b, p, "step", shape=(), dtype="fp32") for p in params]
            b.op(f"{name}.step_increment", "optimizer", steps, steps,  # _foreach_add_(steps, 1)
                 list_length=len(steps))
            reads.append(steps)
        # gradients are stored back only under a grad scaler (PyTorch's schema marks them
        # mutable); the kernel reads each tensor once and writes what it updates
        b.op(f"{name}.fused_step", "optimizer", [t for group in reads for t in group],
             [t for group in writes for t in group], list_length=len(params))
        return
    if spec.implementation == "foreach":  # each kernel over every parameter at once
        if clip_each:
            _clip_each_foreach(b, name, grads)
        _emit(b, rule, name, range(len(params)), lists)
        return
    # for_loop: the kernels parameter by parameter; a held variable of one parameter is
    # released when the next parameter's is assigned
    previous: dict[str, Tensor] = {}
    for i, p in enumerate(params):
        if clip_each:
            clip_grad_norm(b, [grads[i]], "for_loop", f"{name}.{p.name}.clip")
        temps, assigned_at = _emit(b, rule, f"{name}.{p.name}", [i], lists, foreach=False)
        for held, t in previous.items():
            at = assigned_at.get(held)
            b.release_at(t, at if at is not None else len(b.ops) - 1)
        previous = {h: temps[h][0] for h, _ in rule.held if h in temps}
    for t in previous.values():
        b.release_at(t, len(b.ops) - 1)


def _clip_each_foreach(b: TraceBuilder, name: str, grads: list[Tensor],
                       scale: bool = True) -> None:
    """BertAdam's clipping of each gradient to its own norm, as multi-tensor kernels: the
    norms, then (`scale`) the coefficients and the scaling, which a fused step does itself."""
    n = len(grads)
    norms = b.temporary(f"{name}.grad_norms", (n,), "fp32")
    b.op(f"{name}.grad_norms", "optimizer", grads, [norms], list_length=n)
    if scale:
        b.op(f"{name}.clip_coefs", "optimizer", [norms], [norms])
        b.op(f"{name}.clip_scale", "optimizer", [*grads, norms], grads, list_length=n)


def _emit(b: TraceBuilder, rule: Update, prefix: str, idx, lists: dict[str, list[Tensor]],
          foreach: bool = True):
    """The rule's kernels over the parameters at `idx`, each kernel one op. Returns the
    temporaries made (name -> one per parameter) and, per held variable, the op that assigns
    it."""
    params = lists["param"]
    temps: dict[str, list[Tensor]] = {}
    assigned_at: dict[str, int] = {}
    for kern in rule.kernels:
        for out in kern.writes:
            if out.startswith(TMP) and out not in temps:
                scalar = out in rule.scalars
                temps[out] = [b.temporary(f"{params[i].name}.{out[len(TMP):]}",
                                          () if scalar else params[i].shape, params[i].dtype)
                              for i in idx]

        def tensors(names: tuple[str, ...]) -> list[Tensor]:
            return [t for n in names for t in (temps[n] if n in temps
                                               else [lists[n][i] for i in idx])]

        # a foreach kernel walks tensor lists; a for_loop one is a plain single-tensor ATen op,
        # dispatched as any elementwise op is (gpu/dispatch.py)
        op = b.op(f"{prefix}.{kern.name}", "optimizer" if foreach else "elementwise",
                  tensors(kern.reads), tensors(kern.writes), list_length=len(idx))
        for held, after in rule.held:
            if kern.name == after:
                assigned_at[held] = op.index
    return temps, assigned_at


def _state_tensor(b: TraceBuilder, p: Tensor, name: str, shape=None, dtype=None) -> Tensor:
    t = b.tensor(f"{p.name}.{name}", p.shape if shape is None else shape,
                 Category.OPTIMIZER_STATE, dtype or p.dtype)
    b.optimizer_state.append(t)
    return t
