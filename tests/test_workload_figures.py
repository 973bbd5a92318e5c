"""Seed workloads against the PyTorch-measured figures (tests/reference_figures.py)."""

import dataclasses

import pytest
from conftest import REPO
from reference_figures import CNN, TRANSFORMER

from simulator.config.workload import Execution, load_workload
from simulator.workload.generate import build_trace
from simulator.workload.memory import profile
from simulator.workload.trace import Category, Pattern, Phase

FLOP_TOLERANCE = 0.01   # FLOPs per phase within 1 %
PEAK_TOLERANCE = 0.05   # peak live bytes within 5 %
REPO_WORKLOADS = REPO / "workloads"


def variant(name, **changes):
    spec = load_workload(name)
    opt = changes.pop("optimizer", None)
    if opt:
        spec = dataclasses.replace(spec, optimizer=dataclasses.replace(spec.optimizer, **opt))
    return dataclasses.replace(spec, **changes)


@pytest.fixture(scope="module")
def transformer():
    return build_trace(load_workload("workloads/transformer.json"))


@pytest.fixture(scope="module")
def cnn():
    return build_trace(load_workload("workloads/cnn.json"))


def test_transformer_parameters_exact(transformer):
    assert transformer.parameter_count == TRANSFORMER["parameters"]
    assert len(transformer.parameters) == TRANSFORMER["parameter_tensors"]
    assert transformer.parameter_bytes == TRANSFORMER["parameter_bytes"]
    by_module = {"transformer": 0, "embedding": 0, "fc": 0}
    for p in transformer.parameters:
        by_module[p.name.split(".")[0]] += p.numel
    assert by_module == TRANSFORMER["parameters_by_module"]


def test_transformer_parameter_order_is_module_order(transformer):
    names = [p.name for p in transformer.parameters]
    assert names[0] == "transformer.encoder.layers.0.self_attn.in_proj_weight"
    assert names[-3:] == ["embedding.weight", "fc.weight", "fc.bias"]


def test_transformer_flops(transformer):
    assert transformer.flops(Phase.FORWARD) == TRANSFORMER["forward_flops"]
    assert transformer.flops(Phase.BACKWARD) == pytest.approx(TRANSFORMER["backward_flops"],
                                                              rel=FLOP_TOLERANCE)
    assert transformer.flops() == pytest.approx(TRANSFORMER["step_flops"], rel=FLOP_TOLERANCE)
    assert transformer.flops(Phase.OPTIMIZER) == 0


def test_unfused_attention_backward_is_exactly_twice_forward():
    """The reference ran the math path (CPU): its backward is exactly 2x the forward."""
    spec = variant("transformer", execution=Execution(attention="math"))
    trace = build_trace(spec)
    assert trace.flops(Phase.FORWARD) == TRANSFORMER["forward_flops"]
    assert trace.flops(Phase.BACKWARD) == TRANSFORMER["backward_flops"]


def test_transposed_reading_changes_attention_only():
    spec = variant("transformer", batch_size=32, src_seq_len=10, tgt_seq_len=10,
                   execution=Execution(attention="math"))
    trace = build_trace(spec)
    assert trace.parameter_count == TRANSFORMER["parameters"]
    assert trace.flops(Phase.FORWARD) == TRANSFORMER["transposed_forward_flops"]
    assert trace.flops(Phase.BACKWARD) == TRANSFORMER["transposed_backward_flops"]


def test_transformer_adam_state(transformer):
    step_bytes = 4 * TRANSFORMER["parameter_tensors"]
    # foreach keeps the step counters on the host; fused keeps them on the device
    assert transformer.optimizer_state_bytes == TRANSFORMER["adam_state_bytes"] - step_bytes
    fused = build_trace(variant("transformer", optimizer={"implementation": "fused"}))
    assert fused.optimizer_state_bytes == TRANSFORMER["adam_state_bytes"]


@pytest.mark.parametrize("impl, key", [("foreach", "peak_live_foreach"),
                                       ("for_loop", "peak_live_for_loop")])
def test_transformer_peak_live(impl, key):
    trace = build_trace(variant("transformer", optimizer={"implementation": impl}))
    mem = profile(trace)
    assert mem.peak_bytes == pytest.approx(TRANSFORMER[key], rel=PEAK_TOLERANCE)
    assert mem.peak_phase is Phase.OPTIMIZER


def test_foreach_adam_traffic(transformer):
    ops = transformer.ops_in(Phase.OPTIMIZER)
    assert sum(o.bytes_read for o in ops) == pytest.approx(
        TRANSFORMER["foreach_optimizer_read"], rel=1e-5)
    assert sum(o.bytes_written for o in ops) == pytest.approx(
        TRANSFORMER["foreach_optimizer_written"], rel=1e-5)


