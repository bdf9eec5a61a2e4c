"""Multi-head attention of the Transformer (Vaswani et al. 2017, §3.2.2): self-attention over
a sequence's own positions (`SelfAttention`, with the key/value cache of incremental decoding)
and attention over a source (`MultiHeadAttention`, the attention contract of `base.py`).

Both run on `F.scaled_dot_product_attention` (fused kernels on CPU and GPU) through
`fused_attention`; attention weights are computed explicitly only where they are asked for (the
attention loss terms, plots, search, a `recording` of every attention: `recording.py`).
"""

from __future__ import annotations

import math
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqtasks.attention.base import Attention, AttentionMemory
from seqtasks.attention.recording import RecordsAttention


def fused_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
) -> Tensor:
    """`F.scaled_dot_product_attention`, kept off cuDNN's attention kernel on a GPU.

    cuDNN's kernel builds an execution plan for every new (rows, length) shape, a fraction of a
    second each; variable-length batches and decoding steps bring new shapes all the time. On
    an H100 (torch 2.11) it made a fit's first ~50 steps 6x slower and a greedy validation 8 s
    instead of 1 (docs/gpu.md, "Attention kernels"). Flash and memory-efficient attention need no
    plan. Only cuDNN is switched off, and only for this call, so the kernels a caller allows
    (`sdpa_kernel`) still hold; compiled code is left to the compiler.
    """
    cuda = q.is_cuda and not torch.compiler.is_compiling()
    off = cuda and torch.backends.cuda.cudnn_sdp_enabled()
    if off:
        torch.backends.cuda.enable_cudnn_sdp(False)
    try:
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal
        )
    finally:
        if off:
            torch.backends.cuda.enable_cudnn_sdp(True)


def split_heads(x: Tensor, heads: int) -> Tensor:
    """(B, T, D) -> (B, H, T, D/H)"""
    return x.unflatten(-1, (heads, -1)).transpose(1, 2)


def merge_heads(x: Tensor) -> Tensor:
    """(B, H, T, D/H) -> (B, T, D)"""
    return x.transpose(1, 2).flatten(2)


def attention_weights(q: Tensor, k: Tensor, mask: Tensor | None) -> Tensor:
    """softmax(q kᵀ / √d_k) with masked keys at −∞: (…, T, d), (…, S, d) -> (…, T, S)."""
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1)


def visible_keys(
    key_mask: Tensor | None, causal: bool, length: int, device: torch.device
) -> Tensor | None:
    """The keys each query sees, as the fused kernel's `attn_mask` and `is_causal` together
    hide the others: (B, 1, 1, T) padding, (T, T) j ≤ i, both, or None for all."""
    if not causal:
        return key_mask
    past = torch.ones(length, length, dtype=torch.bool, device=device).tril()
    return past if key_mask is None else key_mask & past


