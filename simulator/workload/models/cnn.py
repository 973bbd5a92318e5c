"""A sequential convolutional network (nn.Sequential-style layer list)."""

from __future__ import annotations

import math

from simulator.errors import InputError
from simulator.workload import layers as L
from simulator.workload.builder import TraceBuilder
from simulator.workload.trace import Category, Tensor


def _shapes(raw: dict, file: str | None = None) -> list[tuple[int, ...]]:
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
            ho, wo = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
            if ho <= 0 or wo <= 0:
                raise InputError(f"expected kernel_size <= input size ({h}x{w}"
                                 f"{f' + padding {pad}' if pad else ''}), got {k}",
                                 file=file, path=f"{where}.kernel_size")
            shape = (layer["out_channels"] if kind == "conv2d" else c, ho, wo)
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


def check(raw: dict, data: dict, file: str) -> None:
    _shapes(raw, file)


def build(b: TraceBuilder, raw: dict, batch: int) -> tuple[Tensor, Tensor]:
    """Emit the forward pass; return (logits, target)."""
    shapes = _shapes(raw)
    in_shape: tuple[int, ...] = tuple(raw["input_shape"])
    params: list[tuple[Tensor, Tensor | None] | None] = []
    counts: dict[str, int] = {}
    names = []
    for layer in raw["layers"]:
        kind = layer["type"]
        counts[kind] = counts.get(kind, 0) + 1
        names.append(layer.get("name", f"{kind}{counts[kind]}"))
    shape = in_shape
    for layer, name, out in zip(raw["layers"], names, shapes, strict=True):
        kind = layer["type"]
        if kind == "conv2d":
            k = layer["kernel_size"]
            wt = b.parameter(f"{name}.weight", (layer["out_channels"], shape[0], k, k),
                             matmul_weight=True)
            bias = b.parameter(f"{name}.bias", (layer["out_channels"],)) \
                if layer.get("bias", True) else None
            params.append((wt, bias))
        elif kind == "linear":
            wt = b.parameter(f"{name}.weight", (layer["out_features"], shape[0]),
                             matmul_weight=True)
            bias = b.parameter(f"{name}.bias", (layer["out_features"],)) \
                if layer.get("bias", True) else None
            params.append((wt, bias))
        else:
            params.append(None)
        shape = out

    x = b.tensor("images", (batch,) + in_shape, Category.INPUT)
    target = b.tensor("labels", (batch,), Category.INPUT, "int64")
    for layer, name, p in zip(raw["layers"], names, params, strict=True):
        kind = layer["type"]
        if kind == "conv2d":
            x = L.conv2d(b, x, p[0], p[1], layer.get("stride", 1), layer.get("padding", 0), name)
        elif kind == "linear":
            x = L.linear(b, x, p[0], p[1], name)
        elif kind == "relu":
            x = L.relu(b, x, name)
        elif kind == "maxpool2d":
            k = layer["kernel_size"]
            x = L.max_pool2d(b, x, k, layer.get("stride", k), name)
        elif kind == "dropout":
            x = L.dropout(b, x, layer["p"], name)
        # flatten is a view: the next linear reads the same storage as (batch, features)
    x.retained = True  # the loop's `outputs` variable holds the logits to the end of the step
    return x, target
