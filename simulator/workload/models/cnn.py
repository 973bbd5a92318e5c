"""A sequential convolutional network (nn.Sequential-style layer list): the seed CNN, and
torchvision's VGG family with or without batch norm."""

from __future__ import annotations

from simulator.config.models import cnn_shapes, pool_output_size
from simulator.workload import layers as L
from simulator.workload.builder import TraceBuilder
from simulator.workload.trace import Category, Tensor


def build(b: TraceBuilder, raw: dict, batch: int) -> tuple[Tensor, Tensor]:
    """Emit the forward pass; return (logits, target)."""
    shapes = cnn_shapes(raw)
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
        elif kind == "batchnorm2d":
            params.append(L.batch_norm_params(b, name, shape[0]))
        else:
            params.append(None)
        shape = out

    x = b.tensor("images", (batch,) + in_shape, Category.INPUT)
    target = b.tensor("labels", (batch,), Category.INPUT, "int64")

    def apply(x: Tensor, layer: dict, name: str, p) -> Tensor:
        kind = layer["type"]
        if kind == "conv2d":
            return L.conv2d(b, x, p[0], p[1], layer.get("stride", 1), layer.get("padding", 0),
                            name)
        if kind == "linear":
            return L.linear(b, x, p[0], p[1], name)
        if kind == "batchnorm2d":
            return L.batch_norm2d(b, x, p[0], p[1], p[2], name)
        if kind == "relu":
            return L.relu_(b, x, name) if layer.get("inplace") else L.relu(b, x, name)
        if kind == "adaptive_avgpool2d":
            return L.adaptive_avg_pool2d(b, x, name, pool_output_size(layer))
        if kind == "maxpool2d":
            k = layer["kernel_size"]
            return L.max_pool2d(b, x, k, layer.get("stride", k), name)
        if kind == "dropout":
            return L.dropout(b, x, layer["p"], name)
        return x  # flatten is a view: the next linear reads the same storage

    def run(x: Tensor, segment: list) -> Tensor:
        for layer, name, p in segment:
            x = apply(x, layer, name, p)
        return x

    # full checkpointing: each convolution or linear layer with the layers after it up to the
    # next one is a segment (torch.utils.checkpoint around it), whose input alone is kept
    segments: list[list] = []
    for item in zip(raw["layers"], names, params, strict=True):
        if not segments or item[0]["type"] in ("conv2d", "linear"):
            segments.append([])
        segments[-1].append(item)
    for segment in segments:
        x = b.checkpointed("full", lambda x=x, segment=segment: run(x, segment))
    x.retained = True  # the loop's `outputs` variable holds the logits to the end of the step
    return x, target
