"""Every combination of training options yields a consistent step (hypothesis)."""

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.config.workload import parse_workload
from simulator.workload.allocator import place
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
        model = {"type": "sequential_cnn", "input_shape": [1, 12, 12], "layers": [
            {"type": "conv2d", "out_channels": 4, "kernel_size": 3}, {"type": "relu"},
            {"type": "maxpool2d", "kernel_size": 2}, {"type": "flatten"},
            {"type": "linear", "out_features": 6}]}
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
        "execution": {"attention": draw(st.sampled_from(["fused", "math", "eager"]))},
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
