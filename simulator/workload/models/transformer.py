"""torch.nn.Transformer (encoder-decoder) with token embedding and output projection."""

from __future__ import annotations

from dataclasses import dataclass

from simulator.workload import layers as L
from simulator.workload.builder import TraceBuilder
from simulator.workload.trace import Category, Tensor


@dataclass(frozen=True)
class EncoderDecoderTransformer:
    vocab_size: int
    d_model: int
    nhead: int
    num_encoder_layers: int
    num_decoder_layers: int
    dim_feedforward: int = 2048   # nn.Transformer's defaults
    dropout: float = 0.1
    activation: str = "relu"
    norm_first: bool = False
    batch_first: bool = False
    shared_embedding: bool = True

    @classmethod
    def from_dict(cls, raw: dict) -> EncoderDecoderTransformer:
        return cls(**{k: v for k, v in raw.items() if k != "type"})


class _Params:
    """Parameters registered in nn.Module order, so the optimizer visits them as PyTorch does."""

    def __init__(self, b: TraceBuilder, m: EncoderDecoderTransformer):
        e, f = m.d_model, m.dim_feedforward
        self.b = b

        def mha(p: str) -> dict[str, Tensor]:
            return {"in_w": b.parameter(f"{p}.in_proj_weight", (3 * e, e), True),
                    "in_b": b.parameter(f"{p}.in_proj_bias", (3 * e,)),
                    "out_w": b.parameter(f"{p}.out_proj.weight", (e, e), True),
                    "out_b": b.parameter(f"{p}.out_proj.bias", (e,))}

        def ff_and_norms(p: str, norms: int) -> dict[str, Tensor]:
            d = {"l1w": b.parameter(f"{p}.linear1.weight", (f, e), True),
                 "l1b": b.parameter(f"{p}.linear1.bias", (f,)),
                 "l2w": b.parameter(f"{p}.linear2.weight", (e, f), True),
                 "l2b": b.parameter(f"{p}.linear2.bias", (e,))}
            for i in range(1, norms + 1):
                d[f"n{i}w"] = b.parameter(f"{p}.norm{i}.weight", (e,))
                d[f"n{i}b"] = b.parameter(f"{p}.norm{i}.bias", (e,))
            return d

        self.enc = []
        for i in range(m.num_encoder_layers):
            p = f"transformer.encoder.layers.{i}"
            self.enc.append({"sa": mha(f"{p}.self_attn"), **ff_and_norms(p, 2)})
        self.enc_norm = (b.parameter("transformer.encoder.norm.weight", (e,)),
                         b.parameter("transformer.encoder.norm.bias", (e,)))
        self.dec = []
        for i in range(m.num_decoder_layers):
            p = f"transformer.decoder.layers.{i}"
            sa = mha(f"{p}.self_attn")
            ca = mha(f"{p}.multihead_attn")
            self.dec.append({"sa": sa, "ca": ca, **ff_and_norms(p, 3)})
        self.dec_norm = (b.parameter("transformer.decoder.norm.weight", (e,)),
                         b.parameter("transformer.decoder.norm.bias", (e,)))
        if m.shared_embedding:
            self.src_emb = self.tgt_emb = b.parameter("embedding.weight", (m.vocab_size, e))
        else:
            self.src_emb = b.parameter("src_embedding.weight", (m.vocab_size, e))
            self.tgt_emb = b.parameter("tgt_embedding.weight", (m.vocab_size, e))
        self.fc_w = b.parameter("fc.weight", (m.vocab_size, e), True)
        self.fc_b = b.parameter("fc.bias", (m.vocab_size,))


def _layout(m: EncoderDecoderTransformer, seq: int, batch: int) -> tuple[int, int]:
    return (batch, seq) if m.batch_first else (seq, batch)


