"""Transformer-XL (Dai et al., ACL 2019) as NVIDIA DeepLearningExamples' PyTorch
`mem_transformer.py` builds it for attn_type 0 without an adaptive softmax: each layer attends
over its segment and the memory (the layer inputs of the previous segment, kept without a
gradient), with relative positions (Rel. Partial Learnable attention: a query bias for content
and one for position, shared by every layer); post-LayerNorm; a ReLU feed-forward; the output
layer tied to the word embedding, a full log-softmax over the vocabulary.

Everything is laid out sequence-first, (len, batch, ...), as the original is. Its attention
products are `torch.einsum` calls, which fold their operands into `bmm` with `reshape`: a view
where the dims collapse into one stride, else a copy (aten's sumproduct_pair). The query,
contiguous, collapses; keys and values, chunks of one packed projection, do not, and are
copied before each product; the positional product's output is a permuted view that the
relative shift (a zero column concatenated, then a strided view) copies."""

from __future__ import annotations

from dataclasses import dataclass

from simulator.workload import layers as L
from simulator.workload.builder import TraceBuilder, part
from simulator.workload.trace import DTYPE_BYTES, Access, Category, Pattern, Tensor


@dataclass(frozen=True)
class TransformerXL:
    vocab_size: int
    n_layer: int
    d_model: int
    n_head: int
    d_head: int
    d_inner: int
    mem_len: int
    dropout: float = 0.1
    dropatt: float = 0.0
    # the code's release: "2020.09" (DeepLearningExamples from September 2020 on) or "2020.02"
    # (commit a38deff6, before June 2020: each layer reads `attn_mask.any()` on the host, the
    # two score terms are added and then scaled in two kernels, and the memory is kept one
    # cat per layer input and the last output)
    release: str = "2020.09"

    @classmethod
    def from_dict(cls, raw: dict) -> TransformerXL:
        return cls(**{k: v for k, v in raw.items() if k != "type"})


def _alias(b: TraceBuilder, of: Tensor, shape: tuple[int, ...], name: str) -> Tensor:
    """A view of part of `of` (a gradient handed on through a slice or a cat's backward)."""
    t = b.tensor(name, shape, Category.TEMPORARY, of.dtype)
    t.alias_of = of.storage
    return t


def _strided(t: Tensor) -> Access:
    return part(t, t.nbytes, Pattern.STRIDED)


