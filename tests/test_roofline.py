"""The analytic roofline and the memory timeline: invariants that must hold for any workload."""

import numpy as np
import pytest

from simulator.config.hardware import hardware_names, load_hardware
from simulator.config.loader import schema
from simulator.estimate import PeakBandwidth, estimate
from simulator.pipeline import analyze
from simulator.workload.generate import build_trace
from simulator.workload.memory import profile
from simulator.workload.trace import PERSISTENT, Category, Phase, Unit


@pytest.fixture(scope="module")
def transformer_on_t4():
    return analyze("transformer", "t4", fidelity="analytic")


def test_no_op_moves_data_faster_than_peak(transformer_on_t4):
    peak = transformer_on_t4.hardware.peak_bandwidth_Bps
    for o in transformer_on_t4.estimate.ops:
        assert o.op.bytes_moved / o.time_s <= peak * (1 + 1e-12)


def test_op_time_is_the_larger_ceiling(transformer_on_t4):
    for o in transformer_on_t4.estimate.ops:
        assert o.time_s == max(o.compute_s, o.memory_s)
        assert (o.bound == "compute") == (o.compute_s >= o.memory_s)
        assert o.bound in ("compute", "dram_bandwidth")


def test_bound_follows_the_ridge_point(transformer_on_t4):
    hw = transformer_on_t4.hardware
    ridge = hw.ridge_points()
    for o in transformer_on_t4.estimate.ops:
        if o.op.flops:
            assert (o.bound == "compute") == (o.op.arithmetic_intensity >= ridge[o.ceiling])


def test_fp32_matmuls_use_cuda_cores_and_convolutions_tf32():
    """PyTorch defaults: allow_tf32 is off for matmul, on for cuDNN convolutions."""
    r = analyze("cnn", "a40", fidelity="analytic")
    ceilings = {o.op.name: o.ceiling for o in r.estimate.ops if o.op.flops}
    assert ceilings["conv2"] == "tf32_tensor"
    assert ceilings["fc1"] == "fp32"
    # Turing: no TF32, the convolution falls back to fp32
    t4 = analyze("cnn", "t4", fidelity="analytic")
    assert {o.ceiling for o in t4.estimate.ops if o.op.flops} == {"fp32"}


def test_faster_memory_never_slows_a_step():
    trace = build_trace(analyze("cnn", "t4", fidelity="analytic").workload)
    hw = load_hardware("t4")
    slow = estimate(trace, hw, PeakBandwidth(hw.peak_bandwidth_Bps))
    fast = estimate(trace, hw, PeakBandwidth(2 * hw.peak_bandwidth_Bps))
    assert fast.step_time_s < slow.step_time_s
    for a, b in zip(slow.ops, fast.ops, strict=True):
        assert b.time_s <= a.time_s


def test_phases_add_up(transformer_on_t4):
    est = transformer_on_t4.estimate
    assert sum(p.time_s for p in est.phases()) == pytest.approx(est.step_time_s)
    assert sum(p.ops for p in est.phases()) == len(est.ops)
    assert est.phase(Phase.OPTIMIZER).bound == "memory"


def test_memory_timeline_invariants(transformer_on_t4):
    trace, mem = transformer_on_t4.trace, transformer_on_t4.memory
    live = mem.live_after.sum(axis=1)
    assert (mem.live_after >= 0).all()
    persistent = sum(t.nbytes for t in trace.tensors
                     if t.category in PERSISTENT and t.category is not Category.GRADIENT)
    assert mem.start_bytes >= persistent
    assert live.min() >= persistent
    assert mem.peak_bytes >= live.max()
    # after the step: parameters, gradients, optimizer state and what the loop holds
    held = sum(t.nbytes for t in trace.tensors if t.category in PERSISTENT or t.retained)
    assert live[-1] == held


def test_every_workload_runs_on_every_device():
    for hw in hardware_names():
        for wl in ("transformer", "cnn"):
            r = analyze(wl, hw, fidelity="analytic")
            assert r.estimate.step_time_s > 0
            assert np.isfinite(r.estimate.step_time_s)


def test_schema_enums_match_generators():
    """Each model, optimizer and attention option the schema admits builds a trace."""
    wl = schema("workload")
    assert set(wl["properties"]["model"]["properties"]["type"]["enum"]) == {
        "encoder_decoder_transformer", "sequential_cnn", "decoder_only_transformer",
        "encoder_only_transformer", "resnet", "transformer_xl"}
    assert set(wl["$defs"]["optimizer"]["properties"]["type"]["enum"]) == {
        "sgd", "adam", "adamw", "adamax", "rmsprop", "adagrad", "bert_adam", "lamb"}


def test_half_precision_halves_bytes_and_uses_tensor_cores():
    import dataclasses

    base = analyze("transformer", "a10", fidelity="analytic")
    half = dataclasses.replace(base.workload, dtype="bf16")
    r = analyze(half, "a10", fidelity="analytic")
    assert r.trace.parameter_bytes * 2 == base.trace.parameter_bytes
    matmuls = [o for o in r.estimate.ops if o.op.unit is Unit.MATRIX]
    assert matmuls and all(o.ceiling == "bf16_tensor" for o in matmuls)
    assert profile(r.trace).peak_bytes < base.memory.peak_bytes