def test_fused_adam_traffic():
    trace = build_trace(variant("transformer", optimizer={"implementation": "fused"}))
    ops = trace.ops_in(Phase.OPTIMIZER)
    assert sum(o.bytes_read for o in ops) == TRANSFORMER["fused_optimizer_read"]
    # the reference counts the gradients as written (the op schema marks them mutable); the
    # kernel stores them only under a grad scaler, so one parameter-size less is written
    written = sum(o.bytes_written for o in ops)
    assert written == TRANSFORMER["fused_optimizer_written"] - TRANSFORMER["parameter_bytes"]


def test_cnn_parameters_exact(cnn):
    assert cnn.parameter_count == CNN["parameters"]
    assert len(cnn.parameters) == CNN["parameter_tensors"]
    by_layer = {}
    for p in cnn.parameters:
        layer = p.name.split(".")[0]
        by_layer[layer] = by_layer.get(layer, 0) + p.numel
    assert by_layer == CNN["parameters_by_layer"]


def test_cnn_flops(cnn):
    assert cnn.flops(Phase.FORWARD) == CNN["forward_flops"]
    assert cnn.flops(Phase.BACKWARD) == CNN["backward_flops"]
    by_layer = {op.name: op.flops for op in cnn.ops_in(Phase.FORWARD) if op.flops}
    assert by_layer == CNN["forward_flops_by_layer"]
    # conv1's input is the batch: its gradient is never computed
    assert not any(op.name == "conv1.grad_input" for op in cnn.ops)


def test_cnn_peak_live(cnn):
    mem = profile(cnn)
    assert mem.peak_bytes == pytest.approx(CNN["peak_live"], rel=PEAK_TOLERANCE)
    assert mem.peak_phase.value == CNN["peak_phase"]
    assert cnn.ops[mem.peak_op].name == "relu1.backward"


@pytest.mark.parametrize("name", ["transformer", "cnn"])
@pytest.mark.parametrize("impl", ["for_loop", "foreach", "fused"])
@pytest.mark.parametrize("opt", ["adam", "adamw", "sgd", "adamax", "rmsprop", "adagrad",
                                 "bert_adam", "lamb"])
def test_every_optimizer_updates_every_parameter(name, impl, opt):
    trace = build_trace(variant(name, optimizer={"type": opt, "implementation": impl}))
    written = {a.tensor.id for op in trace.ops_in(Phase.OPTIMIZER) for a in op.writes}
    assert all(p.id in written for p in trace.parameters)
    grads = {a.tensor.id for op in trace.ops_in(Phase.BACKWARD) for a in op.writes
             if a.tensor.category is Category.GRADIENT}
    assert len(grads) == len(trace.parameters)  # one .grad per parameter


# optimizer state per parameter byte, PyTorch defaults (torch.optim)
STATE_RATIO = [
    ({"type": "sgd", "momentum": 0.0}, 0),
    ({"type": "sgd", "momentum": 0.9}, 1),
    ({"type": "adam"}, 2),
    ({"type": "adamw"}, 2),
    ({"type": "adamax"}, 2),
    ({"type": "adam", "amsgrad": True}, 3),
    ({"type": "rmsprop"}, 1),
    ({"type": "rmsprop", "momentum": 0.9, "centered": True}, 3),
    ({"type": "adagrad"}, 1),
]


@pytest.mark.parametrize("opt, ratio", STATE_RATIO, ids=[str(o) for o, _ in STATE_RATIO])
def test_optimizer_state_sizes(opt, ratio):
    trace = build_trace(variant("cnn", optimizer={**opt, "implementation": "foreach"}))
    assert trace.optimizer_state_bytes == ratio * trace.parameter_bytes
    # every state tensor is read and written by the step
    touched = {a.tensor.id for op in trace.ops_in(Phase.OPTIMIZER) for a in op.reads + op.writes}
    assert all(t.id in touched for t in trace.optimizer_state)


@pytest.mark.parametrize("opt", ["adam", "rmsprop", "adagrad", "adamax"])
def test_fused_moves_less_than_foreach_which_matches_for_loop(opt):
    def traffic(impl):
        trace = build_trace(variant("cnn", optimizer={"type": opt, "implementation": impl}))
        ops = trace.ops_in(Phase.OPTIMIZER)
        return sum(o.bytes_moved for o in ops), len(ops)

    fused, n_fused = traffic("fused")
    foreach, n_foreach = traffic("foreach")
    loop, n_loop = traffic("for_loop")
    assert fused < foreach and n_fused <= 2
    assert loop >= foreach * 0.99 and n_loop == n_foreach * 8  # the cnn has 8 parameters


def _optimizer_ops(spec):
    trace = build_trace(spec)
    return trace, trace.ops_in(Phase.OPTIMIZER)


