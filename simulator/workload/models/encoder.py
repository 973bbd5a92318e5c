"""Encoder-only transformers: BERT as Hugging Face's BertForMaskedLM builds it (post-LayerNorm,
separate q/k/v projections, GELU, learned positions and token types, a masked-LM head whose
decoder is tied to the word embeddings), or with BertForQuestionAnswering's span head
(`head: question_answering`, SQuAD fine-tuning: a linear layer to a start and an end logit per
token, each a cross-entropy over the sequence's positions)."""

from __future__ import annotations

from dataclasses import dataclass

from simulator.workload import layers as L
from simulator.workload.builder import TraceBuilder
from simulator.workload.trace import Category, Tensor


@dataclass(frozen=True)
class EncoderOnlyTransformer:
    vocab_size: int
    n_layer: int
    d_model: int
    n_head: int
    d_ff: int | None = None          # None: 4 x d_model
    max_positions: int = 512
    type_vocab_size: int = 2
    dropout: float = 0.1
    head_dim: int | None = None      # None: d_model / n_head (pruned heads keep theirs)
    head: str = "masked_lm"          # masked_lm | question_answering

    @classmethod
    def from_dict(cls, raw: dict) -> EncoderOnlyTransformer:
        return cls(**{k: v for k, v in raw.items() if k != "type"})


def build(b: TraceBuilder, m: EncoderOnlyTransformer, batch: int,
          seq: int) -> tuple[Tensor, Tensor]:
    """Emit the forward pass of a masked-LM or span-prediction step; return (logits, target)."""
    e, f = m.d_model, m.d_ff or 4 * m.d_model
    hd = m.head_dim or e // m.n_head
    inner = m.n_head * hd
    span_head = m.head == "question_answering"

    def lin(name, n_out, n_in):
        return (b.parameter(f"{name}.weight", (n_out, n_in), matmul_weight=True),
                b.parameter(f"{name}.bias", (n_out,)))

    def ln(name):
        return (b.parameter(f"{name}.weight", (e,)), b.parameter(f"{name}.bias", (e,)))

    word = b.parameter("bert.embeddings.word_embeddings.weight", (m.vocab_size, e))
    pos = b.parameter("bert.embeddings.position_embeddings.weight", (m.max_positions, e))
    tok = b.parameter("bert.embeddings.token_type_embeddings.weight", (m.type_vocab_size, e))
    emb_ln = ln("bert.embeddings.LayerNorm")
    layers = []
    for i in range(m.n_layer):
        p = f"bert.encoder.layer.{i}"
        layers.append({"q": lin(f"{p}.attention.self.query", inner, e),
                       "k": lin(f"{p}.attention.self.key", inner, e),
                       "v": lin(f"{p}.attention.self.value", inner, e),
                       "o": lin(f"{p}.attention.output.dense", e, inner),
                       "ln1": ln(f"{p}.attention.output.LayerNorm"),
                       "fc": lin(f"{p}.intermediate.dense", f, e),
                       "proj": lin(f"{p}.output.dense", e, f),
                       "ln2": ln(f"{p}.output.LayerNorm")})
    if span_head:
        qa = lin("qa_outputs", 2, e)
    else:
        head = lin("cls.predictions.transform.dense", e, e)
        head_ln = ln("cls.predictions.transform.LayerNorm")
        decoder_bias = b.parameter("cls.predictions.bias", (m.vocab_size,))

    ids = b.tensor("input_ids", (batch, seq), Category.INPUT, "int64")
    types = b.tensor("token_type_ids", (batch, seq), Category.INPUT, "int64")
    positions = b.tensor("position_ids", (1, seq), Category.INPUT, "int64")
    target = b.tensor("labels", (2 * batch if span_head else batch * seq,), Category.INPUT,
                      "int64")
    x = L.embedding(b, ids, word, "embeddings.word")
    x = L.add(b, x, L.embedding(b, types, tok, "embeddings.token_type"), "embeddings.sum_type")
    x = L.add(b, x, L.embedding(b, positions, pos, "embeddings.position"), "embeddings.sum_pos")
    x = L.dropout(b, L.layer_norm(b, x, *emb_ln, "embeddings.LayerNorm"), m.dropout,
                  "embeddings.dropout")
    shape = L.AttentionShape(batch, m.n_head, seq, seq, hd)
    def layer(x: Tensor, w: dict, p: str) -> Tensor:
        q = L.linear(b, x, *w["q"], f"{p}.query")
        k = L.linear(b, x, *w["k"], f"{p}.key")
        v = L.linear(b, x, *w["v"], f"{p}.value")
        att = b.checkpointed("selective", lambda q=q, k=k, v=v, p=p: L.attention(
            b, q, k, v, shape, m.dropout, f"{p}.sdpa"))
        merged = L.copy(b, att, (batch, seq, inner), f"{p}.heads_merge")
        y = L.dropout(b, L.linear(b, merged, *w["o"], f"{p}.attention.output"), m.dropout,
                      f"{p}.attention.dropout")
        x = L.layer_norm(b, L.add(b, y, x, f"{p}.attention.residual"), *w["ln1"],
                         f"{p}.attention.LayerNorm")
        h = L.gelu(b, L.linear(b, x, *w["fc"], f"{p}.intermediate"), f"{p}.gelu")
        y = L.dropout(b, L.linear(b, h, *w["proj"], f"{p}.output"), m.dropout, f"{p}.dropout")
        x = L.layer_norm(b, L.add(b, y, x, f"{p}.residual"), *w["ln2"], f"{p}.LayerNorm")
        return x

    for i, w in enumerate(layers):
        x = b.checkpointed("full", lambda x=x, w=w, p=f"layer.{i}": layer(x, w, p))
    if span_head:
        # start and end logits split off the last dimension, each made contiguous for its
        # cross-entropy over the positions: one (2 x batch, seq) block of rows
        span = L.linear(b, x, *qa, "qa_outputs")
        logits = L.copy(b, span, (2 * batch, seq), "qa_outputs.split")
    else:
        h = L.gelu(b, L.linear(b, x, *head, "cls.transform"), "cls.gelu")
        h = L.layer_norm(b, h, *head_ln, "cls.LayerNorm")
        logits = L.linear(b, h, word, decoder_bias, "cls.decoder")  # tied to the word embeddings
    logits.retained = True
    return logits, target
