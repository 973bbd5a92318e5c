"""What a workload's `model` block must satisfy beyond its schema, per model type: the rules
a model generator (simulator/workload/models/) relies on, checked as the file loads."""

from __future__ import annotations

import math

from simulator.errors import InputError


def window_output(size: int, kernel: int, stride: int, padding: int) -> int:
    """Positions a convolution or pooling window takes along one spatial axis."""
    return (size + 2 * padding - kernel) // stride + 1


def pool_output_size(layer: dict) -> tuple[int, int]:
    """An adaptive pool's (height, width): `output_size` as one int or a pair, as
    nn.AdaptiveAvgPool2d takes it."""
    size = layer["output_size"]
    return (size, size) if isinstance(size, int) else (size[0], size[1])


def cnn_shapes(raw: dict, file: str | None = None) -> list[tuple[int, ...]]:
    """Each layer's output shape (without batch); raise where a layer cannot apply."""
    shape: tuple[int, ...] = tuple(raw["input_shape"])
    out = []
    for i, layer in enumerate(raw["layers"]):
        kind = layer["type"]
        where = f"$.model.layers[{i}]"
        if kind in ("conv2d", "maxpool2d"):
            if len(shape) != 3:
                raise InputError(f"{kind} needs a (channels, height, width) input, got {shape}",
                                 file=file, path=where)
            k = layer["kernel_size"]
            stride = layer.get("stride", 1 if kind == "conv2d" else k)
            pad = layer.get("padding", 0)
            c, h, w = shape
            ho, wo = window_output(h, k, stride, pad), window_output(w, k, stride, pad)
            if ho <= 0 or wo <= 0:
                raise InputError(f"expected kernel_size <= input size ({h}x{w}"
                                 f"{f' + padding {pad}' if pad else ''}), got {k}",
                                 file=file, path=f"{where}.kernel_size")
            shape = (layer["out_channels"] if kind == "conv2d" else c, ho, wo)
        elif kind in ("batchnorm2d", "adaptive_avgpool2d"):
            if len(shape) != 3:
                raise InputError(f"{kind} needs a (channels, height, width) input, got {shape}",
                                 file=file, path=where)
            if kind == "adaptive_avgpool2d":
                shape = (shape[0], *pool_output_size(layer))
        elif kind == "flatten":
            shape = (math.prod(shape),)
        elif kind == "linear":
            if len(shape) != 1:
                raise InputError(f"linear needs a flat input; add a flatten layer before it "
                                 f"(input is {shape})", file=file, path=where)
            shape = (layer["out_features"],)
        out.append(shape)
    if len(shape) != 1:
        raise InputError(f"expected the last layer to give class scores (a flat vector), got "
                         f"shape {shape}", file=file, path="$.model.layers")
    return out


def _transformer(raw: dict, data: dict, file: str) -> None:
    if raw["d_model"] % raw["nhead"]:
        raise InputError(f"expected nhead to divide d_model ({raw['d_model']}), got {raw['nhead']}",
                         file=file, path="$.model.nhead")
    for key in ("src_seq_len", "tgt_seq_len"):
        if key not in data:
            raise InputError(f"'{key}' is required for an encoder-decoder transformer",
                             file=file, path="$.data")


def _cnn(raw: dict, data: dict, file: str) -> None:
    cnn_shapes(raw, file)


def _decoder(raw: dict, data: dict, file: str) -> None:
    if "head_dim" not in raw and raw["d_model"] % raw["n_head"]:
        raise InputError(f"expected n_head to divide d_model ({raw['d_model']}), "
                         f"got {raw['n_head']}", file=file, path="$.model.n_head")
    kv = raw.get("n_kv_head", raw["n_head"])
    if raw["n_head"] % kv:
        raise InputError(f"expected n_kv_head to divide n_head ({raw['n_head']}), got {kv}",
                         file=file, path="$.model.n_kv_head")
    if "seq_len" not in data:
        raise InputError("'seq_len' is required for a decoder-only transformer",
                         file=file, path="$.data")
    if raw.get("positions", "learned") == "learned" and data["seq_len"] > raw.get("context", 1024):
        raise InputError(f"expected seq_len <= context ({raw.get('context', 1024)}) with learned "
                         f"positions, got {data['seq_len']}", file=file, path="$.data.seq_len")


def _encoder(raw: dict, data: dict, file: str) -> None:
    if "head_dim" not in raw and raw["d_model"] % raw["n_head"]:
        raise InputError(f"expected n_head to divide d_model ({raw['d_model']}), "
                         f"got {raw['n_head']}", file=file, path="$.model.n_head")
    if "seq_len" not in data:
        raise InputError("'seq_len' is required for an encoder-only transformer",
                         file=file, path="$.data")
    if data["seq_len"] > raw.get("max_positions", 512):
        raise InputError(f"expected seq_len <= max_positions ({raw.get('max_positions', 512)}), "
                         f"got {data['seq_len']}", file=file, path="$.data.seq_len")


def _resnet(raw: dict, data: dict, file: str) -> None:
    if raw.get("width_per_group", 64) != 64 and raw.get("block", "bottleneck") == "basic":
        raise InputError("expected width_per_group 64 with basic blocks (torchvision widens "
                         f"bottlenecks only), got {raw['width_per_group']}",
                         file=file, path="$.model.width_per_group")
    size = raw.get("image_size", 224)
    if size < 32:
        raise InputError(f"expected image_size >= 32 (five stride-2 stages), got {size}",
                         file=file, path="$.model.image_size")


def _transformer_xl(raw: dict, data: dict, file: str) -> None:
    if "seq_len" not in data:
        raise InputError("'seq_len' (the segment, tgt_len) is required for a Transformer-XL",
                         file=file, path="$.data")
    if raw["d_model"] % 2:
        raise InputError(f"expected an even d_model (sines and cosines of the positions), got "
                         f"{raw['d_model']}", file=file, path="$.model.d_model")


CHECKS = {
    "encoder_decoder_transformer": _transformer,
    "sequential_cnn": _cnn,
    "decoder_only_transformer": _decoder,
    "encoder_only_transformer": _encoder,
    "resnet": _resnet,
    "transformer_xl": _transformer_xl,
}
# the model types, in one place (the schema's enum is checked against it)
MODEL_TYPES = tuple(CHECKS)


def check_model(raw: dict, data: dict, file: str) -> None:
    """Reject models the schema allows but that cannot be built, with the JSON path."""
    CHECKS[raw["type"]](raw, data, file)