def test_bert_adam_runs_its_loop_line_by_line():
    """BertAdam (NVIDIA DeepLearningExamples' optimization.py): per parameter, the gradient
    clipped to its own norm (norm, stack, norm, four scalar ops, scale: 8 kernels) and 12
    kernels of the update; 128 bytes moved per fp32 parameter element beside the scalars."""
    trace, ops = _optimizer_ops(variant("cnn", optimizer={"type": "bert_adam",
                                                          "implementation": "for_loop",
                                                          "weight_decay": 0.01,
                                                          "max_grad_norm": 1.0}))
    assert len(ops) == 8 * (8 + 12)  # the cnn has 8 parameters
    scalar_bytes = sum(a.nbytes for o in ops for a in o.reads + o.writes
                       if a.tensor.numel <= len(trace.parameters))
    moved = sum(o.bytes_moved for o in ops) - scalar_bytes
    assert moved == 32 * trace.parameter_bytes
    assert trace.optimizer_state_bytes == 2 * trace.parameter_bytes  # next_m, next_v


def test_weight_decay_on_matrices_steps_biases_in_a_second_group():
    def ops(on, impl):
        spec = variant("cnn", optimizer={"type": "adamw", "implementation": impl,
                                         "weight_decay": 0.01, "weight_decay_on": on})
        return _optimizer_ops(spec)

    trace, every = ops("all", "for_loop")
    _, matrices = ops("matrices", "for_loop")
    vectors = [p for p in trace.parameters if len(p.shape) < 2]
    assert vectors and len(matrices) == len(every) - len(vectors)  # no decay_params for them
    decayed = [o.name for o in matrices if o.name.endswith("decay_params")]
    assert len(decayed) == len(trace.parameters) - len(vectors)
    # the 1-D group is stepped after the decayed one
    def of(group):
        return [i for i, o in enumerate(matrices) if any(f".{p.name}." in o.name for p in group)]

    assert max(of([p for p in trace.parameters if p not in vectors])) < min(of(vectors))
    # foreach and fused: every kernel once per group
    assert len(ops("matrices", "foreach")[1]) == 2 * len(ops("all", "foreach")[1]) - 1
    assert len(ops("matrices", "fused")[1]) == 2 * len(ops("all", "fused")[1])


@pytest.mark.parametrize("impl, kernels", [("foreach", 8), ("for_loop", 2 * 8 + 6)])
def test_grad_clip_reads_every_gradient_twice_and_writes_it_once(impl, kernels):
    base = variant("cnn")
    trace, plain = _optimizer_ops(base)
    from simulator.config.workload import GradClipSpec
    _, clipped = _optimizer_ops(dataclasses.replace(
        base, grad_clip=GradClipSpec(max_norm=1.0, implementation=impl)))
    extra = clipped[:len(clipped) - len(plain)]
    assert all(o.name.startswith("grad_clip.") for o in extra) and len(extra) == kernels
    grad_bytes = trace.parameter_bytes
    assert sum(o.bytes_read for o in extra) == pytest.approx(2 * grad_bytes, rel=1e-3)
    assert sum(o.bytes_written for o in extra) == pytest.approx(grad_bytes, rel=1e-3)


def _waits(spec) -> list[str]:
    return [o.name for o in build_trace(spec).ops if o.host_waits]


def test_the_host_waits_where_the_step_reads_a_result():
    """GradScaler.step reads found_inf (`.item()`) before a non-fused step, a fused one reads it
    in its kernel; apex O2 reads its overflow flag; NVIDIA's GradientClipper its norm;
    PyTorch before 1.10 its clip coefficient, per call (BertAdam: per parameter)."""
    from simulator.config.workload import Execution, GradClipSpec
    cnn_spec = variant("cnn")
    assert _waits(cnn_spec) == []  # fp32, no clipping: the host never waits inside the step
    amp = dataclasses.replace(cnn_spec, loss_scaling=True)
    assert _waits(amp) == ["grad_scaler.found_inf.item"]
    fused = variant("cnn", loss_scaling=True, optimizer={"implementation": "fused"})
    assert _waits(fused) == []
    o2 = variant("transformer", dtype="fp16", master_weights=True, loss_scaling=True,
                 optimizer={"type": "adamw", "implementation": "fused"},
                 grad_clip=GradClipSpec(max_norm=1.0, implementation="apex"))
    assert _waits(o2) == ["loss_scaler.overflow.item", "grad_clip.total_norm.item"]
    bert_adam = variant("cnn", optimizer={"type": "bert_adam", "implementation": "for_loop",
                                          "max_grad_norm": 1.0})
    n = len(build_trace(bert_adam).parameters)
    assert _waits(bert_adam) == []
    old_torch = dataclasses.replace(bert_adam, execution=Execution(clip_coef_on_host=True))
    waits = _waits(old_torch)
    assert len(waits) == n and all(w.endswith(".clip.coef_lt.item") for w in waits)
    clip = dataclasses.replace(cnn_spec, grad_clip=GradClipSpec(max_norm=1.0),
                               execution=Execution(clip_coef_on_host=True))
    assert _waits(clip) == ["grad_clip.coef_lt.item"]
    # PyTorch 1.9: `if total_norm.isnan() or total_norm.isinf()` first, two more waits a call
    torch_1_9 = dataclasses.replace(bert_adam, execution=Execution(
        clip_coef_on_host=True, clip_nonfinite_on_host=True))
    waits = _waits(torch_1_9)
    assert len(waits) == 3 * n
    assert [w.rsplit(".", 2)[-2] for w in waits[:3]] == ["isnan", "isinf", "coef_lt"]
    # PyTorch 1.4: each norm read on the host, the coefficient a Python float (two kernels)
    torch_1_4 = dataclasses.replace(bert_adam, execution=Execution(clip_norms_on_host=True))
    waits = _waits(torch_1_4)
    assert len(waits) == n and all(".clip.norm." in w for w in waits)
    clip_ops = [o for o in build_trace(torch_1_4).ops if ".clip." in o.name]
    assert len(clip_ops) == 3 * n  # norm, its read, scale


