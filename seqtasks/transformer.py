"""Transformer building blocks (Vaswani et al. 2017), shared by its encoder and decoder.

Multi-head attention runs on `F.scaled_dot_product_attention` (fused kernels on CPU and GPU);
attention weights are computed explicitly only where they are asked for (plots, search). The
residual connection and LayerNorm of every sub-layer come in the three placements that the
literature compares, chosen by one argument, `norm`:

- "post" (the paper):             x ← LN(x + F(x))
- "pre" (Xiong et al. 2020):      x ← x + F(LN(x));              output LN(x)
- "resi_dual" (Xie et al. 2023):  x ← LN(x + F(x)), d ← d + F(x);  output x + LN(d)
  with d starting as the input: a Post-LN stream for diverse representations and a Pre-LN-style
  sum of the raw sub-layer outputs whose gradient never vanishes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from seqtasks.dropout import Dropout

NormPlacement = Literal["post", "pre", "resi_dual"]
PositionKind = Literal["sinusoidal", "learned"]
Stream = tuple[Tensor, Tensor | None]  # (x, the ResiDual sum d or None)


def sinusoidal_table(length: int, dim: int) -> Tensor:
    """(length, dim) PE(p, 2i) = sin(p / 10000^(2i/dim)), PE(p, 2i+1) = cos(…) (§3.5)."""
    position = torch.arange(length, dtype=torch.float)[:, None]
    frequency = torch.exp(torch.arange(0, dim, 2, dtype=torch.float) * (-math.log(10000.0) / dim))
    table = torch.zeros(length, dim)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency[: dim // 2])
    return table


def grid_positions(height: int, width: int, dim: int) -> Tensor:
    """(H·W, dim) 2-D sinusoidal positions for an image grid in row-major order: the first half
    of the channels encodes the row, the second half the column (as in DETR)."""
    rows = sinusoidal_table(height, dim // 2)  # (H, dim/2)
    cols = sinusoidal_table(width, dim - dim // 2)  # (W, dim - dim/2)
    return torch.cat(
        [rows[:, None, :].expand(-1, width, -1), cols[None, :, :].expand(height, -1, -1)], dim=-1
    ).flatten(0, 1)


class Embeddings(nn.Module):
    """Token embeddings scaled by √d plus positions, then dropout (§3.4, §3.5).

    Args:
        vocab_size, d_model, pad_id: the table's shape and its padding row.
        positions: "sinusoidal" (fixed, the paper) or "learned" (one vector per position).
        max_positions: the longest sequence accepted.
        dropout: applied to the sum.
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        pad_id: int,
        positions: PositionKind,
        max_positions: int,
        dropout: float,
    ):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        nn.init.normal_(self.embedding.weight, std=d_model**-0.5)
        nn.init.zeros_(self.embedding.weight[pad_id])
        self.scale = math.sqrt(d_model)
        self.max_positions = max_positions
        if positions == "sinusoidal":
            self.register_buffer(
                "table", sinusoidal_table(max_positions, d_model), persistent=False
            )
            self.learned = None
        else:
            self.learned = nn.Embedding(max_positions, d_model)
        self.dropout = Dropout(dropout)

    def position_table(self, start: int, length: int) -> Tensor:
        """(length, D) the vectors of positions start … start+length−1."""
        if start + length > self.max_positions:
            raise ValueError(
                f"a sequence of {start + length} tokens exceeds max_positions="
                f"{self.max_positions}; raise it in the model config"
            )
        if self.learned is not None:
            return self.learned.weight[start : start + length]
        return self.table[start : start + length]

    def forward(self, tokens: Tensor, start: int = 0) -> Tensor:
        """(B, T) ids at positions start … start+T−1 -> (B, T, D)."""
        x = self.embedding(tokens) * self.scale + self.position_table(start, tokens.size(1))
        return self.dropout(x)


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


