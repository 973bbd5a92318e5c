"""Decoder-only transformers: the GPT family (learned positions, LayerNorm, GELU, biases, tied
embeddings: nanoGPT's GPT-2) and the Llama family (RMSNorm, SwiGLU, rotary positions,
grouped-query attention, no biases). One generator with switches, so a GPT-style or Llama-style
model of any size is data."""

from __future__ import annotations

from dataclasses import dataclass

from simulator.workload import layers as L
from simulator.workload.builder import TraceBuilder
from simulator.workload.trace import Category, Tensor


@dataclass(frozen=True)
class DecoderOnlyTransformer:
    vocab_size: int
    n_layer: int
    d_model: int
    n_head: int
    n_kv_head: int | None = None       # grouped-query attention; None: one kv head per head
    d_ff: int | None = None            # None: 4 x d_model
    context: int = 1024                # learned-position table size
    positions: str = "learned"         # learned | rotary
    norm: str = "layernorm"            # layernorm | rmsnorm
    mlp: str = "gelu"                  # gelu | gelu_new (Hugging Face GPT-2, eager) | relu | swiglu
    bias: bool = True
    tie_embeddings: bool = True
    dropout: float = 0.0
    head_dim: int | None = None        # None: d_model / n_head (pruned heads keep theirs)

    @classmethod
    def from_dict(cls, raw: dict) -> DecoderOnlyTransformer:
        return cls(**{k: v for k, v in raw.items() if k != "type"})

    @property
    def kv_heads(self) -> int:
        return self.n_kv_head or self.n_head

    @property
    def ff(self) -> int:
        return self.d_ff or 4 * self.d_model

    @property
    def hd(self) -> int:
        return self.head_dim or self.d_model // self.n_head


# the feed-forward's activation per `mlp` (swiglu aside) and the name its op takes: both GELUs
# are "gelu", so an op keeps its name whichever form runs
ACTIVATIONS = {"gelu": (L.gelu, "gelu"), "gelu_new": (L.gelu_new, "gelu"),
               "relu": (L.relu, "relu")}


def _norm(b, m, x, w, name) -> Tensor:
    if m.norm == "rmsnorm":
        return L.rms_norm(b, x, w[0], name)
    return L.layer_norm(b, x, w[0], w[1], name)