def test_master_weights_step_fp32_copies_of_fp16_parameters():
    """apex O2: fp16 gradients unscaled into fp32 master gradients, Adam on the masters (fp32
    state), the masters copied back into the fp16 model."""
    spec = variant("transformer", dtype="fp16", master_weights=True, loss_scaling=True,
                   optimizer={"type": "adamw", "implementation": "fused"})
    trace, ops = _optimizer_ops(spec)
    n = trace.parameter_count
    assert trace.parameter_bytes == 2 * n
    step_counters = 4 * len(trace.parameters)
    assert trace.optimizer_state_bytes == 12 * n + step_counters  # master, exp_avg, exp_avg_sq
    unscale, copy_back = ops[0], ops[-1]
    assert unscale.name == "master_weights.unscale_grads"
    assert unscale.bytes_read == 2 * n and unscale.bytes_written == 4 * n + 4
    assert copy_back.name == "master_weights.copy_to_model"
    assert copy_back.bytes_read == 4 * n and copy_back.bytes_written == 2 * n
    assert {a.tensor.id for a in copy_back.writes} == {p.id for p in trace.parameters}


def test_master_weights_default_to_loss_scaling_with_fp16(tmp_path):
    import json
    doc = json.loads((REPO_WORKLOADS / "transformer.json").read_text())
    doc["training"].update(dtype="fp16", master_weights=True)
    path = tmp_path / "o2.json"
    path.write_text(json.dumps(doc))
    assert load_workload(str(path)).loss_scaling
    doc["training"]["dtype"] = "bf16"
    path.write_text(json.dumps(doc))
    assert not load_workload(str(path)).loss_scaling


def test_bert_large_squad_is_nvidias_amp_recipe():
    """workloads/bert-large-squad.json: BertForQuestionAnswering on bert-large-uncased
    (334,094,338 parameters: bert-large's encoder and embeddings, no pooler, a 1024 x 2 span
    head), fp16 weights with fp32 masters, the overflow flag and the gradient norm read on the
    host, clipped, AdamW in two groups."""
    spec = load_workload("bert-large-squad")
    trace = build_trace(spec)
    assert trace.parameter_count == 334_094_338 and trace.parameter_bytes == 2 * 334_094_338
    names = [o.name for o in trace.ops_in(Phase.OPTIMIZER)]
    assert names[:5] == ["master_weights.unscale_grads", "loss_scaler.overflow.item",
                         "grad_clip.l2norm", "grad_clip.total_norm.item", "grad_clip.scale"]
    # the matrices, then the biases and LayerNorm weights
    assert [n for n in names if n.endswith("fused_step")] == ["adamw.fused_step",
                                                              "adamw.no_decay.fused_step"]
    assert names[-1] == "master_weights.copy_to_model"


# --- decoder-only transformers: well-known parameter counts and closed-form FLOPs ----------
def test_gpt2_small():
    trace = build_trace(load_workload("gpt2-small"))
    assert trace.parameter_count == 124_439_808           # tied lm_head, learned positions
    e, v, s, b, layers = 768, 50257, 1024, 4, 12
    t = b * s
    per_layer = 24 * e * e * t + 4 * b * s * s * e         # linears + two attention bmm's
    assert trace.flops(Phase.FORWARD) == layers * per_layer + 2 * v * e * t
    # backward: twice the linears, 5 bmm-equivalents for the fused attention (recompute)
    assert trace.flops(Phase.BACKWARD) == layers * (48 * e * e * t + 10 * b * s * s * e) \
        + 4 * v * e * t
    assert trace.causal_attention_flops == layers * 7 * 2 * b * s * s * e
    # the tied embedding gets two gradient contributions, summed into one .grad
    grads = [t for t in trace.tensors if t.category is Category.GRADIENT]
    assert len(grads) == len(trace.parameters)