class SelfAttention(nn.Module):
    """Multi-head self-attention with one fused Q/K/V projection (§3.2.2).

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
        context = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0,
            is_causal=causal,
        )  # fmt: skip
        return self.out(merge_heads(context))

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
        context = F.scaled_dot_product_attention(q, keys, values)
        return self.out(merge_heads(context)), keys, values


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


class CrossAttention(nn.Module):
    """Multi-head attention from decoder positions to the memory (§3.2.3).

    Keys and values are projected once per input by `project_memory`; during search the K
    hypotheses of an input attend together as K queries, so the memory is never repeated.

    Args:
        d_model: model width D.
        memory_dim: width of the annotations (any encoder's `out_dim`).
        num_heads: H.
        dropout: on the attention weights (training only).
    """

    def __init__(self, d_model: int, memory_dim: int, num_heads: int, dropout: float):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.heads = num_heads
        self.q = nn.Linear(d_model, d_model)
        self.kv = nn.Linear(memory_dim, 2 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.dropout = dropout

    def project_memory(self, states: Tensor) -> tuple[Tensor, Tensor]:
        """(B, S, D_m) annotations -> keys, values (B, H, S, D/H)."""
        k, v = self.kv(states).chunk(2, dim=-1)
        return split_heads(k, self.heads), split_heads(v, self.heads)

    def forward(
        self, x: Tensor, keys: Tensor, values: Tensor, mask: Tensor, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """x (B, T, D) queries; keys/values from `project_memory`; mask (B, S).

        Returns the output (B, T, D) and, if asked, the weights averaged over heads (B, T, S).
        With B_q = K·B query rows (K hypotheses per input, adjacent), the K rows of an input
        attend to its memory together.
        """
        groups = keys.size(0)
        rows, length = x.size(0), x.size(1)
        # (K·B, T, D) -> (B, H, K·T, D/H): an input's hypotheses become extra query positions.
        q = split_heads(self.q(x).reshape(groups, -1, x.size(-1)), self.heads)
        key_mask = mask[:, None, None, :]
        if need_weights:
            alpha = attention_weights(q, keys, key_mask)  # (B, H, K·T, S)
            if self.training and self.dropout:
                context = F.dropout(alpha, self.dropout) @ values
            else:
                context = alpha @ values
            weights = alpha.mean(dim=1).reshape(rows, length, -1)
        else:
            context = F.scaled_dot_product_attention(
                q, keys, values, attn_mask=key_mask,
                dropout_p=self.dropout if self.training else 0.0,
            )  # fmt: skip
            weights = None
        return self.out(merge_heads(context).reshape(rows, length, -1)), weights


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W₁ + b₁) W₂ + b₂ (§3.3).

    As in the paper, no dropout on the inner activation: on a CPU, drawing that mask
    (4·D wide) costs more than the matrix product that produced it.
    """

    def __init__(self, d_model: int, ff_dim: int):
        super().__init__()
        self.inner = nn.Linear(d_model, ff_dim)
        self.outer = nn.Linear(ff_dim, d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.outer(torch.relu(self.inner(x)))


class Residual(nn.Module):
    """One sub-layer's residual connection, dropout and LayerNorm in the chosen placement."""

    def __init__(self, d_model: int, norm: NormPlacement, dropout: float):
        super().__init__()
        if norm not in ("post", "pre", "resi_dual"):
            raise ValueError(f"norm must be 'post', 'pre' or 'resi_dual', got {norm!r}")
        self.placement = norm
        self.norm = nn.LayerNorm(d_model)
        self.dropout = Dropout(dropout)

    def forward(self, stream: Stream, sublayer: Callable[[Tensor], Tensor]) -> Stream:
        x, dual = stream
        if self.placement == "pre":
            return x + self.dropout(sublayer(self.norm(x))), None
        y = self.dropout(sublayer(x))
        if self.placement == "post":
            return self.norm(x + y), None
        return self.norm(x + y), dual + y


class StackNorm(nn.Module):
    """Where a stack of layers starts and ends its residual stream for each placement."""

    def __init__(self, d_model: int, norm: NormPlacement):
        super().__init__()
        self.placement = norm
        self.norm = None if norm == "post" else nn.LayerNorm(d_model)

    def begin(self, x: Tensor) -> Stream:
        return x, (x if self.placement == "resi_dual" else None)

    def end(self, stream: Stream) -> Tensor:
        x, dual = stream
        if self.placement == "post":
            return x
        if self.placement == "pre":
            return self.norm(x)
        return x + self.norm(dual)


def recomputed(layer: nn.Module, enabled: bool) -> Callable[..., Any]:
    """The layer, or, if `enabled`, the layer under activation checkpointing (Chen et al. 2016):
    the backward pass recomputes its forward instead of keeping its activations, so training
    memory holds one layer's activations plus each layer's input, for about a third more
    compute. The recomputation replays the same random numbers, so dropout masks match."""
    if not enabled:
        return layer
    return lambda *args: checkpoint(layer, *args, use_reentrant=False)


def init_linear_layers(module: nn.Module) -> None:
    """Xavier-uniform weights and zero biases for every linear layer (as fairseq and T2T)."""
    for layer in module.modules():
        if isinstance(layer, nn.Linear):
            nn.init.xavier_uniform_(layer.weight)
            if layer.bias is not None:
                nn.init.zeros_(layer.bias)
