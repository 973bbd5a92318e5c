"""Workload descriptions: a model, its batch, and how it is trained."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulator import resources
from simulator.config.dataset import DatasetSpec, LoaderSpec, parse_dataset, parse_loader
from simulator.config.loader import load
from simulator.config.models import check_model
from simulator.config.pruning import prune
from simulator.errors import InputError


@dataclass(frozen=True)
class Execution:
    """How the framework runs the step (PyTorch on CUDA defaults)."""

    attention: str = "fused"          # fused (memory-efficient kernel), math (SDPA unfused), eager
    allow_tf32_matmul: bool = False   # torch.backends.cuda.matmul.allow_tf32 (default False)
    allow_tf32_conv: bool = True      # torch.backends.cudnn.allow_tf32 (default True)
    cuda_graphs: bool = False         # a captured graph: no per-op host dispatch (gpu/dispatch.py)
    channels_last: bool = False       # torch.channels_last activations (default NCHW)
    checkpointing: str = "none"       # none | selective (attention cores) | full (every block)
    autocast: str | None = None       # torch.autocast's low-precision type (fp16, bf16) or None
    weight_quantization: str | None = None  # int8: frozen int8 matmul weights, dequantized
    # clip_grad_norm_ reads each gradient's norm on the host (PyTorch before 1.5)
    clip_norms_on_host: bool = False
    # clip_grad_norm_ branches on its coefficient on the host (PyTorch before 1.10)
    clip_coef_on_host: bool = False
    # clip_grad_norm_ also tests its norm for NaN and infinity on the host (PyTorch 1.9 and
    # the 1.10 pre-releases before pytorch/pytorch pull 61042)
    clip_nonfinite_on_host: bool = False
    # the loop reads the loss on the host after each backward pass (`loss.item()`)
    loss_item: bool = False
    # the cuBLAS the framework links (PyTorch's CUDA): before 11 a 16-bit GEMM whose M, N or K
    # is not a multiple of 8 runs without the tensor cores (layers._mm)
    cublas_major: int = 12
    # the values the kernels compute on: random (training's), or zeros (a benchmark fed
    # torch.zeros), on which a power-capped card holds a higher clock (gpu/clocks.py)
    operand_values: str = "random"
    # what zero_grad() leaves between steps: none (set_to_none=True, PyTorch 2's default: the
    # backward hands each parameter its first gradient) or zeros (set_to_none=False, the default
    # before PyTorch 2.0 and apex amp's: every .grad stays allocated, is filled with zeros one
    # kernel per gradient, and the backward adds into it)
    zero_grad: str = "none"


@dataclass(frozen=True)
class OptimizerSpec:
    type: str
    lr: float = 1e-3
    momentum: float = 0.0            # sgd, rmsprop
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    amsgrad: bool = False            # adam, adamw: keeps max_exp_avg_sq too
    alpha: float = 0.99              # rmsprop smoothing
    centered: bool = False           # rmsprop: keeps grad_avg too
    state_dtype: str | None = None   # int8: 8-bit optimizer state (bitsandbytes); None: as params
    implementation: str = "foreach"  # PyTorch's default on CUDA
    weight_decay_on: str = "all"     # all | matrices (1-D biases and norm scales not decayed)
    max_grad_norm: float = 0.0       # bert_adam: each gradient clipped to this norm (0: not)


@dataclass(frozen=True)
class GradClipSpec:
    """torch.nn.utils.clip_grad_norm_ before the optimizer step: the norm over all gradients,
    then every gradient scaled by max_norm over it where it is larger."""

    max_norm: float
    # foreach: PyTorch 2's default on CUDA; for_loop: one gradient at a time; apex: NVIDIA's
    # GradientClipper (the norm read on the host)
    implementation: str = "foreach"


@dataclass(frozen=True)
class WorkloadSpec:
    name: str
    description: str
    model: dict[str, Any]      # schema-checked; the model generator reads it
    batch_size: int
    src_seq_len: int | None
    tgt_seq_len: int | None
    seq_len: int | None
    micro_batches: int
    dtype: str
    loss: str
    optimizer: OptimizerSpec
    execution: Execution = field(default_factory=Execution)
    loss_scaling: bool = False
    path: str = ""
    dataset: DatasetSpec | None = None   # None: synthetic inputs, no input pipeline
    loader: LoaderSpec = field(default_factory=LoaderSpec)
    grad_clip: GradClipSpec | None = None
    master_weights: bool = False  # fp32 copies of fp16/bf16 parameters that the optimizer steps


_COMMON = {"lr", "weight_decay", "implementation", "state_dtype", "weight_decay_on"}
_OPTIMIZER_KEYS = {"sgd": _COMMON | {"momentum"},
                   "adam": _COMMON | {"betas", "eps", "amsgrad"},
                   "adamw": _COMMON | {"betas", "eps", "amsgrad"},
                   "adamax": _COMMON | {"betas", "eps"},
                   "rmsprop": _COMMON | {"alpha", "eps", "momentum", "centered"},
                   "adagrad": _COMMON | {"eps"},
                   "bert_adam": _COMMON | {"betas", "eps", "max_grad_norm"},
                   "lamb": _COMMON | {"betas", "eps"}}
# optimizers of other libraries than torch.optim (bert_adam: BERT's BertAdam, as in
# github.com/NVIDIA/DeepLearningExamples PyTorch/LanguageModeling/BERT/optimization.py; lamb:
# Transformer-XL's JITLamb, PyTorch/LanguageModeling/Transformer-XL/pytorch/lamb.py there)
NOT_TORCH_OPTIM = frozenset({"bert_adam", "lamb"})
# the optimizers torch.optim has a fused kernel for (fused=True; PyTorch 2.13, checked against
# its signatures): for the others `fused` models a custom kernel
TORCH_FUSED = frozenset({"sgd", "adam", "adamw", "adagrad"})
# the optimizers bitsandbytes has 8-bit state for (bitsandbytes/optim/__init__.py: Adam, AdamW,
# SGD, RMSprop, Adagrad, LAMB, LARS, Lion; no Adamax): for the others int8 state models a
# custom kernel
BNB_8BIT = frozenset({"sgd", "adam", "adamw", "rmsprop", "adagrad"})
# torch.optim's defaults where they differ from OptimizerSpec's
_DEFAULTS = {"adamw": {"weight_decay": 0.01}, "adamax": {"lr": 2e-3},
             "rmsprop": {"lr": 1e-2}, "adagrad": {"lr": 1e-2, "eps": 1e-10},
             "bert_adam": {"eps": 1e-6, "weight_decay": 0.01, "max_grad_norm": 1.0,
                           "implementation": "for_loop"},
             "lamb": {"eps": 1e-6, "implementation": "for_loop"}}


def _optimizer(raw: dict, file: str) -> OptimizerSpec:
    kind = raw["type"]
    for key in raw:
        if key != "type" and key not in _OPTIMIZER_KEYS[kind]:
            raise InputError(f"'{key}' does not apply to {kind}; expected one of: "
                             f"{', '.join(sorted(_OPTIMIZER_KEYS[kind]))}",
                             file=file, path=f"$.training.optimizer.{key}")
    args = {**_DEFAULTS.get(kind, {}), **{k: v for k, v in raw.items() if k != "type"}}
    if "betas" in args:
        args["betas"] = tuple(args["betas"])
    return OptimizerSpec(type=kind, **args)


def parse_workload(raw: dict, file: str) -> WorkloadSpec:
    if "benchmark" in raw:
        return _benchmark(raw, file)
    data, training = raw["data"], raw["training"]
    model = prune(raw["model"], training.get("pruning", {}).get("fraction", 0.0))
    check_model(model, data, file)
    if training.get("checkpointing") == "selective" and model["type"] in (
            "sequential_cnn", "resnet"):
        raise InputError("selective checkpointing recomputes attention, and this model has none;"
                         " expected none or full", file=file, path="$.training.checkpointing")
    amp = training.get("mixed_precision", "none")
    if amp != "none" and training["dtype"] != "fp32":
        raise InputError(f"mixed precision keeps fp32 master weights; expected dtype fp32, got "
                         f"{training['dtype']}", file=file, path="$.training.dtype")
    if amp != "none" and model["type"] == "transformer_xl":  # its einsums are not cast
        raise InputError("the Transformer-XL model runs in one dtype (its products are einsums "
                         "that torch.autocast would cast, which the model does not trace); "
                         "expected mixed_precision none, or dtype fp16 with master_weights as "
                         "apex amp O2 runs it", file=file, path="$.training.mixed_precision")
    master = training.get("master_weights", False)
    if master and training["dtype"] not in ("fp16", "bf16"):
        raise InputError(f"master weights are fp32 copies of fp16 or bf16 parameters; expected "
                         f"dtype fp16 or bf16, got {training['dtype']}", file=file,
                         path="$.training.master_weights")
    if data["batch_size"] % data.get("micro_batches", 1):
        raise InputError(f"expected micro_batches to divide batch_size ({data['batch_size']}), "
                         f"got {data['micro_batches']}", file=file, path="$.data.micro_batches")
    dataset = parse_dataset(data["dataset"], file) if "dataset" in data else None
    return WorkloadSpec(
        name=raw["name"], description=raw.get("description", ""), model=model,
        batch_size=data["batch_size"], src_seq_len=data.get("src_seq_len"),
        tgt_seq_len=data.get("tgt_seq_len"), seq_len=data.get("seq_len"),
        micro_batches=data.get("micro_batches", 1),
        dtype=training["dtype"], loss=training["loss"],
        optimizer=_optimizer(training["optimizer"], file),
        execution=Execution(**training.get("execution", {}),
                            checkpointing=training.get("checkpointing", "none"),
                            autocast=None if amp == "none" else amp,
                            weight_quantization=training.get("weight_quantization")),
        loss_scaling=training.get("loss_scaling", amp == "fp16"
                                  or (master and training["dtype"] == "fp16")), path=file,
        dataset=dataset, loader=parse_loader(data.get("loader", {}), dataset, file),
        grad_clip=GradClipSpec(**training["grad_clip"]) if "grad_clip" in training else None,
        master_weights=master)


def _benchmark(raw: dict, file: str) -> WorkloadSpec:
    """A memory benchmark: its kernels are the step; nothing is trained."""
    for key in ("model", "data", "training"):
        if key in raw:
            raise InputError(f"'{key}' describes a training step; a benchmark workload has "
                             "none: expected either 'benchmark' or model, data and training",
                             file=file, path=f"$.{key}")
    bench = raw["benchmark"]
    return WorkloadSpec(
        name=raw["name"], description=raw.get("description", ""), model=bench, batch_size=0,
        src_seq_len=None, tgt_seq_len=None, seq_len=None, micro_batches=1, dtype=bench["dtype"],
        loss="none", optimizer=OptimizerSpec("none", implementation="none"), path=file)


def workload_names() -> list[str]:
    return resources.shipped_names(resources.workloads_dir())


def load_workload(spec: str | Path) -> WorkloadSpec:
    """A workload by shipped name (`workloads list`) or path, checked against its schema and
    the model's own rules; InputError names what is wrong."""
    path = resources.resolve("workloads", str(spec))
    return parse_workload(load(path, "workload"), str(path))