def build(b: TraceBuilder, m: TransformerXL, batch: int, seq: int) -> tuple[Tensor, Tensor]:
    """Emit the forward pass of one segment's step, the memory full; return (logits, target)."""
    e, n, d = m.d_model, m.n_head, m.d_head
    nd = n * d
    q, k = seq, seq + m.mem_len

    def lin(name, n_out, n_in, bias=True):
        w = b.parameter(f"{name}.weight", (n_out, n_in), matmul_weight=True)
        return w, (b.parameter(f"{name}.bias", (n_out,)) if bias else None)

    def ln(name):
        return b.parameter(f"{name}.weight", (e,)), b.parameter(f"{name}.bias", (e,))

    # parameters in module order
    word = b.parameter("word_emb.emb_layers.0.weight", (m.vocab_size, e))
    layers = []
    for i in range(m.n_layer):
        p = f"layers.{i}"
        layers.append({"qkv": lin(f"{p}.dec_attn.qkv_net", 3 * nd, e, bias=False),
                       "o": lin(f"{p}.dec_attn.o_net", e, nd, bias=False),
                       "ln1": ln(f"{p}.dec_attn.layer_norm"),
                       "r": lin(f"{p}.dec_attn.r_net", nd, e, bias=False),
                       "ff1": lin(f"{p}.pos_ff.CoreNet.0", m.d_inner, e),
                       "ff2": lin(f"{p}.pos_ff.CoreNet.3", e, m.d_inner),
                       "ln2": ln(f"{p}.pos_ff.layer_norm")})
    out_bias = b.parameter("crit.out_layers_biases.0", (m.vocab_size,))
    r_w_bias = b.parameter("r_w_bias", (n, d))  # _create_params, after the modules
    r_r_bias = b.parameter("r_r_bias", (n, d))

    idx = b.tensor("tokens", (q, batch), Category.INPUT, "int64")
    target = b.tensor("target", (q * batch,), Category.INPUT, "int64")
    early = m.release == "2020.02"
    kept = m.n_layer + 1 if early else m.n_layer  # hidden states the memory keeps
    mems = b.tensor("mems", (kept, m.mem_len, batch, e), Category.INPUT) \
        if m.mem_len else None

    x = L.scale(b, L.embedding(b, idx, word, "word_emb"), "word_emb.scale")  # x sqrt(d_model)
    # the causal mask over segment and memory, and the sinusoids of the k relative distances:
    # small kernels of their own (ones, triu, bool; arange, ger, sin, cos, cat)
    mask = b.activation("dec_attn_mask", (q, k), dtype="bool")
    for step in ("ones", "triu", "to_bool"):
        b.op(f"dec_attn_mask.{step}", "elementwise", [], [mask])
    half = b.activation("pos_emb.sinusoid_inp", (k, e // 2), dtype=b.dtype)
    pos = b.activation("pos_emb.out", (k, 1, e), dtype=b.dtype)
    for step in ("arange", "ger", "sin", "cos"):
        b.op(f"pos_emb.{step}", "elementwise", [], [half])
    b.op("pos_emb.cat", "copy", [half, half], [pos])
    x = L.dropout(b, x, m.dropout, "drop")
    pos = L.dropout(b, pos, m.dropout, "pos_drop")
    hids = []
    for i, lay in enumerate(layers):
        hids.append(x)
        mem_i = part(mems, mems.nbytes // kept) if mems is not None else None
        x = _layer(b, m, x, pos, mem_i, mask, lay, r_w_bias, r_r_bias, batch, q, k,
                   f"layers.{i}")
    hids.append(x)
    x = L.dropout(b, x, m.dropout, "drop_out")
    # _update_mems, without a gradient: the layer inputs stacked; past memory kept only where
    # the segment is shorter than the memory (cat, then the last mem_len rows); before June
    # 2020 each kept state and its memory one cat
    if mems is not None and early:
        for i, h in enumerate(hids):
            cat = b.temporary(f"new_mems.{i}.cat", (k, batch, e), x.dtype)
            b.op(f"new_mems.{i}.cat", "copy", [part(mems, mems.nbytes // kept), h], [cat])
    elif mems is not None:
        hids.pop()
        stacked = b.temporary("new_mems.stacked", (m.n_layer, q, batch, e), x.dtype)
        b.op("new_mems.stack", "copy", hids, [stacked])
        if m.mem_len != q:
            cat = b.temporary("new_mems.cat", (m.n_layer, k, batch, e), x.dtype)
            b.op("new_mems.cat", "copy", [mems, stacked], [cat])
    logits = L.linear(b, x, word, out_bias, "crit.out_layer")  # tied to the embedding
    logits.retained = True
    return logits, target


def _layer(b, m: TransformerXL, w: Tensor, r: Tensor, mem, mask: Tensor, lay: dict,
           r_w_bias: Tensor, r_r_bias: Tensor, batch: int, q: int, k: int, p: str) -> Tensor:
    e, n, d = m.d_model, m.n_head, m.d_head
    nd = n * d
    a = f"{p}.dec_attn"
    elem = DTYPE_BYTES[w.dtype]
    if mem is not None:  # torch.cat([mems, w]): the attention's keys and values see both
        cat = b.activation(f"{a}.cat", (k, batch, e), w)
        b.op(f"{a}.cat", "copy", [mem, w], [cat])

        def cat_backward() -> None:
            g = b.grad_of(cat)
            if g is not None:  # the segment's rows of the gradient, a view
                b.accumulate(w, _alias(b, g, w.shape, f"grad({a}.cat).segment"), share=True)

        b.on_backward(cat_backward)
    else:
        cat = w
    heads = L.linear(b, cat, *lay["qkv"], f"{a}.qkv_net")       # (k, batch, 3 nd)
    r_k = L.linear(b, r, *lay["r"], f"{a}.r_net")               # (k, 1, nd)
    q_bytes, kv_bytes = q * batch * nd * elem, k * batch * nd * elem

    def biased(bias: Tensor, name: str) -> Tensor:  # w_head_q[-qlen:] + bias
        out = b.activation(f"{a}.{name}.out", (q, batch, n, d), heads, bias)
        b.op(f"{a}.{name}", "elementwise", [part(heads, q_bytes, Pattern.STRIDED), bias], [out])
        return out

    rw_q, rr_q = biased(r_w_bias, "rw_head_q"), biased(r_r_bias, "rr_head_q")
    k_copy = L.bmm_operand(b, heads, kv_bytes, (batch * n, d, k), True, f"{a}.k_copy")
    bmm = 2 * batch * n * q * k * d
    dims = (q, k, d)  # every product's M, N and K are among these (and q x batch)
    ac = b.activation(f"{a}.AC", (batch, n, q, k), rw_q, k_copy)
    L.bmm(b, f"{a}.AC", [_strided(rw_q), k_copy], [ac], bmm, dims)
    bd = b.activation(f"{a}.BD", (n, q * batch, k), rr_q, r_k)  # a permuted view of this
    L.bmm(b, f"{a}.BD", [_strided(rr_q), _strided(r_k)], [bd], bmm, dims)
    padded = b.activation(f"{a}.rel_shift.padded", (batch, n, q, k + 1), bd)
    b.op(f"{a}.rel_shift.zero_pad", "elementwise", [], [part(padded, batch * n * q * elem)])
    b.op(f"{a}.rel_shift.cat", "copy", [_strided(bd)], [padded])
    score = b.activation(f"{a}.attn_score", (batch, n, q, k), ac, padded)
    b.op(f"{a}.add_and_scale", "elementwise", [ac, _strided(padded)], [score])
    if m.release == "2020.02":  # AC + BD, then mul_(scale); `attn_mask.any().item()`
        b.op(f"{a}.scale", "elementwise", [score], [score])
        found = b.temporary(f"{a}.attn_mask.any", (), "bool")
        b.op(f"{a}.attn_mask.any", "reduction", [mask], [found])
        b.op(f"{a}.attn_mask.any.item", "copy", [found], [], host_waits=True)
    b.op(f"{a}.masked_fill", "elementwise", [score, mask], [score])  # in place
    prob = b.activation(f"{a}.attn_prob", score.shape, score)
    b.op(f"{a}.softmax", "elementwise", [L.softmax_reads(score, 3)], [prob])
    v_grads: list[Tensor] = []

    def scores_backward() -> None:
        """From the probabilities back to the packed projection and the two biases: the
        softmax's two kernels, the mask, the scale, the relative shift's zeros and copy, two
        bmms per product, the query's slice and the chunks' cat."""
        g_prob = b.grad_of(prob)
        if g_prob is None:
            return
        g_score = b.temporary(f"grad({score.name})", score.shape, score.dtype)
        L.softmax_backward(b, f"{a}.softmax", g_prob, prob, g_score)
        b.op(f"{a}.masked_fill.backward", "elementwise", [g_score, mask], [g_score])
        g_sum = b.temporary(f"grad({a}.add_and_scale)", score.shape, score.dtype)
        b.op(f"{a}.add_and_scale.backward", "elementwise", [g_score], [g_sum])
        # narrow's backward: a zeroed padded gradient, the shifted one copied in; the
        # product's backward reshapes the permuted slice of it (a copy)
        g_pad = b.temporary(f"grad({padded.name})", padded.shape, padded.dtype)
        b.op(f"{a}.rel_shift.backward_zeros", "elementwise", [], [g_pad])
        b.op(f"{a}.rel_shift.backward", "copy", [g_sum], [_strided(g_pad)])
        g_bd = b.temporary(f"grad({bd.name})", bd.shape, bd.dtype)
        b.op(f"{a}.BD.grad_reshape", "copy", [_strided(g_pad)], [g_bd])
        g_rrq = b.temporary(f"grad({rr_q.name})", (n, q * batch, d), rr_q.dtype)
        L.bmm(b, f"{a}.BD.grad_q", [g_bd, _strided(r_k)], [g_rrq], bmm, dims)
        g_rk = b.temporary(f"grad({r_k.name})", (n, k, d), r_k.dtype)
        L.bmm(b, f"{a}.BD.grad_r", [g_bd, _strided(rr_q)], [g_rk], bmm, dims)
        b.accumulate(r_k, g_rk)
        g_rwq = b.temporary(f"grad({rw_q.name})", (batch * n, q, d), rw_q.dtype)
        L.bmm(b, f"{a}.AC.grad_q", [g_sum, k_copy], [g_rwq], bmm, dims)
        g_k = b.temporary(f"grad({a}.k)", (batch * n, k, d), k_copy.dtype)
        L.bmm(b, f"{a}.AC.grad_k", [g_sum, _strided(rw_q)], [g_k], bmm, dims)
        for bias, g in ((r_w_bias, g_rwq), (r_r_bias, g_rrq)):  # summed over (q, batch)
            gb = b.new_grad(bias)
            b.op(f"{a}.{bias.name}.grad", "reduction", [g], [gb])
            b.accumulate(bias, gb)
        g_q = b.temporary(f"grad({a}.q)", rw_q.shape, rw_q.dtype)
        b.op(f"{a}.q.grad_sum", "elementwise", [g_rwq, g_rrq], [g_q])
        g_q_full = b.temporary(f"grad({a}.q).full", (k, batch, nd), heads.dtype)
        b.op(f"{a}.q.backward_zeros", "elementwise", [], [g_q_full])
        b.op(f"{a}.q.backward", "copy", [g_q], [part(g_q_full, q_bytes)])
        g_heads = b.new_grad(heads)
        b.op(f"{a}.chunk.backward", "copy",
             [g_q_full, _strided(g_k), *(_strided(g) for g in v_grads)], [g_heads])
        b.accumulate(heads, g_heads)

    b.on_backward(scores_backward)
    dropped = L.dropout(b, prob, m.dropatt, f"{a}.dropatt")
    v_copy = L.bmm_operand(b, heads, kv_bytes, (batch * n, k, d), True, f"{a}.v_copy")
    vec = b.activation(f"{a}.attn_vec", (batch, n, q, d), dropped, v_copy)
    L.bmm(b, f"{a}.attn_vec", [dropped, v_copy], [vec], bmm, dims)
    merged = b.activation(f"{a}.attn_vec.contiguous", (q, batch, nd), vec)
    b.op(f"{a}.attn_vec.contiguous", "copy", [_strided(vec)], [merged])

    def vec_backward() -> None:
        g_merged = b.grad_of(merged)
        if g_merged is None:
            return
        g_vec = b.temporary(f"grad({vec.name})", vec.shape, vec.dtype)
        b.op(f"{a}.attn_vec.contiguous.backward", "copy", [_strided(g_merged)], [g_vec])
        g_drop = b.new_grad(dropped)
        L.bmm(b, f"{a}.attn_vec.grad_prob", [g_vec, v_copy], [g_drop], bmm, dims)
        b.accumulate(dropped, g_drop)
        g_v = b.temporary(f"grad({a}.v)", v_copy.shape, v_copy.dtype)
        L.bmm(b, f"{a}.attn_vec.grad_v", [dropped, g_vec], [g_v], bmm, dims)
        v_grads.append(g_v)

    b.on_backward(vec_backward)
    out = L.dropout(b, L.linear(b, merged, *lay["o"], f"{a}.o_net"), m.dropout, f"{a}.drop")
    w = L.layer_norm(b, L.add(b, w, out, f"{a}.residual"), *lay["ln1"], f"{a}.layer_norm")
    f = f"{p}.pos_ff"
    h = L.dropout(b, L.relu(b, L.linear(b, w, *lay["ff1"], f"{f}.CoreNet.0"), f"{f}.relu"),
                  m.dropout, f"{f}.CoreNet.2")
    h = L.dropout(b, L.linear(b, h, *lay["ff2"], f"{f}.CoreNet.3"), m.dropout,
                  f"{f}.CoreNet.4")
    return L.layer_norm(b, L.add(b, w, h, f"{f}.residual"), *lay["ln2"], f"{f}.layer_norm")
