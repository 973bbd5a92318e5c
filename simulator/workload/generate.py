"""Expand a workload into the operator trace of one steady-state training step.

Steady state is the second step: optimizer state exists, gradients were set to None by
zero_grad(), so every .grad is allocated again during the backward pass.
"""

from __future__ import annotations

from simulator.config.workload import WorkloadSpec
from simulator.workload import layers as L
from simulator.workload import optimizers
from simulator.workload.builder import TraceBuilder
from simulator.workload.models import cnn, decoder, encoder, resnet, transformer
from simulator.workload.trace import Trace


def build_trace(spec: WorkloadSpec) -> Trace:
    b = TraceBuilder(spec.name, spec.dtype, spec.execution)
    kind = spec.model["type"]
    if kind == "encoder_decoder_transformer":
        model = transformer.EncoderDecoderTransformer.from_dict(spec.model)
        logits, target = transformer.build(b, model, spec.batch_size, spec.src_seq_len,
                                           spec.tgt_seq_len)
    elif kind == "decoder_only_transformer":
        model = decoder.DecoderOnlyTransformer.from_dict(spec.model)
        logits, target = decoder.build(b, model, spec.batch_size, spec.seq_len)
    elif kind == "encoder_only_transformer":
        model = encoder.EncoderOnlyTransformer.from_dict(spec.model)
        logits, target = encoder.build(b, model, spec.batch_size, spec.seq_len)
    elif kind == "resnet":
        logits, target = resnet.build(b, resnet.ResNet.from_dict(spec.model), spec.batch_size)
    elif kind == "sequential_cnn":
        logits, target = cnn.build(b, spec.model, spec.batch_size)
    else:  # the schema's enum and this dispatch are kept in step by tests
        raise ValueError(f"no generator for model type {kind}")
    loss = L.cross_entropy(b, logits, target, "loss")
    b.backward(loss)
    optimizers.step(b, spec.optimizer)
    return b.trace()
