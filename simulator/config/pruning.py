"""Structured pruning: a fraction of heads and channels removed, as a smaller model of the same
shape. Transformers lose attention heads (each keeps its width; grouped-query models lose whole
key/value groups) and feed-forward channels; convolutional networks lose channels of every
convolution and the hidden features of their linear layers (not the class scores).
nn.Transformer's attention cannot drop heads (its width is fixed at d_model), so there only the
feed-forward channels go."""

from __future__ import annotations

import copy


def _keep(n: int, fraction: float) -> int:
    return max(1, round(n * (1 - fraction)))


def prune(model: dict, fraction: float) -> dict:
    """The model block after removing `fraction` of its structures."""
    if fraction <= 0:
        return model
    m = copy.deepcopy(model)
    kind = m["type"]
    if kind in ("decoder_only_transformer", "encoder_only_transformer"):
        heads = m["n_head"]
        m.setdefault("head_dim", m["d_model"] // heads)
        kv = m.get("n_kv_head", heads)
        group = heads // kv
        kept_kv = _keep(kv, fraction)
        m["n_head"] = kept_kv * group
        if "n_kv_head" in m:
            m["n_kv_head"] = kept_kv
        m["d_ff"] = _keep(m.get("d_ff") or 4 * m["d_model"], fraction)
    elif kind == "encoder_decoder_transformer":
        m["dim_feedforward"] = _keep(m.get("dim_feedforward", 2048), fraction)
    elif kind == "resnet":
        m["width"] = _keep(m.get("width", 64), fraction)
    elif kind == "sequential_cnn":
        linears = [i for i, layer in enumerate(m["layers"]) if layer["type"] == "linear"]
        for i, layer in enumerate(m["layers"]):
            if layer["type"] == "conv2d":
                layer["out_channels"] = _keep(layer["out_channels"], fraction)
            elif layer["type"] == "linear" and i != linears[-1]:
                layer["out_features"] = _keep(layer["out_features"], fraction)
    return m