def test_llama_7b_and_grouped_query_attention():
    spec = load_workload("llama-7b")
    trace = build_trace(spec)
    assert trace.parameter_count == 6_738_415_616
    assert trace.parameter_bytes == 2 * 6_738_415_616      # bf16
    gqa = dataclasses.replace(spec, model={**spec.model, "n_kv_head": 8})
    g = build_trace(gqa)
    # k and v projections shrink from 4096x4096 to 4096x1024 in each of 32 layers
    assert trace.parameter_count - g.parameter_count == 32 * 2 * 4096 * (4096 - 1024)
    assert any(op.name.endswith("repeat_k") for op in g.ops)
    assert g.flops(Phase.FORWARD) < trace.flops(Phase.FORWARD)


def test_bert_base_masked_lm():
    trace = build_trace(load_workload("bert-base"))
    assert trace.parameter_count == 109_514_298            # BertForMaskedLM, bert-base-uncased
    e, f, v, b, s, layers = 768, 3072, 30522, 32, 128, 12
    t = b * s
    per_layer = 2 * t * (4 * e * e + 2 * e * f) + 4 * b * s * s * e
    head = 2 * t * e * e + 2 * t * e * v
    assert trace.flops(Phase.FORWARD) == layers * per_layer + head
    assert trace.causal_attention_flops == 0


def test_bert_question_answering_head():
    """BertForQuestionAnswering (SQuAD fine-tuning): no masked-LM head, a linear layer to a
    start and an end logit per token, and a cross-entropy over the positions for each, as
    2 x batch rows of sequence-length logits."""
    spec = load_workload("bert-base")
    spec = dataclasses.replace(spec, model={**spec.model, "head": "question_answering"},
                               seq_len=384, batch_size=4, dataset=None)
    trace = build_trace(spec)
    e, f, v, b, s, layers = 768, 3072, 30522, 4, 384, 12
    mlm_head = e * e + e + 2 * e + v                       # transform, its LayerNorm, bias
    assert trace.parameter_count == 109_514_298 - mlm_head + 2 * e + 2
    t = b * s
    per_layer = 2 * t * (4 * e * e + 2 * e * f) + 4 * b * s * s * e
    assert trace.flops(Phase.FORWARD) == layers * per_layer + 2 * t * e * 2
    log_softmax = next(op for op in trace.ops if op.name == "loss.log_softmax")
    assert log_softmax.reads[0].tensor.shape == (2 * b, s)


def test_resnet50():
    trace = build_trace(load_workload("resnet50"))
    assert trace.parameter_count == 25_557_032             # torchvision resnet50
    fwd = trace.flops(Phase.FORWARD)
    assert fwd == 32 * 8_178_368_512                       # 4.09 GMAC per 224x224 image
    conv1_input_grad = 2 * 32 * 64 * 112 * 112 * 3 * 7 * 7  # the images need no gradient
    assert trace.flops(Phase.BACKWARD) == 2 * fwd - conv1_input_grad
    # BatchNorm running statistics are buffers: persistent, not parameters or optimizer state
    buffers = [t for t in trace.tensors if t.category is Category.BUFFER]
    assert len(buffers) == 53 * 3
    assert trace.optimizer_state_bytes == trace.parameter_bytes   # SGD momentum


def test_inplace_ops_share_their_storage():
    """torchvision's ReLU(inplace=True) and `out += identity` allocate nothing new."""
    trace = build_trace(load_workload("resnet50"))
    mem = profile(trace)
    aliases = [t for t in trace.tensors if t.alias_of is not None]
    assert len(aliases) == 17 + 16 * 2 + 16   # relus, residual sums
    assert sum(mem.at_peak.values()) == mem.peak_bytes
    # the stem's BatchNorm output lives until the in-place ReLU's backward reads it
    bn1 = next(t for t in trace.tensors if t.name == "bn1.out")
    relu_bwd = next(op for op in trace.ops if op.name == "relu.backward")
    assert any(a.tensor.storage is bn1 for a in relu_bwd.reads)


def test_gradient_accumulation_over_micro_batches():
    whole = build_trace(load_workload("gpt2-small"))
    spec = load_workload("gpt2-small")
    split = build_trace(dataclasses.replace(spec, micro_batches=4))
    assert split.parameter_count == whole.parameter_count
    for phase in (Phase.FORWARD, Phase.BACKWARD):
        assert split.flops(phase) == whole.flops(phase)
    assert profile(split).peak_bytes < 0.6 * profile(whole).peak_bytes
    # micro-batches after the first add into the .grad tensors the first one allocated
    grads = [t for t in split.tensors if t.category is Category.GRADIENT]
    assert len(grads) == len(split.parameters)
    adds = [op for op in split.ops if op.name.startswith("mb3/") and "grad_accumulate" in op.name]
    assert len(adds) >= len(split.parameters)
    assert len(split.ops_in(Phase.OPTIMIZER)) == len(whole.ops_in(Phase.OPTIMIZER))


