"""Optimizer steps as PyTorch runs them: state sizes, kernels and the traffic of each.

Implementations follow torch.optim (2.x): `for_loop` is the single-tensor loop, `foreach` the
multi-tensor path (one kernel per list op, one parameter-sized temporary for Adam's denominator;
the CUDA default), `fused` one kernel that reads and writes every tensor once. The `step` counters
of for_loop/foreach live on the host (capturable=False) and cost no device traffic.
"""

from __future__ import annotations

from simulator.config.workload import OptimizerSpec
from simulator.workload.builder import TraceBuilder
from simulator.workload.trace import Category, Phase, Tensor


def _state(b: TraceBuilder, params: list[Tensor], name: str, dtype: str | None = None,
           shape_of_param: bool = True) -> list[Tensor]:
    out = []
    for p in params:
        shape = p.shape if shape_of_param else ()
        t = b.tensor(f"{p.name}.{name}", shape, Category.OPTIMIZER_STATE, dtype or p.dtype)
        b.optimizer_state.append(t)
        out.append(t)
    return out


def _list_op(b: TraceBuilder, name: str, reads: list[list[Tensor]], writes: list[list[Tensor]]):
    """One foreach kernel over parallel lists (each tensor counted once per list)."""
    r = [t for group in reads for t in group]
    w = [t for group in writes for t in group]
    return b.op(name, "optimizer", r, w)


def step(b: TraceBuilder, spec: OptimizerSpec) -> None:
    b.phase = Phase.OPTIMIZER
    params = list(b.parameters)
    grads = [b.param_grad(p) for p in params]
    if spec.type in ("adam", "adamw"):
        _adam(b, spec, params, grads)
    elif spec.type == "sgd":
        _sgd(b, spec, params, grads)
    else:  # the schema's enum and this dispatch are kept in step by tests
        raise ValueError(f"unknown optimizer {spec.type}")


def _adam(b: TraceBuilder, spec: OptimizerSpec, params: list[Tensor], grads: list[Tensor]) -> None:
    exp_avg = _state(b, params, "exp_avg")
    exp_avg_sq = _state(b, params, "exp_avg_sq")
    decoupled = spec.type == "adamw"
    wd = spec.weight_decay
    name = spec.type
    if spec.implementation == "fused":
        steps = _state(b, params, "step", "fp32", shape_of_param=False)
        _list_op(b, f"{name}.step_increment", [steps], [steps])  # _foreach_add_(steps, 1)
        # _fused_adam_: reads every tensor once and stores what it updates; the gradients are
        # stored back only when a grad scaler is active (PyTorch's op schema marks them mutable)
        _list_op(b, f"{name}.fused_step", [params, grads, exp_avg, exp_avg_sq, steps],
                 [params, exp_avg, exp_avg_sq])
        return
    if spec.implementation == "foreach":
        if wd and decoupled:
            _list_op(b, f"{name}.decay_params", [params], [params])        # _foreach_mul_
        elif wd:
            decayed = [b.temporary(f"{g.name}.decayed", g.shape, g.dtype) for g in grads]
            _list_op(b, f"{name}.grad_plus_decay", [grads, params], [decayed])  # _foreach_add
            grads = decayed
        _list_op(b, f"{name}.exp_avg_lerp", [exp_avg, grads], [exp_avg])          # _foreach_lerp_
        _list_op(b, f"{name}.exp_avg_sq_scale", [exp_avg_sq], [exp_avg_sq])       # _foreach_mul_
        _list_op(b, f"{name}.exp_avg_sq_addcmul", [exp_avg_sq, grads], [exp_avg_sq])
        denom = [b.temporary(f"{p.name}.denom", p.shape, p.dtype) for p in params]
        _list_op(b, f"{name}.denom_sqrt", [exp_avg_sq], [denom])                  # _foreach_sqrt
        _list_op(b, f"{name}.denom_div", [denom], [denom])                        # _foreach_div_
        _list_op(b, f"{name}.denom_add_eps", [denom], [denom])                    # _foreach_add_
        # _foreach_addcdiv_
        _list_op(b, f"{name}.param_addcdiv", [params, exp_avg, denom], [params])
        return
    # for_loop: the single-tensor loop; `denom` stays referenced until the next parameter's
    # denom is assigned, so three parameter-sized temporaries can be live at once.
    previous_denom: Tensor | None = None
    for p, g, m, v in zip(params, grads, exp_avg, exp_avg_sq, strict=True):
        if wd and decoupled:
            b.op(f"{name}.{p.name}.decay", "optimizer", [p], [p])
        elif wd:
            gd = b.temporary(f"{g.name}.decayed", g.shape, g.dtype)
            b.op(f"{name}.{p.name}.grad_plus_decay", "optimizer", [g, p], [gd])
            g = gd
        b.op(f"{name}.{p.name}.exp_avg_lerp", "optimizer", [m, g], [m])
        b.op(f"{name}.{p.name}.exp_avg_sq_scale", "optimizer", [v], [v])
        b.op(f"{name}.{p.name}.exp_avg_sq_addcmul", "optimizer", [v, g], [v])
        root = b.temporary(f"{p.name}.sqrt", p.shape, p.dtype)
        b.op(f"{name}.{p.name}.sqrt", "optimizer", [v], [root])
        denom = b.temporary(f"{p.name}.denom", p.shape, p.dtype)
        b.op(f"{name}.{p.name}.div", "optimizer", [root], [denom])
        assign = b.op(f"{name}.{p.name}.add_eps", "optimizer", [denom], [denom])
        if previous_denom is not None:
            b.release_at(previous_denom, assign.index)
        previous_denom = denom
        b.op(f"{name}.{p.name}.addcdiv", "optimizer", [p, m, denom], [p])
    if previous_denom is not None:
        b.release_at(previous_denom, len(b.ops) - 1)


def _sgd(b: TraceBuilder, spec: OptimizerSpec, params: list[Tensor], grads: list[Tensor]) -> None:
    wd = spec.weight_decay
    bufs = _state(b, params, "momentum_buffer") if spec.momentum else []
    if spec.implementation == "fused":
        reads = [params, grads] + ([bufs] if bufs else [])
        _list_op(b, "sgd.fused_step", reads, [params] + ([bufs] if bufs else []))
        return
    if spec.implementation == "foreach":
        if wd:
            decayed = [b.temporary(f"{g.name}.decayed", g.shape, g.dtype) for g in grads]
            _list_op(b, "sgd.grad_plus_decay", [grads, params], [decayed])
            grads = decayed
        if bufs:
            _list_op(b, "sgd.momentum_scale", [bufs], [bufs])             # _foreach_mul_
            _list_op(b, "sgd.momentum_add_grad", [bufs, grads], [bufs])   # _foreach_add_
            grads = bufs
        _list_op(b, "sgd.param_update", [params, grads], [params])        # _foreach_add_
        return
    for i, (p, g) in enumerate(zip(params, grads, strict=True)):
        if wd:
            gd = b.temporary(f"{g.name}.decayed", g.shape, g.dtype)
            b.op(f"sgd.{p.name}.grad_plus_decay", "optimizer", [g, p], [gd])
            g = gd
        if bufs:
            b.op(f"sgd.{p.name}.momentum", "optimizer", [bufs[i], g], [bufs[i]])
            g = bufs[i]
        b.op(f"sgd.{p.name}.update", "optimizer", [p, g], [p])
