"""Predicted against measured: the simulator on public measurements of GDDR6 GPUs.

    python benchmarks/measured_fidelity.py [--sample N] [--jobs N] [--fidelity F] [--only PART]
                                           [--json]

Kernels: T4 GEMMs (linear and bmm), convolutions and vector ops (elementwise, softmax, layer
norm) measured alone by NeuSight, each built as a one-kernel step and timed by the simulator
from a cool card, host dispatch included, as a lone measured kernel includes its own. End to
end: Lambda's ResNet-50 training throughput on fourteen GDDR6 cards (step = batch / images per
second) and NeuSight's L4 training steps (BERT-large at batch 2 and 8, GPT-2 large), forward
and backward apart. BERT SQuAD, apart from those: Lambda's BERT-large and BERT-base SQuAD
fine-tuning throughput on the same GDDR6 cards (fp32 and apex O2 AMP), a workload the model was
not built beside. Laptops, apart from both: the same two benchmarks on Lambda's four laptop
GPUs (RTX 2070, 2080 and 2080 Super Max-Q, RTX 3080 Max-Q 16 GB), each at the rated boost
of the variant TechPowerUp lists. Inference, apart from the training figures: NeuSight's fp32
forwards of BERT-large and GPT-2 large on the T4 and the L4, and the small batches' VGG forwards.
Operators: the forward ops NeuSight timed of three L4 training steps and six L4 inference runs
(the embedding, the first block and the head), each op of the step's trace timed as NeuSight
timed it: alone, called again and again, on NeuSight's inputs; T4 operators: the same from
NeuSight's four T4 inference runs of BERT-large and GPT-2 large, GEMMs and the rest apart. Row
kernels: NeuSight's layer norm, softmax and ReLU on large tensors (25 MB and up) on the T4 and
the L4, card and kernel apart. Held-out kernels: NeuSight's test set, GEMMs and elementwise ops
of transformer shapes on the T4 and the L4, measured in a campaign of their own, by card and
class. Small batch: torchvision ResNets (18 to 152) and VGGs (11 to 19, with and without batch
norm) trained at batch 12 in fp32 and in fp16 (`model.half()`) on an RTX 2080 Ti and a Titan
RTX by ryujaehun/pytorch-gpu-benchmark, zero_grad, forward and backward timed together with the
input's copy to the GPU; FP64: the same runs' FP64 steps and VGG inference
(`model.double()`), apart. H200 convolutions: this project's measurements of ResNet-50's
distinct convolutions, forward and backward, FP32, TF32 and FP16 (NCHW and channels-last),
each timed as a lone op through the library model (no GDDR6 replay: HBM3). Data and sources:
benchmarks/measured/.

Prints one row per end-to-end case and per kernel class, then the summary: median, p90 and
max absolute error as fractions of the measured time. `--json` prints
{"kernels": {"gemm": ..., "conv2d": ..., "vector": ...}, "end_to_end": ..., "bert_squad": ...,
"laptops": ..., "small_batch": ..., "fp64": ..., "inference": ..., "operators": ...,
"t4_operators": ..., "row_kernels": ..., "h200_convs": ..., "held_out_kernels": ...}, each
with `cases`, `median_abs_error`, `p90_abs_error` and `max_abs_error`, and its `rows`
(`t4_operators` also `by_class`: `gemm` and `other`; `laptops` `resnet50` and `bert_squad`;
`fp64` `resnet`, `wide_resnet` and `vgg`; `row_kernels` one class per card and kernel,
`h200_convs` one per path and direction, `held_out_kernels` per card and class, without
rows; `held_out_kernels` also `t4_campaign_ratio`: its T4 GEMMs' time per FLOP against the
kernel set's of like shape).

Every case by default: about 67 minutes on two cores, 28 of them the kernel classes' 51,524
rows, 10 the held-out kernels' 7,480, 7 the small batches' 60 steps, 4 their 30 in FP64, 1
the laptops' 18.
`--sample N` takes a seeded random N of each kernel class instead, and of each held-out card's
class, for a quick look (300: about two minutes; a sample's median strays a point or two from
the whole class's).
`--jobs N` runs the kernel cases, Lambda's steps and the small batches in N worker processes
(default: the CPUs this process may use), each replaying on its share of the CPUs, with the
same figures for any N (one process: about an hour and a half on two cores).
"""

from __future__ import annotations

import argparse
import copy
import csv
import dataclasses
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from functools import cache
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from simulator.config.hardware import Hardware, load_hardware  # noqa: E402
from simulator.config.host import Pcie  # noqa: E402
from simulator.config.loader import read_json  # noqa: E402
from simulator.config.workload import Execution, parse_workload  # noqa: E402
from simulator.gpu.compute import TILED_KINDS, kernel_compute, launch_overhead_s  # noqa: E402
from simulator.gpu.dispatch import dispatch_s  # noqa: E402
from simulator.pipeline import analyze  # noqa: E402
from simulator.replay import replay  # noqa: E402
from simulator.sweep.execute import worker_start  # noqa: E402
from simulator.threads import usable_cpus  # noqa: E402
from simulator.workload import layers as L  # noqa: E402
from simulator.workload.allocator import place  # noqa: E402
from simulator.workload.builder import ZERO_GRAD_PREFIX, TraceBuilder  # noqa: E402
from simulator.workload.generate import build_trace  # noqa: E402
from simulator.workload.trace import Category, Op, Pattern, Phase, Trace, Unit  # noqa: E402

DATA = Path(__file__).resolve().parent / "measured"
REPO = Path(__file__).resolve().parent.parent
SEED = 20251204
MS = 1e-3


