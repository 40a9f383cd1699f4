"""Transformers for the zoo: BERT (``bert-tiny``, ``bert-base``), GPT-2 (``gpt2``) and ViT-B/16
(``vit-b16``), built from graph ops with deterministic random weights (TVM MetaSchedule's
benchmark networks, without loading any checkpoint).

Every block is what a transformer spends its time in: an embedding lookup (``take`` of an
int64 ``input_ids`` graph input; a 16x16 patch convolution for ViT), dense layers with a bias,
layer norm, gelu, and attention as ``batch_matmul -> scale -> mask -> softmax ->
batch_matmul`` over ``batch * heads`` matrices.

Layer norm is ``nn.layer_norm`` (one task each); gelu is the exact erf form for BERT and ViT
and the tanh form (``gelu_new``) for GPT-2, as the published models compute them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import nn, op
from ..ir import Constant, Expr
from .layers import NetBuilder


@dataclass(frozen=True)
class Config:
    layers: int
    hidden: int
    heads: int
    intermediate: int
    vocab: int = 30522
    max_positions: int = 512
    gelu: str = "none"  # "tanh": GPT-2's approximation


CONFIGS = {
    "bert-tiny": Config(2, 128, 2, 512),
    "bert-base": Config(12, 768, 12, 3072),
    "gpt2": Config(12, 768, 12, 3072, vocab=50257, max_positions=1024, gelu="tanh"),
    "vit-b16": Config(12, 768, 12, 3072, vocab=0, max_positions=197),
}
DEFAULT_SEQ_LEN = 128
VIT_IMAGE, VIT_PATCH, VIT_CLASSES = 224, 16, 1000


def layer_norm(b: NetBuilder, x: Expr, name: str, epsilon: float = 1e-5) -> Expr:
    """Layer norm over the last axis of ``x`` (rows, hidden), with ``<name>_gamma`` /
    ``<name>_beta``: ``(x - mean) / sqrt(var + eps) * gamma + beta``, as one ``nn.layer_norm``
    (one task, a reduction over the last axis)."""
    hidden = x.shape[-1]
    gamma = b.weight(name + "_gamma", "bn_gamma", (hidden,))
    beta = b.weight(name + "_beta", "bias", (hidden,))
    return nn.layer_norm(x, gamma, beta, axis=-1, epsilon=epsilon)


def gelu(x: Expr, approximate: str = "none") -> Expr:
    """GELU: BERT's and ViT's exact ``0.5 x (1 + erf(x / sqrt 2))`` (``approximate="none"``),
    or GPT-2's ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`` (``"tanh"``)."""
    if approximate == "none":
        return op.multiply(
            op.multiply(x, 0.5), op.add(op.erf(op.multiply(x, 1 / math.sqrt(2))), 1.0)
        )
    inner = op.multiply(op.add(x, op.multiply(op.multiply(op.multiply(x, x), x), 0.044715)),
                        math.sqrt(2.0 / math.pi))  # fmt: skip
    return op.multiply(op.multiply(x, 0.5), op.add(op.tanh(inner), 1.0))


def _dense(b: NetBuilder, x: Expr, units: int, name: str) -> Expr:
    return b.dense_add_bias(x, units, name + "_weight", name + "_bias")


def attention(b: NetBuilder, x: Expr, batch: int, seq: int, heads: int, mask, name: str):
    """Multi-head self-attention of ``x`` (batch * seq, hidden) with an additive ``mask``
    constant of shape (seq, seq); returns (batch * seq, hidden) after the output dense."""
    hidden = x.shape[1]
    dh = hidden // heads

    def split_heads(t):  # (B*S, H) -> (B*heads, S, dh)
        t = op.transpose(op.reshape(t, (batch, seq, heads, dh)), (0, 2, 1, 3))
        return op.reshape(t, (batch * heads, seq, dh))

    q = split_heads(_dense(b, x, hidden, name + "_query"))
    k = split_heads(_dense(b, x, hidden, name + "_key"))
    v = split_heads(_dense(b, x, hidden, name + "_value"))
    scores = op.multiply(nn.batch_matmul(q, k), 1.0 / math.sqrt(dh))
    if mask is not None:
        scores = op.add(scores, Constant(mask.astype(np.float32)))
    probs = nn.softmax(scores, axis=-1)
    ctx = nn.batch_matmul(probs, op.transpose(v, (0, 2, 1)))  # (B*heads, S, dh)
    ctx = op.transpose(op.reshape(ctx, (batch, heads, seq, dh)), (0, 2, 1, 3))
    return _dense(b, op.reshape(ctx, (batch * seq, hidden)), hidden, name + "_output")


def _mlp(b: NetBuilder, x: Expr, cfg: Config, name: str) -> Expr:
    h = gelu(_dense(b, x, cfg.intermediate, name + "_intermediate"), cfg.gelu)
    return _dense(b, h, cfg.hidden, name + "_output")


def _post_ln_layer(b, x, cfg, batch, seq, mask, name):  # BERT
    x = layer_norm(b, op.add(attention(b, x, batch, seq, cfg.heads, mask, name + "_attn"), x),
                   name + "_attn_ln", 1e-12)  # fmt: skip
    return layer_norm(b, op.add(_mlp(b, x, cfg, name + "_ffn"), x), name + "_ffn_ln", 1e-12)