def test_micro_batches_must_divide_the_batch(tmp_path):
    import json

    from simulator.errors import InputError

    doc = json.loads((REPO_WORKLOADS / "cnn.json").read_text())
    doc["data"]["micro_batches"] = 5
    path = tmp_path / "cnn.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match=r"micro_batches to divide batch_size \(64\)"):
        load_workload(str(path))


def _with(spec, **execution):
    return dataclasses.replace(spec, execution=dataclasses.replace(spec.execution, **execution))


def test_full_checkpointing_recomputes_every_block():
    spec = load_workload("gpt2-small")
    plain = build_trace(spec)
    full = build_trace(_with(spec, checkpointing="full"))
    lm_head = 2 * 50257 * 768 * 4 * 1024
    assert full.flops(Phase.FORWARD) == plain.flops(Phase.FORWARD)
    # the backward pass runs every block's forward again
    assert full.flops(Phase.BACKWARD) == plain.flops(Phase.BACKWARD) \
        + plain.flops(Phase.FORWARD) - lm_head
    assert any(op.name.startswith("recompute/h.11.") for op in full.ops_in(Phase.BACKWARD))
    assert profile(full).peak_bytes < 0.75 * profile(plain).peak_bytes
    grads = [t for t in full.tensors if t.category is Category.GRADIENT]
    assert len(grads) == len(full.parameters)


def test_selective_checkpointing_recomputes_attention_only():
    spec = _with(load_workload("gpt2-small"), attention="math")
    plain = build_trace(spec)
    selective = build_trace(_with(spec, checkpointing="selective"))
    attention_forward = 12 * 2 * 2 * 4 * 12 * 1024 * 1024 * 64
    assert selective.flops(Phase.BACKWARD) == plain.flops(Phase.BACKWARD) + attention_forward
    assert profile(selective).peak_bytes < profile(plain).peak_bytes


def test_full_checkpointing_recomputes_every_segment_of_a_sequential_cnn():
    """torch.utils.checkpoint around each convolution or linear layer and the layers after it
    up to the next: the backward runs the whole forward again, and only segment inputs stay."""
    spec = load_workload("vgg16")
    plain = build_trace(spec)
    full = build_trace(_with(spec, checkpointing="full"))
    assert full.flops(Phase.FORWARD) == plain.flops(Phase.FORWARD)
    assert full.flops(Phase.BACKWARD) == plain.flops(Phase.BACKWARD) + plain.flops(Phase.FORWARD)
    recomputed = {op.name for op in full.ops_in(Phase.BACKWARD) if op.name.startswith("recompute/")}
    assert {"recompute/features.0", "recompute/features.30", "recompute/avgpool",
            "recompute/classifier.6"} <= recomputed
    assert profile(full).peak_bytes < 0.9 * profile(plain).peak_bytes


def test_checkpointing_the_seed_models():
    for name in ("transformer", "resnet50", "cnn"):
        spec = load_workload(name)
        plain, full = build_trace(spec), build_trace(_with(spec, checkpointing="full"))
        assert full.parameter_count == plain.parameter_count
        assert full.flops(Phase.BACKWARD) > plain.flops(Phase.BACKWARD)
        assert profile(full).peak_bytes <= profile(plain).peak_bytes


@pytest.mark.parametrize("amp", ["fp16", "bf16"])
def test_mixed_precision(amp):
    spec = load_workload("gpt2-small")
    plain = build_trace(spec)
    mixed = build_trace(dataclasses.replace(
        spec, execution=dataclasses.replace(spec.execution, autocast=amp),
        loss_scaling=amp == "fp16"))
    # fp32 master weights, gradients and optimizer state; the same FLOPs
    assert mixed.parameter_bytes == plain.parameter_bytes
    assert mixed.optimizer_state_bytes == plain.optimizer_state_bytes
    grads = [t for t in mixed.tensors if t.category is Category.GRADIENT]
    assert len(grads) == len(mixed.parameters) and {g.dtype for g in grads} == {"fp32"}
    assert mixed.flops() == plain.flops()
    # matmuls run in the low type on weights cast once per forward pass
    matmuls = [op for op in mixed.ops if op.unit.value == "matrix"]
    assert {op.math_dtype for op in matmuls} == {amp}
    casts = [op for op in mixed.ops_in(Phase.FORWARD) if op.name.endswith(f".weight.to_{amp}")]
    assert len(casts) == 12 * 4 + 1   # four weights per block, and the tied lm_head
    # norms and the loss stay in fp32
    norm_ops = [op for op in mixed.ops_in(Phase.FORWARD) if op.kind == "norm"]
    assert {op.dtype for op in norm_ops} == {"fp32"}
    scaled = any(op.name == "grad_scaler.unscale" for op in mixed.ops_in(Phase.OPTIMIZER))
    assert scaled == (amp == "fp16")
    assert profile(mixed).peak_bytes < profile(plain).peak_bytes


