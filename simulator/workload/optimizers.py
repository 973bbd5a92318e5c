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

from dataclasses import dataclass

from simulator.config.workload import OptimizerSpec
from simulator.workload.builder import TraceBuilder
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
    held: str | None = None          # the for_loop variable that outlives its parameter
    step_counter: bool = True


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
        return Update(state, tuple(ks), held=TMP + "denom")
    if kind == "adamax":
        ks, g = _decay(spec, decoupled=False)
        ks += [k("exp_avg_lerp", ("exp_avg", g), ("exp_avg",)),
               k("exp_inf_scale", ("exp_inf",), ("exp_inf",)),
               k("grad_abs", (g,), (TMP + "norm",)),
               k("norm_add_eps", (TMP + "norm",), (TMP + "norm",)),
               k("exp_inf_maximum", ("exp_inf", TMP + "norm"), ("exp_inf",)),
               k("param_addcdiv", ("param", "exp_avg", "exp_inf"), ("param",))]
        return Update(("exp_avg", "exp_inf"), tuple(ks), held=TMP + "norm")
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
        return Update(state, tuple(ks), held=TMP + "avg")
    if kind == "adagrad":
        ks, g = _decay(spec, decoupled=False)
        ks += [k("sum_addcmul", ("sum", g), ("sum",)),
               k("std_sqrt", ("sum",), (TMP + "std",)),
               k("std_add_eps", (TMP + "std",), (TMP + "std",)),
               k("param_addcdiv", ("param", g, TMP + "std"), ("param",))]
        return Update(("sum",), tuple(ks), held=TMP + "std")
    raise ValueError(f"unknown optimizer {kind}")  # the schema's enum is tested against this


def step(b: TraceBuilder, spec: OptimizerSpec, unscale: bool = False) -> None:
    """Append the optimizer phase to the trace (after GradScaler's unscale, when scaling)."""
    b.phase = Phase.OPTIMIZER
    params = [p for p in b.parameters if p.requires_grad]  # frozen weights are not stepped
    grads = [b.param_grad(p) for p in params]
    if unscale:  # _amp_foreach_non_finite_check_and_unscale_: every gradient read and written
        found_inf = b.temporary("grad_scaler.found_inf", (1,), "fp32")
        b.op("grad_scaler.unscale", "optimizer", grads, [*grads, found_inf],
             list_length=len(grads))
    rule = update_for(spec)
    state = {name: [_state_tensor(b, p, name, dtype=spec.state_dtype) for p in params]
             for name in rule.state}
    lists = {"param": params, "grad": grads, **state}
    name = spec.type
    if spec.implementation == "fused":
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
        _emit(b, rule, name, range(len(params)), lists)
        return
    # for_loop: the kernels parameter by parameter; the held variable of one parameter is
    # released when the next parameter's is assigned
    previous: Tensor | None = None
    for i, p in enumerate(params):
        temps, assigned_at = _emit(b, rule, f"{name}.{p.name}", [i], lists)
        if previous is not None:
            b.release_at(previous, assigned_at if assigned_at is not None else len(b.ops) - 1)
        previous = temps[rule.held][0] if rule.held in temps else None
    if previous is not None:
        b.release_at(previous, len(b.ops) - 1)


def _emit(b: TraceBuilder, rule: Update, prefix: str, idx, lists: dict[str, list[Tensor]]):
    """The rule's kernels over the parameters at `idx`, each kernel one op. Returns the
    temporaries made (name -> one per parameter) and the op that reassigns the held variable."""
    params = lists["param"]
    temps: dict[str, list[Tensor]] = {}
    assigned_at = None
    for kern in rule.kernels:
        for out in kern.writes:
            if out.startswith(TMP) and out not in temps:
                temps[out] = [b.temporary(f"{params[i].name}.{out[len(TMP):]}", params[i].shape,
                                          params[i].dtype) for i in idx]

        def tensors(names: tuple[str, ...]) -> list[Tensor]:
            return [t for n in names for t in (temps[n] if n in temps
                                               else [lists[n][i] for i in idx])]

        op = b.op(f"{prefix}.{kern.name}", "optimizer", tensors(kern.reads), tensors(kern.writes),
                  list_length=len(idx))
        if assigned_at is None and rule.held in kern.writes and rule.held in kern.reads:
            assigned_at = op.index
    return temps, assigned_at


def _state_tensor(b: TraceBuilder, p: Tensor, name: str, shape=None, dtype=None) -> Tensor:
    t = b.tensor(f"{p.name}.{name}", p.shape if shape is None else shape,
                 Category.OPTIMIZER_STATE, dtype or p.dtype)
    b.optimizer_state.append(t)
    return t