def _map(fn: Callable, items: Iterable, jobs: int) -> list:
    """fn over items, in order; in `jobs` worker processes when more than one, started as a
    sweep's workers are (each runs the GDDR6 engine on its share of the CPUs)."""
    items = list(items)
    if jobs <= 1 or len(items) < 2:
        return [fn(x) for x in items]
    with ProcessPoolExecutor(jobs, initializer=worker_start,
                             initargs=(max(1, usable_cpus() // jobs),)) as pool:
        return list(pool.map(fn, items, chunksize=max(1, len(items) // (16 * jobs))))


@cache
def _card(name: str) -> Hardware:
    return load_hardware(name)


# --- one-kernel steps -------------------------------------------------------------------------
def _builder(operand_values: str = "random") -> TraceBuilder:
    """FP32 with TF32 off for matmuls and convolutions, as NeuSight measured; its GEMMs ran on
    `torch.randn` inputs, its convolutions and vector ops on `torch.zeros` (`collect.py` at
    sitar-lab/NeuSight@6945927), on which the T4 holds a higher clock (gpu/clocks.py)."""
    return TraceBuilder("kernel", "fp32", Execution(allow_tf32_matmul=False,
                                                    allow_tf32_conv=False,
                                                    operand_values=operand_values))


def _input(b: TraceBuilder, name: str, shape: tuple[int, ...]):
    return b.tensor(name, shape, Category.INPUT)


def gemm_trace(row: dict) -> Trace:
    """`nn.Linear(k, n)` on m rows, or `torch.bmm` of `batch` (m x k)(k x n) products."""
    b = _builder()
    m, n, k, batch = (int(row[c]) for c in ("m", "n", "k", "batch"))
    if row["op"] == "linear":
        w = b.parameter("linear.weight", (n, k), matmul_weight=True)
        bias = b.parameter("linear.bias", (n,)) if int(row["bias"]) else None
        L.linear(b, _input(b, "x", (m, k)), w, bias, "linear")
    else:
        x, y = _input(b, "a", (batch, m, k)), _input(b, "b", (batch, k, n))
        out = b.activation("bmm.out", (batch, m, n), x, y)
        b.op("bmm", "matmul", [x, y], [out], 2 * batch * m * n * k, Unit.MATRIX,
             math_dtype="fp32")
    return b.trace()


# a convolution row's shape: its columns in the convolution CSVs
CONV_COLUMNS = ("batch", "in_channels", "out_channels", "kernel_size", "input_size", "stride",
                "padding")


def conv_trace(row: dict) -> Trace:
    """`nn.Conv2d(in, out, kernel, stride, padding, bias=False)` forward, on a zero input."""
    b = _builder("zeros")
    n, c_in, c_out, k, size, stride, pad = (int(row[c]) for c in CONV_COLUMNS)
    w = b.parameter("conv.weight", (c_out, c_in, k, k), matmul_weight=True)
    L.conv2d(b, _input(b, "x", (n, c_in, size, size)), w, None, stride, pad, "conv")
    return b.trace()


BINARY = ("add", "mul", "div", "pow")


def vector_trace(row: dict) -> Trace:
    """One op on a rows x cols tensor: binary, with a scalar (`...u`), unary, softmax over
    cols, or LayerNorm(cols)."""
    b = _builder("zeros")
    shape = (int(row["rows"]), int(row["cols"]))
    op = row["op"]
    x = _input(b, "x", shape)
    if op == "ln":
        w, bias = b.parameter("ln.weight", shape[-1:]), b.parameter("ln.bias", shape[-1:])
        L.layer_norm(b, x, w, bias, "ln")
        return b.trace()
    if op == "softmax":
        reads = [L.softmax_reads(x, 3)]
    else:
        reads = [x, _input(b, "y", shape)] if op in BINARY else [x]
    out = b.activation(f"{op}.out", shape, x)
    b.op(op, "elementwise", reads, [out])
    return b.trace()


KERNELS: dict[str, tuple[str, Callable[[dict], Trace]]] = {
    "gemm": ("t4_fp32_gemm.csv", gemm_trace),
    "conv2d": ("t4_fp32_conv2d.csv", conv_trace),
    "vector": ("t4_fp32_vector_ops.csv", vector_trace),
}


def _forward_s(trace: Trace, hw: Hardware, fidelity: str, memo: dict) -> float:
    """A lone op as NeuSight timed it: after an idle pause (the card cool: gpu/clocks.py),
    from the host's call to the kernel's end."""
    est = replay(trace, hw, fidelity, dram_memo=memo, placement=place(trace), initial_heat=0.0)
    return sum(o.time_s for o in est.ops if o.op.phase == Phase.FORWARD)


def read_rows(file: str) -> list[dict]:
    """The rows of a CSV file in benchmarks/measured/."""
    with (DATA / file).open(newline="") as f:
        return list(csv.DictReader(f))


# a process's DRAM results by traffic shape, shared by its kernel cases (replay's dram_memo)
_KERNEL_MEMO: dict = {}


def _lone_kernel(trace: Trace, hw: Hardware, card: str, row: dict, fidelity: str) -> dict:
    """A measured row's one-kernel step on `hw`, named `card` and the row's other columns."""
    predicted = _forward_s(trace, hw, fidelity, _KERNEL_MEMO)
    case = " ".join(f"{k}={v}" for k, v in row.items() if k not in ("hardware", "latency_ms"))
    return _result(f"{card} {case}", predicted, float(row["latency_ms"]) * MS)


def _kernel_case(job: tuple[str, dict, str]) -> dict:
    kind, row, fidelity = job
    return _lone_kernel(KERNELS[kind][1](row), _card("t4"), "t4", row, fidelity)


def kernel_rows(kind: str, sample: int, fidelity: str, jobs: int = 1) -> list[dict]:
    """The T4's kernels of a class: every row, or a seeded `sample` of them."""
    rows = read_rows(KERNELS[kind][0])
    if sample and sample < len(rows):
        rows = random.Random(f"{SEED}-{kind}").sample(rows, sample)
    return _map(_kernel_case, ((kind, row, fidelity) for row in rows), jobs)


# --- whole steps ------------------------------------------------------------------------------
def _workload(raw: dict, name: str):
    return parse_workload(raw, f"{name} (benchmarks/measured_fidelity.py)")


@cache
def _resnet50() -> dict:
    return read_json(REPO / "workloads" / "resnet50.json")


# Every Lambda run is PyTorch 1.x (NGC containers 20.01-22.12), whose optimizer.zero_grad()
# after each step fills the gradients with zeros (set_to_none=False, the default before 2.0;
# apex amp's O2 zero_grad does the same to the model's fp16 gradients): the backward then adds
# into them (github.com/LambdaLabsML/DeepLearningExamples: ConvNets' Trainer.train_step and
# BERT's run_squad.py call optimizer.zero_grad() after optimizer.step())
LAMBDA_ZERO_GRAD = "zeros"


def _resnet_case(job: tuple[dict, str]) -> dict:
    row, fidelity = job
    raw = copy.deepcopy(_resnet50())
    raw["data"]["batch_size"] = int(row["batch_size"])
    raw["training"]["execution"] = {"allow_tf32_matmul": True, "zero_grad": LAMBDA_ZERO_GRAD}
    if row["precision"] == "amp":
        raw["training"]["mixed_precision"] = "fp16"
    step = analyze(_workload(raw, "resnet50"), _card(row["hardware"]),
                   fidelity=fidelity).estimate.step_time_s
    measured = int(row["batch_size"]) / float(row["images_per_s"])
    return _result(f"{row['hardware']} resnet50 {row['precision']} batch {row['batch_size']} "
                   f"({row['lambda_system']}, {row['run_date']})", step, measured)


# Lambda's laptop GPUs, at the rated boost of the variant TechPowerUp lists (a laptop's clocks
# and power limit are its maker's setting within NVIDIA's range for the part): a part of their
# own, added after the model stood and consulted for nothing
LAPTOPS = frozenset({"rtx-2070-max-q", "rtx-2080-max-q", "rtx-2080-super-max-q",
                     "rtx-3080-max-q-16gb"})


def lambda_rows(fidelity: str, cards: dict[str, str] | None = None, jobs: int = 1,
                laptops: bool = False) -> list[dict]:
    """ResNet-50 v1.5 training steps: Lambda's batch, AMP or fp32 with TF32 allowed. `cards`:
    only these cards' rows, each at the precision named (amp or fp32); `laptops`: the laptop
    GPUs' rows (LAPTOPS) instead of the others'."""
    return _map(_resnet_case, ((row, fidelity) for row in read_rows("lambda_resnet50_train.csv")
                               if (row["hardware"] in LAPTOPS) == laptops
                               and (cards is None or cards.get(row["hardware"]) ==
                                    row["precision"])), jobs)


# NeuSight's L4 training steps (benchmarks/measured/l4_fp32_training_steps.csv): fp32, TF32
# off, Hugging Face's eager attention (its per-op rows show the scores divided and masked on
# their own) and GPT-2's gelu_new (its rows show the eight kernels), forward and backward timed
# apart, no optimizer step
GPT2_LARGE = {"type": "decoder_only_transformer", "vocab_size": 50257, "n_layer": 36,
              "d_model": 1280, "n_head": 20, "context": 1024, "positions": "learned",
              "norm": "layernorm", "mlp": "gelu_new", "bias": True, "tie_embeddings": True,
              "dropout": 0.1}
L4_MODELS = {
    "bert-large": {"type": "encoder_only_transformer", "vocab_size": 30522, "n_layer": 24,
                   "d_model": 1024, "n_head": 16, "d_ff": 4096, "max_positions": 512,
                   "type_vocab_size": 2, "dropout": 0.1},
    "gpt2-large": GPT2_LARGE,
    # NeuSight's "gpt3_xl" and "gpt3_27" (its scripts/asplos/data/DLmodel_configs/): Hugging
    # Face's GPT2LMHeadModel at GPT-3 sizes, as it configured them
    "gpt3-xl": GPT2_LARGE | {"n_layer": 24, "d_model": 3072, "n_head": 24, "context": 2048},
    "gpt3-2.7b": GPT2_LARGE | {"n_layer": 32, "d_model": 2560, "n_head": 32, "context": 2048},
    # NeuSight's "opt_13", facebook/opt-1.3b: pre-norm, ReLU feed-forward of 8192, tied
    # embeddings; its eager attention scales q and adds and clamps the causal mask (two passes
    # over the scores, as GPT-2's divide and mask)
    "opt-1.3b": GPT2_LARGE | {"vocab_size": 50272, "n_layer": 24, "d_model": 2048, "n_head": 32,
                              "d_ff": 8192, "context": 2048, "mlp": "relu"},
}


def l4_step(model: str, batch: int, seq_len: int, training: bool = True) -> dict:
    """The workload of a NeuSight L4 step; for an inference run, without dropout (an identity
    in eval mode), whose forward ops are the inference's. NeuSight's measure_e2e
    (neusight/Tracing/trace.py) runs its 25 training steps with neither zero_grad nor an
    optimizer step: every backward after the first adds into the .grad the first one left, as
    a kept gradient is added into (the fills the trace puts after its optimizer are in no
    phase it times)."""
    model_spec = L4_MODELS[model] if training else dict(L4_MODELS[model], dropout=0.0)
    return {"format_version": 1, "name": f"{model}-neusight", "model": model_spec,
            "data": {"batch_size": batch, "seq_len": seq_len},
            "training": {"dtype": "fp32", "loss": "cross_entropy",
                         "optimizer": {"type": "adamw"},
                         "execution": {"attention": "eager", "allow_tf32_matmul": False,
                                       "allow_tf32_conv": False,
                                       "zero_grad": "zeros" if training else "none"}}}


@cache
def l4_estimate(model: str, batch: int, seq_len: int, fidelity: str):
    """One NeuSight L4 training step replayed."""
    spec = _workload(l4_step(model, batch, seq_len), model)
    return analyze(spec, load_hardware("l4"), fidelity=fidelity).estimate


def _forward_without(est, prefixes: tuple[str, ...]) -> float:
    """The forward phase's seconds less the ops whose names start with `prefixes`."""
    return sum(o.time_s for o in est.ops
               if o.op.phase is Phase.FORWARD and not o.op.name.startswith(prefixes))


def l4_rows(fidelity: str) -> list[dict]:
    out = []
    for row in read_rows("l4_fp32_training_steps.csv"):
        batch, seq = int(row["batch"]), int(row["seq_len"])
        est = l4_estimate(row["model"], batch, seq, fidelity)
        # NeuSight times model(inputs) and loss.backward(): the loss's forward runs between
        forward = _forward_without(est, ("loss.",))
        for phase, col, predicted in ((Phase.FORWARD, "forward_ms", forward),
                                      (Phase.BACKWARD, "backward_ms",
                                       est.phase(Phase.BACKWARD).time_s)):
            out.append(_result(f"l4 {row['model']} {batch}x{seq} fp32 {phase.value}",
                               predicted, float(row[col]) * MS))
    return out


# NeuSight's L4 operators of three of those training steps (benchmarks/measured/
# l4_fp32_<model>_train_<seq>_<batch>.csv: BERT-large at batch 2 and 8 x 512, the embedding, the
# first encoder layer and the heads; GPT-2 large at batch 1 x 1024, the embedding, the first
# block and the head) and of the L4's six inference runs below (l4_fp32_<model>_inference_
# <seq>_<batch>.csv), each op timed alone, forward, against the same ops of the step's trace,
# each timed as NeuSight's run_kernel times it (neusight/Tracing/analysis.py at
# sitar-lab/NeuSight@6945927): after an idle pause, one untimed call, then 25 calls each between
# two CUDA events and followed by a synchronize, the mean of the fastest 5. Each call's output
# goes where the last one's was (`result = None` frees it first), and finds its inputs in the L2
# where they fit. Host-only rows (views, sizes) and ops the model folds into others are left out.
BERT_OPERATORS = {
    "bert_embeddings_word_embeddings": "embeddings.word",
    "bert_embeddings_token_type_embeddings": "embeddings.token_type",
    "bert_embeddings_position_embeddings": "embeddings.position",
    "add_2": "embeddings.sum_type",
    "add_3": "embeddings.sum_pos",
    "bert_embeddings_layer_norm": "embeddings.LayerNorm",
    "bert_embeddings_dropout": "embeddings.dropout",
    "bert_encoder_layer_0_attention_self_query": "layer.0.query",
    "bert_encoder_layer_0_attention_self_key": "layer.0.key",
    "bert_encoder_layer_0_attention_self_value": "layer.0.value",
    "matmul": "layer.0.sdpa.qk",
    "truediv": "layer.0.sdpa.scale",
    "add_7": "layer.0.sdpa.mask",
    "softmax": "layer.0.sdpa.softmax",
    "bert_encoder_layer_0_attention_self_dropout": "layer.0.sdpa.dropout",
    "matmul_1": "layer.0.sdpa.av",
    "contiguous": "layer.0.heads_merge",
    "bert_encoder_layer_0_attention_output_dense": "layer.0.attention.output",
    "bert_encoder_layer_0_attention_output_dropout": "layer.0.attention.dropout",
    "add_9": "layer.0.attention.residual",
    "bert_encoder_layer_0_attention_output_layer_norm": "layer.0.attention.LayerNorm",
    "bert_encoder_layer_0_intermediate_dense": "layer.0.intermediate",
    "gelu": "layer.0.gelu",
    "bert_encoder_layer_0_output_dense": "layer.0.output",
    "bert_encoder_layer_0_output_dropout": "layer.0.dropout",
    "add_10": "layer.0.residual",
    "bert_encoder_layer_0_output_layer_norm": "layer.0.LayerNorm",
    "cls_predictions_transform_dense": "cls.transform",
    "gelu_1": "cls.gelu",
    "cls_predictions_transform_layer_norm": "cls.LayerNorm",
    "cls_predictions_decoder": "cls.decoder",
}

GPT2_OPERATORS = {
    "transformer_wte": "wte",
    "transformer_wpe": "wpe",
    "add_1": "embed_sum",
    "transformer_drop": "drop",
    "transformer_h_0_ln_1": "h.0.ln_1",
    "addmm": "h.0.attn.c_attn",
    "matmul": "h.0.attn.sdpa.qk",
    "truediv": "h.0.attn.sdpa.scale",
    "where": "h.0.attn.sdpa.mask",
    "softmax": "h.0.attn.sdpa.softmax",
    "transformer_h_0_attn_attn_dropout": "h.0.attn.sdpa.dropout",
    "matmul_1": "h.0.attn.sdpa.av",
    "contiguous": "h.0.attn.heads_merge",
    "addmm_1": "h.0.attn.c_proj",
    "transformer_h_0_attn_resid_dropout": "h.0.attn.resid_dropout",
    "add_10": "h.0.attn.residual",
    "transformer_h_0_ln_2": "h.0.ln_2",
    "addmm_2": "h.0.mlp.c_fc",
    # Hugging Face's gelu_new, op by op: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
    "mul": "h.0.mlp.gelu.half",
    "pow_2": "h.0.mlp.gelu.cube",
    "mul_1": "h.0.mlp.gelu.scale_cube",
    "add_12": "h.0.mlp.gelu.sum",
    "mul_2": "h.0.mlp.gelu.scale_sum",
    "tanh": "h.0.mlp.gelu.tanh",
    "add_13": "h.0.mlp.gelu.one_plus",
    "mul_3": "h.0.mlp.gelu.product",
    "addmm_3": "h.0.mlp.c_proj",
    "transformer_h_0_mlp_dropout": "h.0.mlp.dropout",
    "add_15": "h.0.mlp.residual",
    "transformer_ln_f": "ln_f",
    "lm_head": "lm_head",
}
# Inference (eval mode, no_grad): the same ops less dropout, an identity there, and BERT's
# masked-LM head (a sequence classifier is timed: its head is a few small ops)
BERT_INFERENCE = {k: v for k, v in BERT_OPERATORS.items()
                  if "dropout" not in v and not v.startswith("cls.")}
GPT2_INFERENCE = {k: v for k, v in GPT2_OPERATORS.items() if "drop" not in v}
# NeuSight's runs whose operators are compared: (its file's stem, model, batch, sequence,
# training?, NeuSight's name -> the trace's); a card's file is <card>_fp32_<stem>.csv
L4_TRAINING_STEPS = (
    ("bert_large_train_512_2", "bert-large", 2, 512, True, BERT_OPERATORS),
    ("bert_large_train_512_8", "bert-large", 8, 512, True, BERT_OPERATORS),
    ("gpt2_large_train_1024_1", "gpt2-large", 1, 1024, True, GPT2_OPERATORS),
)
INFERENCE_RUNS = (  # run on the T4 and the L4
    ("bert_large_inference_512_8", "bert-large", 8, 512, False, BERT_INFERENCE),
    ("bert_large_inference_512_16", "bert-large", 16, 512, False, BERT_INFERENCE),
    ("gpt2_large_inference_1024_4", "gpt2-large", 4, 1024, False, GPT2_INFERENCE),
    ("gpt2_large_inference_1024_8", "gpt2-large", 8, 1024, False, GPT2_INFERENCE),
)
L4_OPERATOR_STEPS = L4_TRAINING_STEPS + INFERENCE_RUNS + (
    ("gpt3_xl_inference_2048_2", "gpt3-xl", 2, 2048, False, GPT2_INFERENCE),
    ("gpt3_27_inference_2048_2", "gpt3-2.7b", 2, 2048, False, GPT2_INFERENCE),
)
# The T4 of NeuSight's inference runs ran long GEMMs faster than the T4 of its kernel set
# (t4_fp32_gemm.csv) on like shapes
T4_OPERATOR_STEPS = INFERENCE_RUNS


NEUSIGHT_CALLS, NEUSIGHT_FASTEST = 25, 5  # run_kernel's `active` and `sample`


def timed_alone(trace: Trace, ops: list[Op], hw: Hardware, fidelity: str) -> float:
    """Seconds NeuSight's run_kernel reports for one call of a step (see above) that runs `ops`:
    the call made 1 + NEUSIGHT_CALLS times from a cool card, the host waiting for each call to
    finish."""
    n = len(ops)
    calls = [dataclasses.replace(op, index=i * n + j, host_waits=j == n - 1)
             for i in range(1 + NEUSIGHT_CALLS) for j, op in enumerate(ops)]
    alone = dataclasses.replace(trace, ops=calls, releases={})
    est = replay(alone, hw, fidelity, placement=place(alone), initial_heat=0.0)
    per_call = [sum(o.time_s for o in est.ops[i * n:(i + 1) * n])
                for i in range(1, 1 + NEUSIGHT_CALLS)]
    return statistics.mean(sorted(per_call)[:NEUSIGHT_FASTEST])


# The copies torch.matmul makes of a head-split operand before its bmm, where the view's batch
# dims do not fold (simulator/workload/layers.py, _attention_math): inside the one call
MATMUL_COPIES = {"qk": ("q_copy", "k_copy"), "av": ("v_copy",)}


# NeuSight fed its models input_ids = torch.ones (neusight/Tracing/trace.py at
# sitar-lab/NeuSight@6945927), and BERT's token types default to zeros: every index of these
# lookups is the same, so the gather reads one row, the caches serve the rest
CONSTANT_INDEX_LOOKUPS = ("embeddings.word", "embeddings.token_type", "wte")


def as_fed(op: Op) -> Op:
    """The op on NeuSight's inputs: a lookup of one repeated index reads its row once."""
    if op.name not in CONSTANT_INDEX_LOOKUPS:
        return op
    return dataclasses.replace(op, reads=tuple(
        dataclasses.replace(a, nbytes=a.run_bytes) if a.pattern is Pattern.GATHER else a
        for a in op.reads))


def call_ops(forward: dict[str, Op], name: str) -> list[Op]:
    """The ops of the trace one of NeuSight's calls runs: the op, after its matmul's copies."""
    stem, _, last = name.rpartition(".")
    copies = [f"{stem}.{c}" for c in MATMUL_COPIES.get(last, ())]
    return [forward[c] for c in copies if c in forward] + [as_fed(forward[name])]


def l4_trace(model: str, batch: int, seq_len: int, training: bool = True) -> Trace:
    """One NeuSight L4 step's trace (l4_step), not replayed: its ops are timed alone."""
    return build_trace(_workload(l4_step(model, batch, seq_len, training), model))


def operator_rows(card: str, steps: tuple, fidelity: str) -> list[dict]:
    hw = load_hardware(card)
    out = []
    for stem, model, batch, seq, training, names in steps:
        trace = l4_trace(model, batch, seq, training)
        forward = {o.name: o for o in trace.ops if o.phase is Phase.FORWARD}
        run = "" if training else " inference"
        for row in read_rows(f"{card}_fp32_{stem}.csv"):
            ours = names.get(row["name"])
            if ours is not None:
                ops = call_ops(forward, ours)
                out.append(_result(f"{card} {model} {batch}x{seq}{run} {ours}",
                                   timed_alone(trace, ops, hw, fidelity),
                                   float(row["fw_latency_ms"]) * MS)
                           | {"class": "gemm" if ops[-1].kind in TILED_KINDS else "other"})
    return out


def by_class(rows: list[dict]) -> dict:
    """The summary of each class of rows (GEMMs and the rest; a card's kernels), without their
    rows."""
    return {c: {k: v for k, v in summary([r for r in rows if r["class"] == c]).items()
                if k != "rows"} for c in dict.fromkeys(r["class"] for r in rows)}


# NeuSight's layer norm, softmax and ReLU on large tensors (25 MB and up) on the two GDDR6
# cards benchmarks/fit_row_reuse.py holds out of its fit (benchmarks/measured/
# neusight_fp32_row_kernels.csv): the DRAM-bound ends of the vector classes, on the T4 and L4
ROW_KERNEL_CARDS = {"Tesla T4": "t4", "NVIDIA L4": "l4"}


def row_kernel_rows(fidelity: str, keep: Callable[[dict], bool] | None = None) -> list[dict]:
    cards = {name: load_hardware(card) for name, card in ROW_KERNEL_CARDS.items()}
    memo: dict = {}  # (keyed by memory system: the two cards' results stay apart)
    out = []
    for row in read_rows("neusight_fp32_row_kernels.csv"):
        hw = cards.get(row["device"])
        if hw is None or (keep is not None and not keep(row)):
            continue
        predicted = _forward_s(vector_trace(row), hw, fidelity, memo)
        out.append(_result(f"{hw.name} {row['op']} rows={row['rows']} cols={row['cols']}",
                           predicted, float(row["latency_ms"]) * MS)
                   | {"class": f"{hw.name} {row['op']}"})
    return out


# This project's H200 (benchmarks/measured/h200/kernels.csv): ResNet-50's distinct
# convolutions at batch 32 and 128, each `nn.Conv2d(bias=False)` called alone between two CUDA
# events (the median of up to 10 after 3 warm-up calls, its input in the L2 where it fits) and
# its backward, the input's and the weight's gradients together (`torch.autograd.grad` of the
# forward, less the forward's time). No coefficient comes from them: a check of the convolution
# model on every path (FP32, TF32 and FP16 NCHW, FP16 channels-last), 1x1, 3x3 and 7x7,
# strided or not, which NeuSight's T4 and V100 sets (3x3, stride 1, FP32) do not have.
H200_CONV_PATHS = {"fp32-nchw": ("fp32", False, False), "tf32-nchw": ("fp32", True, False),
                   "fp16-nchw": ("fp16", False, False), "fp16-nhwc": ("fp16", False, True)}


def h200_conv_trace(row: dict) -> Trace:
    """The row's convolution forward, then its backward (input and weight gradients)."""
    dtype, tf32, channels_last = H200_CONV_PATHS[row["dtype"]]
    b = TraceBuilder("kernel", dtype, Execution(allow_tf32_matmul=tf32, allow_tf32_conv=tf32,
                                                channels_last=channels_last))
    kernel, stride = (int(v) for v in row["op"].removeprefix("conv").split("x")[1].split("/s"))
    c_in, c_out, size = int(row["m"]), int(row["n"]), int(row["k"])
    w = b.parameter("conv.weight", (c_out, c_in, kernel, kernel), matmul_weight=True)
    x = b.tensor("x", (int(row["batch"]), c_in, size, size), Category.INPUT, requires_grad=True)
    b.backward(L.conv2d(b, x, w, None, stride, kernel // 2, "conv"))
    return b.trace()


def _h200_conv_case(row: dict) -> dict:
    """Each kernel as a lone op runs it: the host's dispatch and the launch, then the longer of
    its arithmetic through the library model (gpu/compute.py) and its bytes at the DRAM's peak
    (HBM3: no GDDR6 replay, so every fidelity times it so)."""
    hw = _card("h200")
    phase = Phase.FORWARD if row["kind"] == "conv2d" else Phase.BACKWARD
    predicted = sum(dispatch_s(op) + launch_overhead_s(hw)
                    + max(kernel_compute(hw, op).time_s, op.bytes_moved / hw.peak_bandwidth_Bps)
                    for op in h200_conv_trace(row).ops if op.phase is phase and op.kind == "conv")
    case = (f"h200 {row['kind']} {row['op']} {row['dtype']} batch {row['batch']} "
            f"{row['m']}->{row['n']} at {row['k']}")
    return _result(case, predicted, float(row["latency_ms"]) * MS) | {
        "class": f"{row['dtype']} {'forward' if phase is Phase.FORWARD else 'backward'}"}


def h200_conv_rows() -> list[dict]:
    return [_h200_conv_case(row) for row in read_rows("h200/kernels.csv")
            if row["kind"] in ("conv2d", "conv2d_backward")]


# NeuSight's fp32 inference forwards on the T4 and the L4 (benchmarks/measured/
# neusight_fp32_inference.csv): Hugging Face models in eval mode under no_grad, eager attention;
# BERT-large as a sequence classifier, GPT-2 large as a causal LM without labels. Predicted as
# the forward phase of the training workload without dropout, less what inference does not run
# (the loss, and BERT's masked-LM head: its classifier head is a few small ops); a training
# forward keeps activations for backward, which changes memory, not time.
INFERENCE_SKIPS = {"bert-large": ("cls.", "loss.")}  # the rest skip the loss alone


def inference_rows(fidelity: str, jobs: int = 1) -> list[dict]:
    """NeuSight's forwards, then ryujaehun's VGG inference at batch 12."""
    out = []
    for row in read_rows("neusight_fp32_inference.csv"):
        model, batch, seq = row["model"], int(row["batch"]), int(row["seq_len"])
        spec = _workload(l4_step(model, batch, seq, training=False), model)
        est = analyze(spec, _card(row["hardware"]), fidelity=fidelity).estimate
        out.append(_result(f"{row['hardware']} {model} {batch}x{seq} fp32 inference",
                           _forward_without(est, INFERENCE_SKIPS.get(model, ("loss.",))),
                           float(row["forward_ms"]) * MS))
    return out + _map(_small_batch_inference_case,
                      ((row, fidelity) for row in read_rows("ryujaehun_inference_batch12.csv")
                       if row["precision"] != "fp64"), jobs)


# Lambda's BERT SQuAD fine-tuning (benchmarks/measured/lambda_bert_squad_train.csv): NVIDIA's
# DeepLearningExamples run_squad.py (github.com/LambdaLabsML/DeepLearningExamples, branch
# lambda/benchmark, PyTorch/LanguageModeling/BERT), sequences of 384 tokens,
# BertForQuestionAnswering's span head, its attention unfused (scores scaled, masked and
# soft-maxed in passes of their own). Every step clips the gradients to norm 1 (apex's
# multi-tensor norm and scale); biases and LayerNorm weights are a group without weight decay.
# fp32 steps run BertAdam's loop over the parameters (each gradient clipped again to its own
# norm); AMP ones are apex's O2 (the logs say "Selected optimization level O2"): the model cast
# to fp16, gradients unscaled into fp32 master weights that apex's FusedAdam (AdamW, one
# multi-tensor kernel) steps, then copied back into the model.
BERT_SQUAD = {
    "bert_large": L4_MODELS["bert-large"] | {"head": "question_answering"},
    "bert_base": L4_MODELS["bert-large"] | {"n_layer": 12, "d_model": 768, "n_head": 12,
                                            "d_ff": 3072, "head": "question_answering"},
}
SQUAD_SEQ_LEN = 384
# clip_grad_norm_ (which BertAdam calls per parameter) as each run's PyTorch ran it, by the
# build its system's sys_pytorch.txt records (the file's `pytorch` column): the execution
# settings of its waits for the GPU. Before 1.5 it read each gradient's norm on the host
# (`.item()`); until pytorch/pytorch pull 61042 (opened 2021-06-30) it read `clip_coef < 1`
# there, and from pull 55169 (April 2021) it tested `total_norm.isnan() or total_norm.isinf()`
# there too (issue 60691). NGC containers carry a master commit weeks older than their
# release: 21.03's 1.9.0a0+df837d0 ships torchvision 0.9.0a0 (before pull 53843, which began
# the test, on 2021-03-11); 21.07's 1.10.0a0+ecc3718 is taken to predate pull 61042
# (inferred, not read: docs/validation.md).
CLIP_ON_HOST: dict[str, dict[str, bool]] = {
    "1.4.0a0+a5b4d78": {"clip_norms_on_host": True},                   # NGC 20.01
    "1.7.0a0+7036e91": {"clip_coef_on_host": True},
    "1.9.0a0+df837d0": {"clip_coef_on_host": True},                    # NGC 21.03
    "1.10.0a0+ecc3718": {"clip_coef_on_host": True,                    # NGC 21.07
                         "clip_nonfinite_on_host": True},
    "1.13.0a0+d0d6b1f": {},                             # clamped on the GPU, no test
}


# The cuBLAS each build links: NGC 20.01's PyTorch 1.4 is built for CUDA 10.2 (cuBLAS 10, whose
# 16-bit GEMMs take the tensor cores only where M, N and K are multiples of 8); the later
# containers (20.11 on) for CUDA 11.x
CUBLAS_MAJOR = {"1.4.0a0+a5b4d78": 10}


def _build_execution(pytorch: str) -> dict:
    """The execution settings a Lambda run's PyTorch build decides."""
    return {**CLIP_ON_HOST[pytorch], "cublas_major": CUBLAS_MAJOR.get(pytorch, 11)}


def lambda_bert_rows(fidelity: str, keep: Callable[[dict], bool] | None = None,
                     jobs: int = 1, laptops: bool = False) -> list[dict]:
    """BERT-large and BERT-base SQuAD fine-tuning steps against each run's warm step (the
    file's `steady_step_ms`, benchmarks/derive_steady_steps.py: Lambda's sequences per second
    count the first step too), TF32 allowed as the NGC containers do. `keep`: only the file's
    rows it accepts; `laptops`: the laptop GPUs' rows (LAPTOPS) instead of the others'."""
    return _map(_bert_case, ((row, fidelity) for row in read_rows("lambda_bert_squad_train.csv")
                             if (row["hardware"] in LAPTOPS) == laptops
                             and (keep is None or keep(row))), jobs)


def _bert_case(job: tuple[dict, str]) -> dict:
    row, fidelity = job
    amp = row["precision"] == "amp"
    raw = {"format_version": 1, "name": f"{row['model']}-squad",
           "model": BERT_SQUAD[row["model"]],
           "data": {"batch_size": int(row["batch_size"]), "seq_len": SQUAD_SEQ_LEN},
           "training": {"dtype": "fp16" if amp else "fp32", "loss": "cross_entropy",
                        "optimizer": {"type": "adamw", "implementation": "fused",
                                      "weight_decay_on": "matrices"} if amp else
                        {"type": "bert_adam", "weight_decay_on": "matrices"},
                        "grad_clip": {"max_norm": 1.0, "implementation": "apex"},
                        "master_weights": amp,
                        "execution": {"attention": "eager", "allow_tf32_matmul": True,
                                      "zero_grad": LAMBDA_ZERO_GRAD,
                                      **_build_execution(row["pytorch"])}}}
    step = analyze(_workload(raw, row["model"]), _card(row["hardware"]),
                   fidelity=fidelity).estimate.step_time_s
    return _result(f"{row['hardware']} {row['model']} squad {row['precision']} batch "
                   f"{row['batch_size']} ({row['lambda_system']}, {row['run_date']})",
                   step, float(row["steady_step_ms"]) * MS)


# --- Transformer-XL ---------------------------------------------------------------------------
# Lambda's Transformer-XL runs (benchmarks/measured/lambda_transformerxl_train.csv,
# benchmarks/derive_txl_steps.py), NVIDIA DeepLearningExamples' train.py as their arguments
# show: WikiText-103's 267,735-word vocabulary without an adaptive softmax, every gradient
# clipped to norm 0.25 by torch.nn.utils.clip_grad_norm_ (apex O2's master gradients under
# --fp16), the loss read on the host each step (`loss.float().item()`); `model.zero_grad()`
# (PyTorch 1.x: zeros) in the 2020.02 code, `param.grad = None` from 2020.09. Base: segments
# and memory of 192, JITLamb; large: 256, torch.optim.Adam (PyTorch 1.x's loop over the
# parameters). The base runs were added after the rest of the model stood; the large ones
# after the two cuBLAS behaviours the base runs showed (docs/validation.md).
TXL = {"type": "transformer_xl", "vocab_size": 267735, "dropatt": 0.0}
TXL_MODELS = {
    "base": (TXL | {"n_layer": 16, "d_model": 512, "n_head": 8, "d_head": 64,
                    "d_inner": 2048, "mem_len": 192, "dropout": 0.1},
             {"type": "lamb"}),
    "large": (TXL | {"n_layer": 18, "d_model": 1024, "n_head": 16, "d_head": 64,
                     "d_inner": 4096, "mem_len": 256, "dropout": 0.2, "dropatt": 0.2},
              {"type": "adam", "implementation": "for_loop"}),
}


def txl_rows(fidelity: str, jobs: int = 1) -> list[dict]:
    """Transformer-XL training steps against each run's warm step."""
    return _map(_txl_case, ((row, fidelity) for row in
                            read_rows("lambda_transformerxl_train.csv")), jobs)


def _txl_case(job: tuple[dict, str]) -> dict:
    row, fidelity = job
    amp = row["precision"] == "amp"
    early = row["release"] == "2020.02"
    model, optimizer = TXL_MODELS[row["model"]]
    raw = {"format_version": 1, "name": f"transformer-xl-{row['model']}",
           "model": model | {"release": row["release"]},
           "data": {"batch_size": int(row["batch_size"]), "seq_len": int(row["tgt_len"])},
           "training": {"dtype": "fp16" if amp else "fp32", "loss": "cross_entropy",
                        "optimizer": optimizer, "master_weights": amp,
                        "grad_clip": {"max_norm": 0.25, "implementation": "for_loop"},
                        "execution": {"allow_tf32_matmul": True, "loss_item": True,
                                      "zero_grad": LAMBDA_ZERO_GRAD if early else "none",
                                      **_build_execution(row["pytorch"])}}}
    step = analyze(_workload(raw, raw["name"]), _card(row["hardware"]),
                   fidelity=fidelity).estimate.step_time_s
    return _result(f"{row['hardware']} transformer-xl {row['model']} {row['precision']} batch "
                   f"{row['batch_size']} ({row['lambda_system']}, {row['run_date']})",
                   step, float(row["steady_step_ms"]) * MS) | {
                       "class": f"{row['model']} {row['precision']}"}


# --- small batches ----------------------------------------------------------------------------
# ryujaehun/pytorch-gpu-benchmark's benchmark_models.py (benchmarks/measured/
# ryujaehun_train_batch12.csv, the median of 50 timed steps after 5 warm-up ones): a
# torchvision model in fp32 or cast whole to fp16 (`model.half()`: no master weights, no loss
# scaling), and per step, between two torch.cuda.synchronize() calls, `model.zero_grad()`
# (PyTorch 1.x: the gradients filled with zeros), the batch's copy from pageable host memory
# (`img.to('cuda')`: the DataLoader does not pin it), the forward pass, the cross-entropy loss
# and `loss.backward()`; no optimizer step. The hosts' PCIe links are not recorded: the Turing
# cards' own, 3.0 x16.
# torchvision's ResNets: blocks per stage, block, width_per_group
SMALL_BATCH_RESNETS = {"resnet18": ([2, 2, 2, 2], "basic", 64),
                       "resnet34": ([3, 4, 6, 3], "basic", 64),
                       "resnet50": ([3, 4, 6, 3], "bottleneck", 64),
                       "resnet101": ([3, 4, 23, 3], "bottleneck", 64),
                       "resnet152": ([3, 8, 36, 3], "bottleneck", 64),
                       "wide_resnet50_2": ([3, 4, 6, 3], "bottleneck", 128),
                       "wide_resnet101_2": ([3, 4, 23, 3], "bottleneck", 128)}
SMALL_BATCH_LINK = Pcie(generation=3, lanes=16)
# torchvision.models.vgg's configurations (cfgs "A", "B", "D", "E"): out channels of each 3x3
# convolution (padding 1), "M" a 2x2 max pool
VGG_CONFIGS = {"vgg11": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
               "vgg13": [64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512,
                         "M"],
               "vgg16": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
                         512, 512, 512, "M"],
               "vgg19": [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512,
                         512, "M", 512, 512, 512, 512, "M"]}


def vgg_model(name: str) -> dict:
    """torchvision's VGG (`vgg16`, `vgg16_bn`, ...) as a sequential_cnn, its layers named as
    torchvision names its modules: `features` (each convolution followed by BatchNorm2d in the
    `_bn` variants and ReLU(inplace=True)), AdaptiveAvgPool2d((7, 7)) and the `classifier`'s
    three linear layers with ReLU(inplace=True) and Dropout(0.5) between them."""
    bn = name.endswith("_bn")
    features: list[dict] = []
    for v in VGG_CONFIGS[name.removesuffix("_bn")]:
        if v == "M":
            features.append({"type": "maxpool2d", "kernel_size": 2, "stride": 2})
            continue
        features.append({"type": "conv2d", "out_channels": v, "kernel_size": 3, "padding": 1})
        if bn:
            features.append({"type": "batchnorm2d"})
        features.append({"type": "relu", "inplace": True})
    classifier = [{"type": "linear", "out_features": 4096}, {"type": "relu", "inplace": True},
                  {"type": "dropout", "p": 0.5}, {"type": "linear", "out_features": 4096},
                  {"type": "relu", "inplace": True}, {"type": "dropout", "p": 0.5},
                  {"type": "linear", "out_features": 1000}]
    layers = ([{"name": f"features.{i}", **layer} for i, layer in enumerate(features)]
              + [{"name": "avgpool", "type": "adaptive_avgpool2d", "output_size": 7},
                 {"type": "flatten"}]
              + [{"name": f"classifier.{i}", **layer} for i, layer in enumerate(classifier)])
    return {"type": "sequential_cnn", "input_shape": [3, 224, 224], "layers": layers}


def _small_batch_model(name: str) -> dict:
    if name in SMALL_BATCH_RESNETS:
        layers, block, width_per_group = SMALL_BATCH_RESNETS[name]
        return dict(_resnet50()["model"], layers=layers, block=block,
                    width_per_group=width_per_group)
    return vgg_model(name)


def _small_batch_estimate(row: dict, fidelity: str, model: dict, training: dict):
    """The row's step replayed on its card, and the seconds its batch of random images (one
    tensor in the step's dtype: no input pipeline) takes to copy from pageable memory."""
    raw = {"format_version": 1, "name": row["model"], "model": model,
           "data": {"batch_size": int(row["batch_size"])},
           "training": {"dtype": row["precision"], "loss": "cross_entropy", **training}}
    est = analyze(_workload(raw, row["model"]), _card(row["hardware"]),
                  fidelity=fidelity).estimate
    images = next(t for t in est.trace.tensors if t.name == "images")
    return est, SMALL_BATCH_LINK.copy_s(images.nbytes, pinned=False)


def _small_batch_case(job: tuple[dict, str]) -> dict:
    row, fidelity = job
    est, copy_s = _small_batch_estimate(
        row, fidelity, _small_batch_model(row["model"]),
        {"optimizer": {"type": "sgd", "implementation": "for_loop"},
         "execution": {"zero_grad": "zeros"}})
    zero_grad = sum(o.time_s for o in est.ops if o.op.name.startswith(ZERO_GRAD_PREFIX))
    step = (zero_grad + copy_s + est.phase(Phase.FORWARD).time_s
            + est.phase(Phase.BACKWARD).time_s)
    return _result(f"{row['hardware']} {row['model']} {row['precision']} batch "
                   f"{row['batch_size']} ({row['run_date']})", step, float(row["median_ms"]) * MS)


def _small_batch_inference_case(job: tuple[dict, str]) -> dict:
    """benchmark_models.py's inference: the model in eval mode under no_grad, the batch's copy
    and the forward timed, so the training workload's forward without dropout (an identity in
    eval mode) and the loss. VGG without batch norm only: eval-mode batch norm, one pass with
    the running statistics, is not in the workload model."""
    row, fidelity = job
    model = _small_batch_model(row["model"])
    model["layers"] = [layer for layer in model["layers"] if layer["type"] != "dropout"]
    est, copy_s = _small_batch_estimate(row, fidelity, model, {"optimizer": {"type": "sgd"}})
    return _result(f"{row['hardware']} {row['model']} {row['precision']} batch "
                   f"{row['batch_size']} inference ({row['run_date']})",
                   copy_s + _forward_without(est, ("loss.",)), float(row["median_ms"]) * MS)


def small_batch_rows(fidelity: str, jobs: int = 1) -> list[dict]:
    """The batch-12 steps in fp32 and fp16."""
    return _map(_small_batch_case, ((row, fidelity) for row in
                                    read_rows("ryujaehun_train_batch12.csv")
                                    if row["precision"] != "fp64"), jobs)


def fp64_rows(fidelity: str, jobs: int = 1) -> list[dict]:
    """The batch-12 steps in FP64 (`model.double()`), each classed by its network's family,
    then the VGGs' FP64 inference."""
    runs = [row for row in read_rows("ryujaehun_train_batch12.csv")
            if row["precision"] == "fp64"]
    training = _map(_small_batch_case, ((row, fidelity) for row in runs), jobs)
    inference = _map(_small_batch_inference_case,
                     ((row, fidelity) for row in read_rows("ryujaehun_inference_batch12.csv")
                      if row["precision"] == "fp64"), jobs)
    return [r | {"class": next(f for f in ("wide_resnet", "resnet", "vgg")
                               if run["model"].startswith(f))}
            for run, r in zip(runs, training, strict=True)] + \
        [r | {"class": "vgg_inference"} for r in inference]


# --- held-out kernels -------------------------------------------------------------------------
# NeuSight's test set (benchmarks/measured/neusight_test_gemm.csv, neusight_test_vector.csv):
# GEMMs and elementwise ops of transformer shapes on the T4 and the L4, measured as its
# kernel set was (collect.py: 25 calls, the fastest 5) in a campaign of their own, which no
# coefficient was taken from. The L4 is a card none of the kernel coefficients came from.
HELD_OUT: dict[str, tuple[str, Callable[[dict], Trace]]] = {
    "gemm": ("neusight_test_gemm.csv", gemm_trace),
    "vector": ("neusight_test_vector.csv", vector_trace),
}


def _held_out_case(job: tuple[str, dict, str, dict]) -> dict:
    kind, row, fidelity, clocks = job
    card = row["hardware"]
    hw = _card(card)
    if card in clocks:
        hw = dataclasses.replace(hw, sustained_clock_mhz=clocks[card])
    return _lone_kernel(HELD_OUT[kind][1](row), hw, card, row, fidelity) \
        | {"class": f"{card} {kind}"}


def held_out_rows(sample: int, fidelity: str, jobs: int = 1,
                  clocks: dict[str, float] | None = None) -> list[dict]:
    """Every held-out kernel, or a seeded `sample` of each card's class; `clocks`: a sustained
    clock (MHz) to run a card at in place of its file's, a what-if."""
    jobs_: list[tuple[str, dict, str, dict]] = []
    for kind, (file, _) in HELD_OUT.items():
        rows = read_rows(file)
        for card in dict.fromkeys(r["hardware"] for r in rows):
            mine = [r for r in rows if r["hardware"] == card]
            if sample and sample < len(mine):
                mine = random.Random(f"{SEED}-held-out-{card}-{kind}").sample(mine, sample)
            jobs_ += [(kind, r, fidelity, clocks or {}) for r in mine]
    return _map(_held_out_case, jobs_, jobs)


def _dims(row: dict) -> np.ndarray:
    """A GEMM row's batch, m, n and k."""
    return np.array([int(row[c]) for c in ("batch", "m", "n", "k")], dtype=float)


def t4_campaign_ratio(within: float = 0.12, min_ms: float = 1.0) -> dict:
    """How the T4 of the held-out set ran against the T4 of the kernel set: for each held-out
    GEMM of `min_ms` or more, the kernel set's GEMMs of the same op with every dimension within
    `within` of it, the ratio of their times per FLOP (held-out over kernel set). Like shapes
    run the same kernels, so the ratio is the two campaigns' clocks."""
    shown = read_rows(KERNELS["gemm"][0])
    dims = {op: np.array([_dims(r) for r in shown if r["op"] == op]) for op in
            ("linear", "bmm")}
    ms = {op: np.array([float(r["latency_ms"]) for r in shown if r["op"] == op])
          for op in dims}
    per_flop = {op: ms[op] / np.prod(dims[op], axis=1) for op in dims}
    ratios = []
    for r in read_rows(HELD_OUT["gemm"][0]):
        if r["hardware"] != "t4" or float(r["latency_ms"]) < min_ms:
            continue
        d = _dims(r)
        like = np.all(np.abs(dims[r["op"]] / d - 1) <= within, axis=1)
        mine = float(r["latency_ms"]) / np.prod(d)
        ratios += [mine / t for t in per_flop[r["op"]][like]]
    return {"pairs": len(ratios), "median": float(np.median(ratios)) if ratios else None,
            "p10": float(np.quantile(ratios, 0.1)) if ratios else None,
            "p90": float(np.quantile(ratios, 0.9)) if ratios else None}


# --- summary ----------------------------------------------------------------------------------
def _result(case: str, predicted_s: float, measured_s: float) -> dict:
    return {"case": case, "predicted_ms": predicted_s / MS, "measured_ms": measured_s / MS,
            "error": (predicted_s - measured_s) / measured_s}


def summary(rows: list[dict]) -> dict:
    errors = [abs(r["error"]) for r in rows]
    return {"cases": len(rows),
            "median_abs_error": statistics.median(errors) if errors else None,
            "p90_abs_error": float(np.quantile(errors, 0.9, method="nearest")) if errors
            else None,
            "max_abs_error": max(errors) if errors else None,
            "median_signed_error": statistics.median(r["error"] for r in rows) if rows
            else None,
            "rows": rows}


STEP_PARTS = ("end_to_end", "bert_squad", "transformer_xl", "laptops", "small_batch",
              "fp64", "inference", "operators", "t4_operators", "row_kernels",  # a row per case
              "h200_convs")


def run(sample: int, fidelity: str, only: str | None, jobs: int = 1,
        held_out_clocks: dict[str, float] | None = None) -> dict:
    """The parts asked for (`only`; None: all), kernel classes whole or a seeded `sample`,
    in `jobs` worker processes where cases stand alone; `held_out_clocks`: the held-out
    kernels' cards at other sustained clocks (MHz), a what-if."""
    doc: dict = {"fidelity": fidelity, "sample_per_kernel_class": sample}
    if only in (None, "kernels"):
        doc["kernels"] = {kind: summary(kernel_rows(kind, sample, fidelity, jobs))
                          for kind in KERNELS}
    if only in (None, "end_to_end"):
        doc["end_to_end"] = summary(lambda_rows(fidelity, jobs=jobs) + l4_rows(fidelity))
    if only in (None, "bert_squad"):
        doc["bert_squad"] = summary(lambda_bert_rows(fidelity, jobs=jobs))
    if only in (None, "transformer_xl"):
        rows = txl_rows(fidelity, jobs=jobs)
        doc["transformer_xl"] = summary(rows) | {"by_class": by_class(rows)}
    if only in (None, "laptops"):
        rows = ([r | {"class": "resnet50"} for r in lambda_rows(fidelity, jobs=jobs,
                                                                 laptops=True)]
                + [r | {"class": "bert_squad"} for r in lambda_bert_rows(fidelity, jobs=jobs,
                                                                         laptops=True)])
        doc["laptops"] = summary(rows) | {"by_class": by_class(rows)}
    if only in (None, "small_batch"):
        doc["small_batch"] = summary(small_batch_rows(fidelity, jobs=jobs))
    if only in (None, "fp64"):
        rows = fp64_rows(fidelity, jobs=jobs)
        doc["fp64"] = summary(rows) | {"by_class": by_class(rows)}
    if only in (None, "inference"):
        doc["inference"] = summary(inference_rows(fidelity, jobs=jobs))
    if only in (None, "operators"):
        doc["operators"] = summary(operator_rows("l4", L4_OPERATOR_STEPS, fidelity))
    if only in (None, "t4_operators"):
        rows = operator_rows("t4", T4_OPERATOR_STEPS, fidelity)
        doc["t4_operators"] = summary(rows) | {"by_class": by_class(rows)}
    if only in (None, "row_kernels"):
        rows = row_kernel_rows(fidelity)
        doc["row_kernels"] = summary(rows) | {"by_class": by_class(rows)}
    if only in (None, "h200_convs"):
        rows = h200_conv_rows()
        doc["h200_convs"] = summary(rows) | {"by_class": by_class(rows)}
    if only in (None, "held_out_kernels"):
        rows = held_out_rows(sample, fidelity, jobs, held_out_clocks)
        doc["held_out_kernels"] = summary(rows) | {"by_class": by_class(rows),
                                                   "t4_campaign_ratio": t4_campaign_ratio()}
    return doc


def _line(name: str, s: dict) -> str:
    return (f"{name:<16} {s['cases']:>6} cases  median |err| {s['median_abs_error']:7.1%}  "
            f"p90 {s['p90_abs_error']:7.1%}  max {s['max_abs_error']:8.1%}  "
            f"(median signed {s['median_signed_error']:+.1%})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sample", type=int, default=0,
                    help="kernel cases per class, a seeded sample (default 0: every case)")
    ap.add_argument("--jobs", type=int, default=usable_cpus(),
                    help="worker processes for the kernel cases (held-out ones too), "
                         "Lambda's steps and the batch-12 runs (default: the CPUs this "
                         "process may use)")
    ap.add_argument("--fidelity", default="sampled", choices=("analytic", "sampled", "cycle"))
    ap.add_argument("--only", choices=("kernels", *STEP_PARTS, "held_out_kernels"))
    ap.add_argument("--held-out-clock", action="append", default=[], metavar="CARD=MHZ",
                    help="run a held-out kernel card at this sustained clock, a what-if "
                         "(e.g. t4=1125: the clock like shapes give the test set's T4)")
    ap.add_argument("--json", action="store_true", help="print the JSON document")
    args = ap.parse_args()
    try:
        clocks = {c: float(mhz) for c, mhz in (a.split("=", 1) for a in args.held_out_clock)}
    except ValueError:
        ap.error("--held-out-clock takes CARD=MHZ, e.g. t4=1125")
    cards = sorted({r["hardware"] for file, _ in HELD_OUT.values() for r in read_rows(file)}) \
        if clocks else []
    if not set(clocks) <= set(cards) or any(mhz <= 0 for mhz in clocks.values()):
        ap.error(f"--held-out-clock: the held-out cards are {' and '.join(cards)}, at a clock "
                 f"above 0 MHz (got {args.held_out_clock})")
    t0 = time.perf_counter()
    doc = run(args.sample, args.fidelity, args.only, max(1, args.jobs), clocks)
    if args.json:
        json.dump(doc, sys.stdout, indent=1)
        print()
        return 0
    for part in STEP_PARTS:
        if part not in doc:
            continue
        width = max([64] + [len(r["case"]) for r in doc[part]["rows"]])
        print(f"{part.replace('_', '-') + ' case':<{width}} {'predicted ms':>12} "
              f"{'measured ms':>12} {'error':>8}")
        for r in doc[part]["rows"]:
            print(f"{r['case']:<{width}} {r['predicted_ms']:>12.2f} "
                  f"{r['measured_ms']:>12.2f} {r['error']:>+8.1%}")
        print()
    print(f"summary ({args.fidelity} fidelity; errors as fractions of the measured time):")
    for kind, s in doc.get("kernels", {}).items():
        print(_line(kind, s))
    for part in STEP_PARTS:
        if part in doc:
            print(_line(part, doc[part]))
            for c, s in doc[part].get("by_class", {}).items():
                print(_line(f"  {c}", s))
    if "held_out_kernels" in doc:  # by card and class alone: their mix means nothing
        print("held-out kernels (NeuSight's test set):")
        for c, s in doc["held_out_kernels"]["by_class"].items():
            print(_line(f"  {c}", s))
        r = doc["held_out_kernels"]["t4_campaign_ratio"]
        print(f"  held-out T4 GEMMs of 1 ms and more against the kernel set's of like shape "
              f"(every dimension within 12 %): {r['median']:.2f} of the time per FLOP at the "
              f"median (p10 {r['p10']:.2f}, p90 {r['p90']:.2f}; {r['pairs']} pairs)")
    print(f"({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
