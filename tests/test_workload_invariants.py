"""Every combination of training options yields a consistent step (hypothesis)."""

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.config.workload import parse_workload
from simulator.workload.allocator import place
from simulator.workload.builder import ZERO_GRAD_PREFIX
from simulator.workload.generate import build_trace
from simulator.workload.memory import profile
from simulator.workload.trace import PERSISTENT, Category, Phase


@st.composite
def workloads(draw):
    kind = draw(st.sampled_from(["decoder", "encoder", "resnet", "cnn"]))
    heads = draw(st.sampled_from([1, 2, 4]))
    if kind == "decoder":
        model = {"type": "decoder_only_transformer", "vocab_size": draw(st.integers(8, 64)),
                 "n_layer": draw(st.integers(1, 2)), "d_model": 8 * heads, "n_head": heads,
                 "n_kv_head": draw(st.sampled_from([h for h in (1, 2, 4) if heads % h == 0])),
                 "context": 16, "positions": draw(st.sampled_from(["learned", "rotary"])),
                 "norm": draw(st.sampled_from(["layernorm", "rmsnorm"])),
                 "mlp": draw(st.sampled_from(["gelu", "gelu_new", "swiglu"])),
                 "bias": draw(st.booleans()), "tie_embeddings": draw(st.booleans()),
                 "dropout": draw(st.sampled_from([0.0, 0.1]))}
        data = {"seq_len": draw(st.integers(1, 16))}
    elif kind == "encoder":
        model = {"type": "encoder_only_transformer", "vocab_size": 32, "n_layer": 1,
                 "d_model": 8 * heads, "n_head": heads, "max_positions": 16}
        data = {"seq_len": draw(st.integers(1, 16))}
    elif kind == "resnet":
        model = {"type": "resnet", "layers": [1, 1], "block": draw(st.sampled_from(
            ["bottleneck", "basic"])), "width": 8, "num_classes": 5, "image_size": 32}
        data = {}
    else:
        norm = [{"type": "batchnorm2d"}] if draw(st.booleans()) else []
        size = draw(st.sampled_from([1, 5, [5, 3]]))
        pool = [{"type": "adaptive_avgpool2d", "output_size": size}]
        model = {"type": "sequential_cnn", "input_shape": [1, 12, 12], "layers": [
            {"type": "conv2d", "out_channels": 4, "kernel_size": 3}, *norm,
            {"type": "relu", "inplace": draw(st.booleans())},
            {"type": "maxpool2d", "kernel_size": 2}, *(pool if draw(st.booleans()) else []),
            {"type": "flatten"}, {"type": "linear", "out_features": 6}]}
        data = {}
    micro = draw(st.sampled_from([1, 2]))
    data["batch_size"] = micro * draw(st.integers(1, 3))
    data["micro_batches"] = micro
    attention_free = kind in ("resnet", "cnn")
    training = {
        "dtype": "fp32", "loss": "cross_entropy",
        "optimizer": {"type": draw(st.sampled_from(["sgd", "adam", "adamw", "adamax", "rmsprop",
                                                    "adagrad"])),
                      "implementation": draw(st.sampled_from(["for_loop", "foreach", "fused"]))},
        "mixed_precision": draw(st.sampled_from(["none", "fp16", "bf16"])),
        "checkpointing": draw(st.sampled_from(["none", "full"] if attention_free
                                              else ["none", "selective", "full"])),
        "execution": {"attention": draw(st.sampled_from(["fused", "math", "eager"])),
                      "zero_grad": draw(st.sampled_from(["none", "zeros"]))},
    }
    if draw(st.booleans()):
        training["pruning"] = {"fraction": draw(st.sampled_from([0.25, 0.5]))}
    if draw(st.booleans()):
        training["weight_quantization"] = "int8"
    return {"format_version": 1, "name": "random", "model": model, "data": data,
            "training": training}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
