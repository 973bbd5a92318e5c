"""Expand a workload into the operator trace of one steady-state training step.

Steady state is the second step: optimizer state exists, gradients were set to None by
zero_grad(), so every .grad is allocated again during the backward pass (or, with
`execution.zero_grad: zeros`, kept and filled with zeros after the optimizer step).
"""

from __future__ import annotations

from simulator.config.workload import WorkloadSpec
from simulator.errors import InputError
from simulator.workload import layers as L
from simulator.workload import optimizers
from simulator.workload.builder import TraceBuilder
from simulator.workload.models import (
    cnn,
    decoder,
    encoder,
    resnet,
    stream,
    transformer,
    transformer_xl,
)
from simulator.workload.trace import Phase, Tensor, Trace

# every tensor of a step together: byte counts, addresses and their sums are 64-bit integers
MAX_STEP_BYTES = 2**60


def build_trace(spec: WorkloadSpec) -> Trace:
    if spec.model["type"] == "stream":  # a memory benchmark, not a training step
        return stream.build(spec.name, spec.model)
    b = TraceBuilder(spec.name, spec.dtype, spec.execution)
    k = spec.micro_batches
    for i in range(k):  # gradient accumulation: k forward/backward passes, one optimizer step
        b.phase = Phase.FORWARD
        b.op_prefix = f"mb{i}/" if k > 1 else ""
        b.cast_cache = {}  # each forward pass is its own autocast region
        logits, loss = _forward(b, spec, spec.batch_size // k)
        if spec.loss_scaling:
            loss = L.scale_loss(b, loss)
        b.backward(loss)
        if spec.execution.loss_item:  # the host waits for the backward pass to finish
            optimizers.host_read(b, loss, "loss")
        if i < k - 1:  # the loop's variables move on to the next micro-batch
            logits.retained = loss.retained = False
    b.op_prefix = ""
    optimizers.step(b, spec.optimizer, unscale=spec.loss_scaling, clip=spec.grad_clip,
                    master_weights=spec.master_weights)
    b.zero_grad()  # optimizer.step(); optimizer.zero_grad(): for the next step's backward
    trace = b.trace()
    total = sum(t.nbytes for t in trace.tensors)
    if total > MAX_STEP_BYTES:
        raise InputError(f"expected a step whose tensors fit the simulator's 64-bit byte "
                         f"counts (at most 2^60 B, 1 EiB), got {total:.3g} B", file=spec.path,
                         path="$.model")
    return trace


def _forward(b: TraceBuilder, spec: WorkloadSpec, batch: int) -> tuple[Tensor, Tensor]:
    """One micro-batch's forward pass and loss; returns (logits, loss)."""
    kind = spec.model["type"]
    if kind == "encoder_decoder_transformer":
        model = transformer.EncoderDecoderTransformer.from_dict(spec.model)
        logits, target = transformer.build(b, model, batch, spec.src_seq_len, spec.tgt_seq_len)
    elif kind == "decoder_only_transformer":
        model = decoder.DecoderOnlyTransformer.from_dict(spec.model)
        logits, target = decoder.build(b, model, batch, spec.seq_len)
    elif kind == "encoder_only_transformer":
        model = encoder.EncoderOnlyTransformer.from_dict(spec.model)
        logits, target = encoder.build(b, model, batch, spec.seq_len)
    elif kind == "resnet":
        logits, target = resnet.build(b, resnet.ResNet.from_dict(spec.model), batch)
    elif kind == "transformer_xl":
        model = transformer_xl.TransformerXL.from_dict(spec.model)
        logits, target = transformer_xl.build(b, model, batch, spec.seq_len)
    elif kind == "sequential_cnn":
        logits, target = cnn.build(b, spec.model, batch)
    else:  # the schema's enum and this dispatch are kept in step by tests
        raise ValueError(f"no generator for model type {kind}")
    return logits, L.cross_entropy(b, logits, target, "loss")