def _self_attention(b, m, w, x, seq, batch, name) -> Tensor:
    e, h = m.d_model, m.nhead
    proj = L.linear(b, x, w["in_w"], w["in_b"], f"{name}.in_proj")
    # unflatten(-1, (3, E)).unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous()
    qkv = L.copy(b, proj, (3,) + x.shape, f"{name}.qkv_pack")
    shape = L.AttentionShape(batch, h, seq, seq, e // h)
    att = b.checkpointed("selective", lambda: L.attention(b, qkv, qkv, qkv, shape, m.dropout,
                                                           f"{name}.sdpa"))
    return _out_projection(b, w, att, x.shape, name)


def _cross_attention(b, m, w, x, mem, q_len, kv_len, batch, name) -> Tensor:
    e, h = m.d_model, m.nhead
    # w.split([E, 2E]): the slices' gradients are concatenated after both backward passes
    L.concat_slice_grads(b, w["in_w"], f"{name}.in_proj_weight")
    L.concat_slice_grads(b, w["in_b"], f"{name}.in_proj_bias")
    q = L.linear(b, x, w["in_w"], w["in_b"], f"{name}.q_proj", w_shape=(e, e))
    kv_proj = L.linear(b, mem, w["in_w"], w["in_b"], f"{name}.kv_proj", w_shape=(2 * e, e))
    kv = L.copy(b, kv_proj, (2,) + mem.shape, f"{name}.kv_pack")
    shape = L.AttentionShape(batch, h, q_len, kv_len, e // h)
    att = b.checkpointed("selective", lambda: L.attention(b, q, kv, kv, shape, m.dropout,
                                                           f"{name}.sdpa"))
    return _out_projection(b, w, att, x.shape, name)


def _out_projection(b, w, att, x_shape, name) -> Tensor:
    # attn_output.permute(2, 0, 1, 3).contiguous().view(bsz * tgt_len, embed_dim)
    merged = L.copy(b, att, x_shape, f"{name}.heads_merge")
    return L.linear(b, merged, w["out_w"], w["out_b"], f"{name}.out_proj")


def _feed_forward(b, m, w, x, name) -> Tensor:
    h = L.linear(b, x, w["l1w"], w["l1b"], f"{name}.linear1")
    act = L.relu if m.activation == "relu" else L.gelu
    h = act(b, h, f"{name}.{m.activation}")
    h = L.dropout(b, h, m.dropout, f"{name}.dropout")
    y = L.linear(b, h, w["l2w"], w["l2b"], f"{name}.linear2")
    return L.dropout(b, y, m.dropout, f"{name}.dropout2")


def _sublayer(b, m, x, norm, block, name) -> Tensor:
    """Post-norm: norm(x + block(x)); pre-norm: x + block(norm(x))."""
    nw, nb = norm
    if m.norm_first:
        y = block(L.layer_norm(b, x, nw, nb, f"{name}.norm"))
        return L.add(b, x, y, f"{name}.residual")
    y = block(x)
    return L.layer_norm(b, L.add(b, x, y, f"{name}.residual"), nw, nb, f"{name}.norm")


def build(b: TraceBuilder, m: EncoderDecoderTransformer, batch: int, src_len: int,
          tgt_len: int) -> tuple[Tensor, Tensor]:
    """Emit the forward pass; return (logits, target)."""
    w = _Params(b, m)
    src_idx = b.tensor("src_tokens", _layout(m, src_len, batch), Category.INPUT, "int64")
    tgt_idx = b.tensor("tgt_tokens", _layout(m, tgt_len, batch), Category.INPUT, "int64")
    target = b.tensor("target", (tgt_len * batch,), Category.INPUT, "int64")

    x = L.embedding(b, src_idx, w.src_emb, "embedding.src")
    def encoder_layer(x: Tensor, lw: dict, p: str) -> Tensor:
        x = _sublayer(b, m, x, (lw["n1w"], lw["n1b"]), lambda t: L.dropout(
            b, _self_attention(b, m, lw["sa"], t, src_len, batch, f"{p}.self_attn"), m.dropout,
            f"{p}.dropout1"), f"{p}.sa")
        return _sublayer(b, m, x, (lw["n2w"], lw["n2b"]),
                         lambda t: _feed_forward(b, m, lw, t, f"{p}.ff"), f"{p}.ff")

    for i, lw in enumerate(w.enc):
        x = b.checkpointed("full", lambda x=x, lw=lw, p=f"encoder.{i}": encoder_layer(x, lw, p))
    memory = L.layer_norm(b, x, *w.enc_norm, "encoder.norm")

    y = L.embedding(b, tgt_idx, w.tgt_emb, "embedding.tgt")
    def decoder_layer(y: Tensor, lw: dict, p: str) -> Tensor:
        y = _sublayer(b, m, y, (lw["n1w"], lw["n1b"]), lambda t: L.dropout(
            b, _self_attention(b, m, lw["sa"], t, tgt_len, batch, f"{p}.self_attn"), m.dropout,
            f"{p}.dropout1"), f"{p}.sa")
        y = _sublayer(b, m, y, (lw["n2w"], lw["n2b"]), lambda t: L.dropout(
            b, _cross_attention(b, m, lw["ca"], t, memory, tgt_len, src_len, batch,
                                f"{p}.cross_attn"), m.dropout, f"{p}.dropout2"), f"{p}.ca")
        return _sublayer(b, m, y, (lw["n3w"], lw["n3b"]),
                         lambda t: _feed_forward(b, m, lw, t, f"{p}.ff"), f"{p}.ff")

    for i, lw in enumerate(w.dec):
        y = b.checkpointed("full", lambda y=y, lw=lw, p=f"decoder.{i}": decoder_layer(y, lw, p))
    y = L.layer_norm(b, y, *w.dec_norm, "decoder.norm")
    logits = L.linear(b, y, w.fc_w, w.fc_b, "fc")
    logits.retained = True  # the loop's `output` variable holds it to the end of the step
    return logits, target