def test_any_step_is_consistent(raw):
    spec = parse_workload(raw, "random.json")
    trace = build_trace(spec)
    trainable = [p for p in trace.parameters if p.requires_grad]
    grads = [t for t in trace.tensors if t.category is Category.GRADIENT]
    assert len(grads) == len(trainable)                      # one .grad per trainable parameter
    stepped = {a.tensor.id for op in trace.ops_in(Phase.OPTIMIZER) for a in op.writes}
    assert all(p.id in stepped for p in trainable)           # every one is updated
    # every op writes to GPU memory but a copy of a result to the host (`.item()`)
    assert all(op.bytes_read >= 0 and (op.bytes_written > 0 or op.host_waits)
               for op in trace.ops)
    assert all(op.bytes_written > 0 for op in trace.ops if op.kind != "copy")
    assert all(a.nbytes <= a.tensor.storage.nbytes for op in trace.ops
               for a in op.reads + op.writes)
    if spec.execution.zero_grad == "zeros":  # each .grad kept, added into, zeroed once
        assert sorted(trace.held_gradients) == sorted(g.id for g in grads)
        zeroed = [a.tensor.id for op in trace.ops if op.name.startswith(ZERO_GRAD_PREFIX)
                  for a in op.writes]
        assert sorted(zeroed) == sorted(trace.held_gradients)
        assert trace.ops[-1].name.startswith(ZERO_GRAD_PREFIX)
    else:
        assert not trace.held_gradients
        assert not any(op.name.startswith(ZERO_GRAD_PREFIX) for op in trace.ops)
    mem = profile(trace)
    assert (mem.during >= 0).all() and sum(mem.at_peak.values()) == mem.peak_bytes
    persistent = sum(t.nbytes for t in trace.tensors if t.alias_of is None
                     and t.category in PERSISTENT and t.category is not Category.GRADIENT)
    assert mem.peak_bytes >= persistent
    placed = place(trace)
    assert mem.peak_bytes <= placed.allocated_peak <= placed.reserved_peak
    # micro-batches split the work, they do not change it
    if spec.micro_batches > 1:
        whole = build_trace(dataclasses.replace(spec, micro_batches=1))
        assert whole.flops(Phase.FORWARD) == trace.flops(Phase.FORWARD)


def test_every_shipped_workload_runs_on_every_card():
    """The whole matrix at the analytic roofline, and the GDDR6 replay of the small workloads
    on every GDDR6 card (every pair at its default fidelity takes minutes: run it with
    `python -m simulator sweep WORKLOADS --hardware CARDS`)."""
    from simulator.config.hardware import hardware_names, load_hardware
    from simulator.config.workload import workload_names
    from simulator.pipeline import Step, analyze

    steps = {w: Step(w) for w in workload_names()}
    for card in hardware_names():
        hw = load_hardware(card)
        for name, step in steps.items():
            r = analyze(step, hw, fidelity="analytic")
            assert r.estimate.step_time_s > 0, (card, name)
            if hw.memory.replayable and name in ("cnn", "stream"):
                sampled = analyze(step, hw, fidelity="sampled").estimate.step_time_s
                assert sampled > 0, (card, name)


def test_zero_grad_zeros_keeps_each_gradient_and_adds_into_it():
    """zero_grad(set_to_none=False): every .grad exists before the step, the backward adds
    each parameter's contribution into it (two reads, one write), and the step ends by filling
    each with zeros."""
    from simulator.config.workload import load_workload

    base = load_workload("cnn")
    none = build_trace(base)
    zeros = build_trace(dataclasses.replace(
        base, execution=dataclasses.replace(base.execution, zero_grad="zeros")))
    grads = {t.id: t for t in zeros.tensors if t.category is Category.GRADIENT}
    assert set(zeros.held_gradients) == set(grads) and len(grads) == len(zeros.parameters)
    adds = [op for op in zeros.ops if op.name.endswith(".grad_accumulate")]
    assert len(adds) == len(grads)
    for op in adds:
        (held,) = op.writes
        assert held.tensor.id in grads and held.tensor.id in {a.tensor.id for a in op.reads}
        assert op.bytes_read == 2 * held.nbytes and op.phase is Phase.BACKWARD
    fills = [op for op in zeros.ops if op.name.startswith(ZERO_GRAD_PREFIX)]
    assert [op.writes[0].tensor.id for op in fills] == list(zeros.held_gradients)
    assert all(op.bytes_read == 0 and op.phase is Phase.OPTIMIZER for op in fills)
    assert len(zeros.ops) == len(none.ops) + len(adds) + len(fills)
    # the kept gradients are live from the step's start: the memory before it grows by them
    grad_bytes = sum(t.nbytes for t in grads.values())
    assert profile(zeros).start_bytes - profile(none).start_bytes == grad_bytes
    assert place(zeros).allocated_peak >= place(none).allocated_peak


def test_zero_grad_is_checked_as_the_workload_loads(tmp_path):
    import json
    from pathlib import Path

    import pytest

    from simulator.config.workload import load_workload
    from simulator.errors import InputError

    raw = json.loads((Path(__file__).parent.parent / "workloads" / "cnn.json").read_text())
    path = tmp_path / "cnn.json"
    raw["training"]["execution"] = {"zero_grad": "zeros"}
    path.write_text(json.dumps(raw))
    assert load_workload(path).execution.zero_grad == "zeros"
    raw["training"]["execution"] = {"zero_grad": "ones"}
    path.write_text(json.dumps(raw))
    with pytest.raises(InputError, match=r"\$\.training\.execution\.zero_grad") as err:
        load_workload(path)
    assert "none" in str(err.value) and "zeros" in str(err.value)