def build(b: TraceBuilder, m: DecoderOnlyTransformer, batch: int,
          seq: int) -> tuple[Tensor, Tensor]:
    """Emit the forward pass of a language-model step; return (logits, target)."""
    e, f, hd = m.d_model, m.ff, m.hd
    inner, kv_dim = m.n_head * hd, m.kv_heads * hd

    def lin(name, n_out, n_in):
        w = b.parameter(f"{name}.weight", (n_out, n_in), matmul_weight=True)
        return w, (b.parameter(f"{name}.bias", (n_out,)) if m.bias else None)

    def norm_params(name):
        w = b.parameter(f"{name}.weight", (e,))
        return (w,) if m.norm == "rmsnorm" else (w, b.parameter(f"{name}.bias", (e,)))

    # parameters in module order
    wte = b.parameter("wte.weight", (m.vocab_size, e))
    wpe = b.parameter("wpe.weight", (m.context, e)) if m.positions == "learned" else None
    blocks = []
    for i in range(m.n_layer):
        p = f"h.{i}"
        blk = {"ln1": norm_params(f"{p}.ln_1")}
        if m.kv_heads == m.n_head and m.positions == "learned":
            blk["qkv"] = lin(f"{p}.attn.c_attn", 3 * inner, e)    # one packed projection
        else:
            blk["q"] = lin(f"{p}.attn.q_proj", inner, e)
            blk["k"] = lin(f"{p}.attn.k_proj", kv_dim, e)
            blk["v"] = lin(f"{p}.attn.v_proj", kv_dim, e)
        blk["o"] = lin(f"{p}.attn.c_proj", e, inner)
        blk["ln2"] = norm_params(f"{p}.ln_2")
        if m.mlp == "swiglu":
            blk["gate"] = lin(f"{p}.mlp.gate_proj", f, e)
            blk["up"] = lin(f"{p}.mlp.up_proj", f, e)
            blk["down"] = lin(f"{p}.mlp.down_proj", e, f)
        else:
            blk["fc"] = lin(f"{p}.mlp.c_fc", f, e)
            blk["proj"] = lin(f"{p}.mlp.c_proj", e, f)
        blocks.append(blk)
    ln_f = norm_params("ln_f")
    lm_head = wte if m.tie_embeddings else b.parameter("lm_head.weight", (m.vocab_size, e),
                                                                 matmul_weight=True)

    idx = b.tensor("tokens", (batch, seq), Category.INPUT, "int64")
    target = b.tensor("target", (batch * seq,), Category.INPUT, "int64")
    x = L.embedding(b, idx, wte, "wte")
    if wpe is not None:
        pos = b.tensor("positions", (seq,), Category.INPUT, "int64")
        x = L.add(b, x, L.embedding(b, pos, wpe, "wpe"), "embed_sum")
    cos = sin = None
    if m.positions == "rotary":
        cos = b.tensor("rope.cos", (seq, hd), Category.INPUT, "fp32")
        sin = b.tensor("rope.sin", (seq, hd), Category.INPUT, "fp32")
    x = L.dropout(b, x, m.dropout, "drop")
    shape = L.AttentionShape(batch, m.n_head, seq, seq, hd, causal=True)

    def block(x: Tensor, blk: dict, p: str) -> Tensor:
        h = _norm(b, m, x, blk["ln1"], f"{p}.ln_1")
        if "qkv" in blk:
            qkv = L.linear(b, h, *blk["qkv"], f"{p}.attn.c_attn")
            q = k = v = qkv
        else:
            q = L.linear(b, h, *blk["q"], f"{p}.attn.q_proj")
            k = L.linear(b, h, *blk["k"], f"{p}.attn.k_proj")
            v = L.linear(b, h, *blk["v"], f"{p}.attn.v_proj")
            if cos is not None:
                q = L.rotary(b, q, cos, sin, f"{p}.attn.rope_q")
                k = L.rotary(b, k, cos, sin, f"{p}.attn.rope_k")
            if m.kv_heads < m.n_head:  # repeat_kv: k and v expanded to every query head
                k = L.copy(b, k, q.shape, f"{p}.attn.repeat_k")
                v = L.copy(b, v, q.shape, f"{p}.attn.repeat_v")
        att = b.checkpointed("selective", lambda q=q, k=k, v=v, p=p: L.attention(
            b, q, k, v, shape, m.dropout, f"{p}.attn.sdpa"))
        merged = L.copy(b, att, (batch, seq, inner), f"{p}.attn.heads_merge")
        y = L.dropout(b, L.linear(b, merged, *blk["o"], f"{p}.attn.c_proj"), m.dropout,
                      f"{p}.attn.resid_dropout")
        x = L.add(b, x, y, f"{p}.attn.residual")
        h = _norm(b, m, x, blk["ln2"], f"{p}.ln_2")
        if m.mlp == "swiglu":
            g = L.linear(b, h, *blk["gate"], f"{p}.mlp.gate_proj")
            u = L.linear(b, h, *blk["up"], f"{p}.mlp.up_proj")
            h = L.linear(b, L.silu_mul(b, g, u, f"{p}.mlp.act"), *blk["down"],
                         f"{p}.mlp.down_proj")
        else:
            act, act_name = ACTIVATIONS[m.mlp]
            h = act(b, L.linear(b, h, *blk["fc"], f"{p}.mlp.c_fc"), f"{p}.mlp.{act_name}")
            h = L.linear(b, h, *blk["proj"], f"{p}.mlp.c_proj")
        x = L.add(b, x, L.dropout(b, h, m.dropout, f"{p}.mlp.dropout"), f"{p}.mlp.residual")
        return x

    for i, blk in enumerate(blocks):
        x = b.checkpointed("full", lambda x=x, blk=blk, p=f"h.{i}": block(x, blk, p))
    x = _norm(b, m, x, ln_f, "ln_f")
    logits = L.linear(b, x, lm_head, None, "lm_head")
    logits.retained = True
    return logits, target