def test_mixed_precision_on_the_seeds():
    for name in ("transformer", "cnn", "resnet50", "bert-base"):
        spec = load_workload(name)
        mixed = build_trace(dataclasses.replace(
            spec, execution=dataclasses.replace(spec.execution, autocast="fp16"),
            loss_scaling=True))
        grads = [t for t in mixed.tensors if t.category is Category.GRADIENT]
        assert len(grads) == len(mixed.parameters), name
        assert mixed.flops() == build_trace(spec).flops(), name


def test_structured_pruning():
    import json

    from simulator.config.workload import parse_workload

    for name, smaller_by in (("gpt2-small", 0.25), ("llama-7b", 0.25), ("bert-base", 0.25),
                             ("resnet50", 0.25), ("cnn", 0.25), ("transformer", 0.25)):
        raw = json.loads((REPO_WORKLOADS / f"{name}.json").read_text())
        base = build_trace(parse_workload(raw, name))
        raw["training"]["pruning"] = {"fraction": smaller_by}
        pruned = build_trace(parse_workload(raw, name))
        assert pruned.parameter_count < base.parameter_count, name
        assert pruned.flops() < base.flops(), name
    # GPT-2 small, a quarter of the heads and feed-forward channels gone: 9 heads of 64
    raw = json.loads((REPO_WORKLOADS / "gpt2-small.json").read_text())
    raw["training"]["pruning"] = {"fraction": 0.25}
    spec = parse_workload(raw, "gpt2-small")
    assert spec.model["n_head"] == 9 and spec.model["head_dim"] == 64
    assert spec.model["d_ff"] == 2304
    e, inner, f, layers = 768, 576, 2304, 12
    per_layer = ((e * 3 * inner + 3 * inner) + (inner * e + e) + 2 * (2 * e)
                 + (e * f + f) + (f * e + e))
    embeddings = 50257 * e + 1024 * e
    assert build_trace(spec).parameter_count == embeddings + layers * per_layer + 2 * e


@pytest.mark.parametrize("name", ["gpt2-small", "transformer", "resnet50", "cnn", "bert-base"])
def test_int8_weight_quantization(name):
    spec = load_workload(name)
    plain = build_trace(spec)
    q = build_trace(dataclasses.replace(
        spec, execution=dataclasses.replace(spec.execution, weight_quantization="int8")))
    assert q.parameter_count == plain.parameter_count
    frozen = [p for p in q.parameters if not p.requires_grad]
    assert frozen and all(p.dtype == "int8" for p in frozen)
    assert q.parameter_bytes < plain.parameter_bytes
    # frozen weights get no gradient and no optimizer state; everything else still trains
    grads = [t for t in q.tensors if t.category is Category.GRADIENT]
    assert len(grads) == len(q.parameters) - len(frozen)
    assert q.optimizer_state_bytes < plain.optimizer_state_bytes
    # the forward pass does the same matmuls on weights dequantized once per pass
    assert q.flops(Phase.FORWARD) == plain.flops(Phase.FORWARD)
    assert q.flops(Phase.BACKWARD) < plain.flops(Phase.BACKWARD)
    dequant = [op for op in q.ops_in(Phase.FORWARD) if op.name.endswith(".dequantize")]
    assert len(dequant) == len(frozen)
    assert profile(q).peak_bytes < profile(plain).peak_bytes


def _score_passes(trace, phase):
    """Elementwise ops of one layer's attention core that move a whole score matrix (dropout
    left out: not every workload trains with it)."""
    return sorted(op.name.split(".sdpa.")[-1] for op in trace.ops_in(phase)
                  if ".0." in op.name and ".sdpa." in op.name and op.kind == "elementwise"
                  and "dropout" not in op.name)