class SelfAttention(nn.Module, RecordsAttention):
    """Multi-head self-attention with one fused Q/K/V projection (§3.2.2), softmax-normalised:
    the Transformer's `self_attention` (YAML: `{class_path: seqtasks.attention.SelfAttention}`),
    built as `self_attention(d_model, num_heads, attention_dropout)` from its settings.

    Args:
        d_model: model width D.
        num_heads: H; D must divide by it.
        dropout: on the attention weights (training only).
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.heads = num_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.dropout = dropout

    def project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(B, T, D) -> q, k, v, each (B, H, T, D/H)."""
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return split_heads(q, self.heads), split_heads(k, self.heads), split_heads(v, self.heads)

    def forward(self, x: Tensor, key_mask: Tensor | None = None, causal: bool = False) -> Tensor:
        """(B, T, D) -> (B, T, D). `key_mask` (B, T) hides padding keys; `causal` hides the
        future, so position t sees positions ≤ t only."""
        q, k, v = self.project(x)
        mask = None if key_mask is None else key_mask[:, None, None, :]
        if self.recording:
            self.keep(attention_weights(q, k, visible_keys(mask, causal, x.size(1), x.device)))
        context = fused_attention(
            q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0,
            is_causal=causal,
        )  # fmt: skip
        return self.out(merge_heads(context))

    def empty_cache(self, rows: int, like: Tensor) -> tuple[Tensor, Tensor]:
        """Keys and values before the first position: (rows, H, 0, D/H) each."""
        empty = like.new_zeros(rows, self.heads, 0, like.size(-1) // self.heads)
        return empty, empty

    def step(
        self, x: Tensor, keys: Tensor, values: Tensor, rows: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """One new position per row attending to its cached prefix and itself.

        x (R, 1, D); keys, values (R', H, t, D/H) of the earlier positions; `rows` (R,), if
        given, the cache row each row continues (beam search's reordering, applied here in
        the same copy that extends the cache) -> the output (R, 1, D) and the caches extended
        to t+1 positions (R, H, t+1, D/H).
        """
        q, k, v = self.project(x)
        keys, values = _extend(keys, k, rows), _extend(values, v, rows)
        if self.recording:
            self.keep(attention_weights(q, keys, None))  # (R, H, 1, t+1)
        context = fused_attention(q, keys, values)
        return self.out(merge_heads(context)), keys, values

    def step_fixed(
        self, x: Tensor, keys: Tensor, values: Tensor, at: Tensor, visible: Tensor
    ) -> Tensor:
        """`step` against caches of a fixed length L, (R, H, L, D/H) each: the new position's
        key and value written in place at `at` (1,), the positions where `visible` (1, L) is true
        attended to. The same output as `step`, with shapes and addresses that stay the same
        from step to step, as a captured CUDA graph needs (`seqtasks.search.captured`)."""
        q, k, v = self.project(x)
        keys.index_copy_(2, at, k)
        values.index_copy_(2, at, v)
        context = fused_attention(q, keys, values, attn_mask=visible)
        return self.out(merge_heads(context))


def _extend(cache: Tensor, new: Tensor, rows: Tensor | None) -> Tensor:
    """cache (R', H, t, d) rows `rows` (all, in order, if None), then `new` (R, H, 1, d) ->
    (R, H, t+1, d), in one copy of the cache."""
    if rows is None:
        return torch.cat([cache, new], dim=2)
    t = cache.size(2)
    out = new.new_empty(new.size(0), new.size(1), t + 1, new.size(3))
    torch.index_select(cache, 0, rows, out=out[:, :, :t])
    out[:, :, t:] = new
    return out


class MultiHeadAttention(Attention):
    """Multi-head attention from queries to the annotations (§3.2.2; the Transformer decoder's
    cross-attention, §3.2.3), behind the attention contract, so an RNN decoder can take it too:

        head_h = softmax(Q W_h^Q (K W_h^K)ᵀ / √d) V W_h^V     MultiHead = [head_1; …; head_H] W^O

    with d = D_q / H. Keys and values are projected once per source (`project_memory`, one
    fused projection); without weights the heads run in `F.scaled_dot_product_attention` with
    a boolean key-padding mask (fused kernels on CPU and GPU), with them explicitly.

    Args:
        query_dim: width D_q of the queries, also of the model inside and of the context.
        memory_dim: width of the annotations (any encoder's `out_dim`).
        heads: H; `query_dim` must divide by it.
        dropout: on the attention weights (training only).
    """

    values_are_annotations: ClassVar[bool] = False

    def __init__(self, query_dim: int, memory_dim: int, heads: int = 4, dropout: float = 0.0):
        super().__init__(query_dim)
        if query_dim % heads:
            raise ValueError(f"the query width {query_dim} is not divisible by heads={heads}")
        self.heads = heads
        self.q = nn.Linear(query_dim, query_dim)
        self.kv = nn.Linear(memory_dim, 2 * query_dim)
        self.out = nn.Linear(query_dim, query_dim)
        self.dropout = dropout

    def project_memory(self, states: Tensor, mask: Tensor) -> AttentionMemory:
        """(B, S, D_m) annotations -> keys, values (B, H, S, d), and the mask."""
        k, v = self.kv(states).chunk(2, dim=-1)
        return AttentionMemory(split_heads(k, self.heads), split_heads(v, self.heads), mask)

    def attend_heads(
        self, query: Tensor, memory: AttentionMemory, need_weights: bool
    ) -> tuple[Tensor, Tensor | None]:
        """(B, T, D_q) queries -> the output (B, T, D_q) and, if asked, the weights per head
        (B, H, T, S)."""
        q = split_heads(self.q(query), self.heads)  # (B, H, T, d)
        key_mask = memory.mask[:, None, None, :]
        alpha = None
        if need_weights:
            alpha = attention_weights(q, memory.keys, key_mask)  # (B, H, T, S)
            if self.training and self.dropout:
                context = F.dropout(alpha, self.dropout) @ memory.values
            else:
                context = alpha @ memory.values
        else:
            context = fused_attention(
                q, memory.keys, memory.values, attn_mask=key_mask,
                dropout_p=self.dropout if self.training else 0.0,
            )  # fmt: skip
        return self.out(merge_heads(context)), alpha
