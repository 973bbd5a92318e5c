"""Model generators: each turns a `model` block into forward ops on a TraceBuilder."""

from __future__ import annotations

from simulator.workload.models import cnn, decoder, encoder, resnet, transformer

CHECKS = {"encoder_decoder_transformer": transformer.check, "sequential_cnn": cnn.check,
          "decoder_only_transformer": decoder.check, "encoder_only_transformer": encoder.check,
          "resnet": resnet.check}


def check_model(raw: dict, data: dict, file: str) -> None:
    """Reject models the schema allows but that cannot be built, with the JSON path."""
    CHECKS[raw["type"]](raw, data, file)
