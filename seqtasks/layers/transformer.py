"""Transformer building blocks (Vaswani et al. 2017) other than attention, shared by its
encoder and decoder: token and position embeddings, the feed-forward net, and the residual
connection with LayerNorm in the three placements that the literature compares, chosen by one
argument, `norm`:

- "post" (the paper):             x ← LN(x + F(x))
- "pre" (Xiong et al. 2020):      x ← x + F(LN(x));              output LN(x)
- "resi_dual" (Xie et al. 2023):  x ← LN(x + F(x)), d ← d + F(x);  output x + LN(d)
  with d starting as the input: a Post-LN stream for diverse representations and a Pre-LN-style
  sum of the raw sub-layer outputs whose gradient never vanishes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from seqtasks.attention.linear import named_self_attention
from seqtasks.attention.multihead import SelfAttention
from seqtasks.layers.dropout import Dropout

NormPlacement = Literal["post", "pre", "resi_dual"]


PositionKind = Literal["sinusoidal", "learned", "none"]
SelfAttentionKind = Literal["softmax", "linear"]  # the older string form of `self_attention`
SelfAttentionFactory = Callable[[int, int, float], SelfAttention]  # (d_model, heads, dropout)


Stream = tuple[Tensor, Tensor | None]  # (x, the ResiDual sum d or None)


@dataclass
class TransformerSettings:
    """What a Transformer encoder and decoder share; both take these by keyword (YAML: their
    `init_args`), written once here.

    Attributes:
        d_model: model width D (the encoder's `out_dim`).
        num_heads: attention heads H; D must divide by it.
        num_layers: stacked layers N.
        ff_dim: inner width of the feed-forward nets.
        dropout: on the embeddings and on every sub-layer's output (§5.4).
        attention_dropout: on the attention weights.
        norm: "post" (the paper), "pre" or "resi_dual" (above).
        positions: "sinusoidal", "learned" or "none" (no absolute positions: for a relative
            self-attention, `attention/relative.py`, that sees distances instead).
        max_positions: the longest sequence accepted.
        pad_id: the padding token.
        self_attention: every layer's self-attention, built as `self_attention(d_model,
            num_heads, attention_dropout)`: `SelfAttention` (softmax, the paper) or
            `LinearSelfAttention` (Katharopoulos et al. 2020, `attention/linear.py`: φ(q)·φ(k)
            with φ = elu + 1; incremental decoding carries a fixed-size running memory instead
            of a growing key/value cache). YAML: `{class_path:
            seqtasks.attention.LinearSelfAttention}`; the older "softmax" and "linear" are read
            as these two (`self_attention_layer`).
        activation_checkpointing: in teacher-forced training, recompute each layer in the
            backward pass instead of storing its activations (`recomputed`); search never does.
        vocab_multiple: the token table (with tied embeddings also the output projection) gets
            rows up to a multiple of this, so the output product has a size that suits a GPU's
            matrix units (64); the extra rows are zero, never looked up, and cut from the logits.
            1: none (as every checkpoint before this setting holds).
    """

    d_model: int = 256
    num_heads: int = 4
    num_layers: int = 3
    ff_dim: int = 1024
    dropout: float = 0.1
    attention_dropout: float = 0.0
    norm: NormPlacement = "post"
    positions: PositionKind = "sinusoidal"
    max_positions: int = 1024
    pad_id: int = 0
    self_attention: SelfAttentionKind | SelfAttentionFactory = SelfAttention
    activation_checkpointing: bool = False
    vocab_multiple: int = 1

    def self_attention_layer(self) -> SelfAttention:
        """One layer's self-attention, of the chosen class, with these sizes."""
        factory = self.self_attention
        if isinstance(factory, str):
            factory = named_self_attention(factory)
        return factory(self.d_model, self.num_heads, self.attention_dropout)

    def embeddings(self, vocab_size: int) -> Embeddings:
        return Embeddings(
            vocab_size,
            self.d_model,
            self.pad_id,
            self.positions,
            self.max_positions,
            self.dropout,
            self.vocab_multiple,
        )


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
        positions: "sinusoidal" (fixed, the paper), "learned" (one vector per position) or
            "none" (a table of zeros, added where the others are: no absolute positions).
        max_positions: the longest sequence accepted.
        dropout: applied to the sum.
        vocab_multiple: the table's rows, V, rounded up to a multiple of this; the rows past V
            start at zero (`vocab_size` stays V).
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        pad_id: int,
        positions: PositionKind,
        max_positions: int,
        dropout: float,
        vocab_multiple: int = 1,
    ):
        super().__init__()
        if vocab_multiple < 1:
            raise ValueError(f"vocab_multiple must be at least 1, got {vocab_multiple}")
        self.vocab_size = vocab_size
        rows = -(-vocab_size // vocab_multiple) * vocab_multiple
        self.embedding = nn.Embedding(rows, d_model, padding_idx=pad_id)
        nn.init.normal_(self.embedding.weight, std=d_model**-0.5)
        nn.init.zeros_(self.embedding.weight[pad_id])
        nn.init.zeros_(self.embedding.weight[vocab_size:])
        self.scale = math.sqrt(d_model)
        self.max_positions = max_positions
        if positions not in ("sinusoidal", "learned", "none"):
            raise ValueError(
                f"positions must be 'sinusoidal', 'learned' or 'none', got {positions!r}"
            )
        if positions == "sinusoidal":
            self.register_buffer(
                "table", sinusoidal_table(max_positions, d_model), persistent=False
            )
            self.learned = None
        elif positions == "none":
            self.register_buffer("table", torch.zeros(max_positions, d_model), persistent=False)
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

    def at(self, tokens: Tensor, position: Tensor) -> Tensor:
        """(R, 1) ids, all at the one position held on the device in `position` (1,) -> (R, 1,
        D): `forward` in a form a captured CUDA graph replays, reading the position where it
        lies (the caller keeps it under `max_positions`)."""
        table = self.table if self.learned is None else self.learned.weight
        return self.dropout(self.embedding(tokens) * self.scale + table.index_select(0, position))


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
