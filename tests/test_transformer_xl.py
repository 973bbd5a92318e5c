"""Transformer-XL: the model as NVIDIA DeepLearningExamples builds it, its JITLamb optimizer,
and the 2020.02 code's differences."""

import dataclasses

import pytest

from simulator.config.workload import load_workload, parse_workload
from simulator.errors import InputError
from simulator.workload.generate import build_trace
from simulator.workload.trace import Phase

BASE = load_workload("transformer-xl-base")


def _spec(**model):
    return dataclasses.replace(BASE, model=BASE.model | model)


@pytest.mark.parametrize("large, total, layers", [(False, 191_948_759, 54_599_680),
                                                  (True, 519_963_095, 245_532_672)])
def test_parameters_are_those_its_training_log_prints(large, total, layers):
    """Lambda's logs of base and large print `#params` and `#non emb params` (train.py counts
    the layers' parameters as the latter)."""
    spec = BASE if not large else dataclasses.replace(
        _spec(n_layer=18, d_model=1024, n_head=16, d_head=64, d_inner=4096, mem_len=256,
              dropatt=0.2), seq_len=256, batch_size=1)
    trace = build_trace(spec)
    assert sum(p.numel for p in trace.parameters) == total
    assert sum(p.numel for p in trace.parameters if p.name.startswith("layers.")) == layers
    # large drops out attention probabilities (dropatt 0.2): a mask saved, its backward run
    # between the product's and the softmax's
    names = [o.name for o in trace.ops if o.name.startswith("layers.0.dec_attn.")]
    assert ("layers.0.dec_attn.dropatt" in names) == large
    if large:
        order = [names.index(f"layers.0.dec_attn.{n}") for n in (
            "attn_vec.grad_prob", "dropatt.backward", "softmax.backward_mul")]
        assert order == sorted(order)


def test_matmul_flops_follow_the_layers():
    """Per layer: the packed projection over segment and memory (k = 384 rows a sequence), the
    positions' projection (k rows), three attention products (content, position, values), the
    output projection and the feed-forward; then the tied output layer. Backward twice each,
    but the positions' projection, whose input needs no gradient, once."""
    b, q, e, nd, f, v = 24, 192, 512, 512, 2048, 267_735
    k = q + 192
    layer = (2 * k * b * e * 3 * nd, 2 * k * e * nd, 3 * 2 * b * 8 * q * k * 64,
             2 * q * b * nd * e, 2 * 2 * q * b * e * f)
    head = 2 * q * b * e * v
    trace = build_trace(BASE)
    assert trace.flops(Phase.FORWARD) == 16 * sum(layer) + head
    assert trace.flops(Phase.BACKWARD) == 16 * (2 * sum(layer) - layer[1]) + 2 * head


def test_jit_lamb_runs_five_kernels_per_parameter():
    """lamb_kernel under TorchScript's fuser: the moments and the Adam step in one kernel
    (reading the parameter for the weight decay even at 0), the two norms, the trust ratio on
    scalars, the update; two state tensors, no step counter on the device."""
    trace = build_trace(BASE)
    ops = [o for o in trace.ops_in(Phase.OPTIMIZER) if o.name.startswith("lamb.")]
    assert len(ops) == 5 * len(trace.parameters)
    word = [o for o in ops if ".word_emb." in o.name]
    assert [o.name.rsplit(".", 1)[1] for o in word] == [
        "moments_and_adam_step", "weight_norm", "adam_norm", "trust_ratio", "param_update"]
    assert all(a.tensor.shape == () for o in word[1:4] for a in o.writes)
    assert len(trace.optimizer_state) == 2 * len(trace.parameters) + len(trace.parameters)
    # (the master weights of apex O2 are state too)


def test_the_2020_code_waits_on_each_layers_mask_and_keeps_memory_by_cat():
    new, old = build_trace(BASE), build_trace(_spec(release="2020.02"))
    waits = [o.name for o in old.ops if o.host_waits and "attn_mask" in o.name]
    assert len(waits) == 16 and not any("attn_mask" in o.name and o.host_waits
                                        for o in new.ops)
    assert [o.name for o in new.ops if o.name.startswith("new_mems")] == ["new_mems.stack"]
    assert len([o for o in old.ops if o.name.startswith("new_mems.")]) == 17


def test_the_loss_is_read_before_the_optimizer_is_dispatched():
    trace = build_trace(BASE)
    reads = [o for o in trace.ops if o.name == "loss.item"]
    assert len(reads) == 1 and reads[0].host_waits and reads[0].phase is Phase.BACKWARD
    quiet = dataclasses.replace(BASE, execution=dataclasses.replace(BASE.execution,
                                                                    loss_item=False))
    assert not any(o.name == "loss.item" for o in build_trace(quiet).ops)


@pytest.mark.parametrize("change, path", [
    ({"training": {"mixed_precision": "fp16", "dtype": "fp32"}}, "$.training.mixed_precision"),
    ({"model": {"d_model": 511}}, "$.model.d_model"),
    ({"data": {"batch_size": 2}}, "$.data"),
])
def test_bad_transformer_xl_input_names_its_path(change, path):
    import json

    from simulator.resources import resolve

    raw = json.loads(resolve("workloads", "transformer-xl-base").read_text())
    for key, sub in change.items():
        raw[key] = sub if key == "data" else raw[key] | sub
    if "master_weights" in raw["training"] and raw["training"]["dtype"] == "fp32":
        del raw["training"]["master_weights"]
    with pytest.raises(InputError) as e:
        parse_workload(raw, "txl.json")
    assert e.value.path == path
