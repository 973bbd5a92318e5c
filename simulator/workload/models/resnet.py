"""Residual networks as torchvision builds them (ResNet v1.5: stride in the 3x3 convolution,
in-place ReLU and residual sums, BatchNorm in training mode)."""

from __future__ import annotations

from dataclasses import dataclass

from simulator.workload import layers as L
from simulator.workload.builder import TraceBuilder
from simulator.workload.trace import Category, Tensor


@dataclass(frozen=True)
class ResNet:
    layers: tuple[int, ...] = (3, 4, 6, 3)   # blocks per stage: ResNet-50
    block: str = "bottleneck"                 # bottleneck (ResNet-50/101/152) or basic (18/34)
    width: int = 64
    width_per_group: int = 64                 # 128: Wide ResNet-50-2 and 101-2
    num_classes: int = 1000
    image_size: int = 224
    in_channels: int = 3

    @classmethod
    def from_dict(cls, raw: dict) -> ResNet:
        args = {k: v for k, v in raw.items() if k != "type"}
        if "layers" in args:
            args["layers"] = tuple(args["layers"])
        return cls(**args)


class _Builder:
    def __init__(self, b: TraceBuilder):
        self.b = b

    def conv(self, name: str, c_out: int, c_in: int, k: int) -> Tensor:
        return self.b.parameter(f"{name}.weight", (c_out, c_in, k, k), matmul_weight=True)

    def bn(self, name: str, c: int) -> tuple[Tensor, Tensor, list[Tensor]]:
        return L.batch_norm_params(self.b, name, c)


def build(b: TraceBuilder, m: ResNet, batch: int) -> tuple[Tensor, Tensor]:
    """Emit the forward pass of an image-classification step; return (logits, target)."""
    pb = _Builder(b)
    expansion = 4 if m.block == "bottleneck" else 1
    stem = (pb.conv("conv1", m.width, m.in_channels, 7), pb.bn("bn1", m.width))
    stages = []
    c_in = m.width
    for s, blocks in enumerate(m.layers):
        planes = m.width * 2**s
        stage = []
        for i in range(blocks):
            p = f"layer{s + 1}.{i}"
            stride = 2 if (i == 0 and s > 0) else 1
            blk: dict = {"stride": stride}

            def unit(j: int, c_out: int, c: int, k: int, st: int, p: str = p) -> tuple:
                # conv j, its BatchNorm, stride, kernel, padding
                return (pb.conv(f"{p}.conv{j}", c_out, c, k), pb.bn(f"{p}.bn{j}", c_out), st, k,
                        k // 2)

            if m.block == "bottleneck":
                inner = planes * m.width_per_group // 64
                blk["convs"] = [unit(1, inner, c_in, 1, 1), unit(2, inner, inner, 3, stride),
                                unit(3, planes * 4, inner, 1, 1)]
            else:
                blk["convs"] = [unit(1, planes, c_in, 3, stride), unit(2, planes, planes, 3, 1)]
            if stride != 1 or c_in != planes * expansion:
                blk["down"] = (pb.conv(f"{p}.downsample.0", planes * expansion, c_in, 1),
                               pb.bn(f"{p}.downsample.1", planes * expansion))
            c_in = planes * expansion
            stage.append((p, blk))
        stages.append(stage)
    fc_w = b.parameter("fc.weight", (m.num_classes, c_in), matmul_weight=True)
    fc_b = b.parameter("fc.bias", (m.num_classes,))

    x = b.tensor("images", (batch, m.in_channels, m.image_size, m.image_size), Category.INPUT)
    target = b.tensor("labels", (batch,), Category.INPUT, "int64")
    w, (g, beta, running) = stem
    x = L.conv2d(b, x, w, None, 2, 3, "conv1")
    x = L.relu_(b, L.batch_norm2d(b, x, g, beta, running, "bn1"), "relu")
    x = L.max_pool2d(b, x, 3, 2, "maxpool", padding=1)

    def block(x: Tensor, blk: dict, p: str) -> Tensor:
        identity = x
        out = x
        convs = blk["convs"]
        for j, (w, (g, beta, running), stride, _k, pad) in enumerate(convs):
            out = L.conv2d(b, out, w, None, stride, pad, f"{p}.conv{j + 1}")
            out = L.batch_norm2d(b, out, g, beta, running, f"{p}.bn{j + 1}")
            if j < len(convs) - 1:
                out = L.relu_(b, out, f"{p}.relu{j + 1}")
        if "down" in blk:
            w, (g, beta, running) = blk["down"]
            identity = L.conv2d(b, x, w, None, blk["stride"], 0, f"{p}.downsample.0")
            identity = L.batch_norm2d(b, identity, g, beta, running, f"{p}.downsample.1")
        out = L.add_(b, out, identity, f"{p}.residual")
        return L.relu_(b, out, f"{p}.relu")

    for stage in stages:
        for p, blk in stage:
            x = b.checkpointed("full", lambda x=x, blk=blk, p=p: block(x, blk, p))
    x = L.adaptive_avg_pool2d(b, x, "avgpool")
    logits = L.linear(b, x, fc_w, fc_b, "fc")   # reads the pooled (batch, 2048) as a view
    logits.retained = True
    return logits, target