def _pre_ln_layer(b, x, cfg, batch, seq, mask, name):  # GPT-2, ViT
    h = attention(b, layer_norm(b, x, name + "_ln1"), batch, seq, cfg.heads, mask, name + "_attn")
    x = op.add(x, h)
    return op.add(x, _mlp(b, layer_norm(b, x, name + "_ln2"), cfg, name + "_mlp"))


def _embed(b: NetBuilder, ids: Expr, cfg: Config, seq: int, prefix: str) -> Expr:
    batch = ids.shape[0]
    table = b.weight(
        prefix + "word_embeddings", "dense", (cfg.vocab, cfg.hidden), fan_in=cfg.hidden
    )
    pos = b.weight(prefix + "position_embeddings", "dense", (seq, cfg.hidden), fan_in=cfg.hidden)
    x = op.add(op.take(table, ids, axis=0, mode="fast"), pos)  # (B, S, H)
    return op.reshape(x, (batch * seq, cfg.hidden))


def bert(b: NetBuilder, batch: int, seq: int, cfg: Config) -> Expr:
    """BERT's encoder: the sequence output (batch, seq, hidden) for int64 ``input_ids``."""
    ids = op.var("input_ids", (batch, seq), "int64")
    x = _embed(b, ids, cfg, seq, "bert_")
    token_type = b.weight("bert_token_type_embeddings", "dense", (cfg.hidden,), fan_in=cfg.hidden)
    x = layer_norm(b, nn.bias_add(x, token_type, axis=-1), "bert_embeddings_ln", 1e-12)
    mask = np.zeros((seq, seq), np.float32)  # no padding: every token attends to every token
    for i in range(cfg.layers):
        x = _post_ln_layer(b, x, cfg, batch, seq, mask, f"bert_layer{i}")
    return op.reshape(x, (batch, seq, cfg.hidden))


def gpt2(b: NetBuilder, batch: int, seq: int, cfg: Config) -> Expr:
    """GPT-2's decoder stack: the last hidden state (batch, seq, hidden), causal attention."""
    ids = op.var("input_ids", (batch, seq), "int64")
    x = _embed(b, ids, cfg, seq, "gpt2_")
    causal = np.triu(np.full((seq, seq), -1e4, np.float32), k=1)
    for i in range(cfg.layers):
        x = _pre_ln_layer(b, x, cfg, batch, seq, causal, f"gpt2_h{i}")
    return op.reshape(layer_norm(b, x, "gpt2_ln_f"), (batch, seq, cfg.hidden))


def vit(b: NetBuilder, batch: int, cfg: Config) -> Expr:
    """ViT-B/16 on a 224x224 image (``data``, NHWC or NCHW as the builder's layout): the
    class logits (batch, 1000)."""
    side = VIT_IMAGE
    shape = (batch, side, side, 3) if b.layout == "NHWC" else (batch, 3, side, side)
    x = b.conv(b.data(shape), cfg.hidden, VIT_PATCH, strides=VIT_PATCH, name="vit_patch")
    x = b.bias_add(x, "vit_patch_bias")
    if b.layout == "NCHW":
        x = op.transpose(x, (0, 2, 3, 1))
    n = (side // VIT_PATCH) ** 2
    seq = n + 1
    patches = op.reshape(x, (batch, n, cfg.hidden))
    cls = b.weight("vit_cls_token", "dense", (batch, 1, cfg.hidden), fan_in=cfg.hidden)
    pos = b.weight("vit_position_embeddings", "dense", (seq, cfg.hidden), fan_in=cfg.hidden)
    x = op.add(op.concatenate([cls, patches], axis=1), pos)
    x = op.reshape(x, (batch * seq, cfg.hidden))
    for i in range(cfg.layers):
        x = _pre_ln_layer(b, x, cfg, batch, seq, None, f"vit_layer{i}")
    x = layer_norm(b, x, "vit_ln", 1e-6)
    first = op.take(op.reshape(x, (batch, seq, cfg.hidden)), op.const(0, "int64"), axis=1)
    return _dense(b, first, VIT_CLASSES, "vit_head")


def transformer(name: str, batch: int, seq_len: int | None, layout: str, dtype: str):
    """``(output, builder, input_shape)`` of zoo transformer ``name``."""
    cfg = CONFIGS[name]
    b = NetBuilder(layout, dtype)
    if name == "vit-b16":
        if seq_len is not None:
            raise ValueError("vit-b16: seq_len does not apply (224x224 images, 197 tokens)")
        out = vit(b, batch, cfg)
        side = VIT_IMAGE
        return out, b, (batch, side, side, 3) if layout == "NHWC" else (batch, 3, side, side)
    seq = DEFAULT_SEQ_LEN if seq_len is None else seq_len
    if isinstance(seq, bool) or not isinstance(seq, int | np.integer) or seq < 1:
        raise ValueError(f"{name}: seq_len must be a positive int, got {seq_len!r}")
    seq = int(seq)
    if seq > cfg.max_positions:
        raise ValueError(f"{name}: seq_len {seq} exceeds its {cfg.max_positions} positions")
    out = (bert if name.startswith("bert") else gpt2)(b, batch, seq, cfg)
    return out, b, (batch, seq)