@pytest.mark.parametrize("name, mask", [("gpt2-small", "where"), ("bert-base", "add")])
def test_eager_attention_scales_and_masks_the_scores(name, mask):
    """Hugging Face's eager attention: the same FLOPs as the math path, but the scale runs on
    the score matrix after the bmm, and the mask is a pass of its own (torch.where for a
    causal decoder, whose backward is one more pass; an added padding mask, whose backward
    hands the gradient on)."""
    spec = load_workload(name)
    math_trace = build_trace(_with(spec, attention="math"))
    eager = build_trace(_with(spec, attention="eager"))
    assert eager.flops() == math_trace.flops()
    assert _score_passes(math_trace, Phase.FORWARD) == ["scale", "softmax"]
    assert _score_passes(eager, Phase.FORWARD) == ["mask", "scale", "softmax"]
    fwd = {op.name.split(".sdpa.")[-1]: op for op in eager.ops_in(Phase.FORWARD)
           if ".0." in op.name and ".sdpa." in op.name}
    assert fwd["scale"].reads[0].nbytes == fwd["qk"].writes[0].nbytes  # the scores, not q
    # softmax's backward multiplies grad by the output first (softmax_backward_cuda_out)
    backward = ["scale.backward", "softmax.backward", "softmax.backward_mul"]
    if mask == "where":
        backward.insert(0, "mask.backward")
    assert _score_passes(eager, Phase.BACKWARD) == backward
    assert sum(op.bytes_moved for op in eager.ops) > \
        sum(op.bytes_moved for op in math_trace.ops)


def test_eager_matmul_copies_head_split_operands_that_do_not_fold():
    """torch.matmul reshapes a (batch, heads, len, dim) view to one bmm batch: from batch 2 a
    head split's dims do not collapse, so q, k's transpose and v are copied first and the bmms
    read the copies, forward and backward; at batch 1 the views go to bmm as they are."""
    spec = load_workload("bert-base")
    b, s, e, heads = 32, 128, 768, 12

    def attention_ops(batch):
        trace = build_trace(_with(dataclasses.replace(spec, batch_size=batch), attention="eager"))
        return {op.name.split(".sdpa.")[-1]: op for op in trace.ops
                if op.name.startswith("layer.0.sdpa.")}

    ops = attention_ops(b)
    copies = {n: ops[n] for n in ("q_copy", "k_copy", "v_copy")}
    for op in copies.values():
        assert op.kind == "copy" and op.reads[0].pattern is Pattern.STRIDED
        assert op.bytes_read == op.bytes_written == b * s * e * 4
    assert copies["k_copy"].writes[0].tensor.shape == (b * heads, e // heads, s)  # k transposed
    for bmm, operand in (("qk", "q_copy"), ("qk", "k_copy"), ("av", "v_copy"),
                         ("qk.grad_q", "k_copy"), ("qk.grad_k", "q_copy"),
                         ("av.grad_probs", "v_copy")):
        read = {a.tensor.storage.id for a in ops[bmm].reads}
        assert copies[operand].writes[0].tensor.storage.id in read, (bmm, operand)
    assert not {"q_copy", "k_copy", "v_copy"} & set(attention_ops(1))


def test_gelu_new_runs_as_hugging_faces_eight_eager_kernels():
    """GPT-2's NewGELUActivation in eager PyTorch: eight elementwise passes forward where GELU
    is one; in backward three for x ** 3, one each for the two scalings, the half and tanh,
    two for the product, none for the additions."""
    spec = load_workload("gpt2-small")
    one = build_trace(dataclasses.replace(spec, model={**spec.model, "mlp": "gelu"}))
    eager = build_trace(dataclasses.replace(spec, model={**spec.model, "mlp": "gelu_new"}))

    def kernels(trace, phase):
        return [op.name for op in trace.ops_in(phase) if op.name.startswith("h.0.mlp.gelu")
                and "grad_accumulate" not in op.name]

    assert len(kernels(one, Phase.FORWARD)) == 1
    assert len(kernels(eager, Phase.FORWARD)) == 8
    assert len(kernels(eager, Phase.BACKWARD)) == 3 + 1 + 1 + 1 + 1 + 2
    assert eager.flops() == one.flops()
    assert profile(eager).peak_bytes > profile(one).peak_bytes  # it keeps more for backward


def test_relu_mlp_is_one_pass_whose_backward_reads_its_output():
    """OPT's ReLU feed-forward: one elementwise kernel forward, one threshold_backward reading
    the gradient and the ReLU's output (not its input), the same bytes as GELU's forward."""
    spec = load_workload("gpt2-small")
    gelu = build_trace(dataclasses.replace(spec, model={**spec.model, "mlp": "gelu"}))
    relu = build_trace(dataclasses.replace(spec, model={**spec.model, "mlp": "relu"}))
    fwd = [op for op in relu.ops_in(Phase.FORWARD) if op.name == "h.0.mlp.relu"]
    bwd = [op for op in relu.ops_in(Phase.BACKWARD) if op.name.startswith("h.0.mlp.relu")
           and "grad_accumulate" not in op.name]
    assert len(fwd) == 1 and fwd[0].kind == "elementwise" and len(bwd) == 1
    assert fwd[0].writes[0].tensor in [a.tensor for a in bwd[0].reads]
    assert fwd[0].reads[0].tensor not in [a.tensor for a in bwd[0].reads]
    gelu_fwd = next(op for op in gelu.ops_in(Phase.FORWARD) if op.name == "h.0.mlp.gelu")
    assert fwd[0].bytes_moved == gelu_fwd.bytes_moved
