"""A convolutional text encoder: filters of width h slide over the word vectors, each giving
c_i = f(wᵀ x_{i:i+h−1} + b) (`../shared/seeds/003…`, "CNN for textual data"), stacked as in
ConvS2S (Gehring et al. 2017, §3.1–3.2): learned position embeddings added to the token
embeddings, each layer a convolution whose 2·C outputs are halved by a gated linear unit
v([A; B]) = A ⊗ σ(B) (Dauphin et al. 2017), with a residual connection scaled by √0.5.

The convolutions are "wide" in the deck's sense as far as the sequence's own length: each side
of a sequence is zero-padded by (h − 1)/2, so every position keeps an annotation (attention
needs one per source token) and a filter never reads past a sequence's end into the padding of
a shorter one (padded positions are zeroed before every layer). A narrow convolution, which
shortens the sequence, gives no annotation per token and is not offered.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqtasks.encoders.base import Encoder
from seqtasks.layers.dropout import Dropout
from seqtasks.layers.memory import Memory

Pooling = Literal["mean", "max"]


class ConvolutionalLayer(nn.Module):
    """One convolution of odd width h over (B, S, C) states: GLU (or f = tanh, the deck's
    single-layer CNN) of the h neighbouring positions, plus the input, scaled by √0.5, where
    `residual`."""

    def __init__(self, channels: int, width: int, glu: bool, residual: bool, dropout: float):
        super().__init__()
        if width < 1 or width % 2 == 0:
            raise ValueError(f"kernel widths must be odd and positive, got {width}")
        outputs = 2 * channels if glu else channels
        self.conv = nn.Conv1d(channels, outputs, width, padding=width // 2)
        self.glu, self.residual = glu, residual
        self.dropout = Dropout(dropout)
        # Gehring et al. §3.5: weights with variance 4·(1 − p)/(h·C) keep the variance of a
        # GLU's input across layers (a GLU halves it, dropout scales it by 1 − p).
        gain = (4 if glu else 1) * (1 - dropout)
        nn.init.normal_(self.conv.weight, std=math.sqrt(gain / (width * channels)))
        nn.init.zeros_(self.conv.bias)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        """(B, S, C) states, zero on padding, and their (B, S) mask -> (B, S, C), zero on
        padding again: the next filter reads zeros past a sequence's end."""
        h = self.dropout(x)
        h = self.conv(h.transpose(1, 2)).transpose(1, 2)  # (B, S, 2C) or (B, S, C)
        h = F.glu(h, dim=-1) if self.glu else torch.tanh(h)  # A ⊗ σ(B) or tanh
        if self.residual:
            h = (h + x) * math.sqrt(0.5)
        return h * mask[:, :, None]


class ConvS2SEncoder(Encoder):
    """Token and position embeddings, a linear map to C channels, a stack of convolutions
    (`ConvolutionalLayer`), and a linear map to `out_dim`.

    The annotations z_j are the top layer's outputs; the summary c pools them over the real
    positions ("mean", or "max": the deck's max-over-time pooling), so that decoders that start
    from c (the RNN decoders, no attention) pair with it. ConvS2S's decoder also attends over
    z_j + e_j (the input embeddings); seqtasks' attention reads one set of annotations, z_j.

    Args:
        vocab_size: source vocabulary size V (given by the task, from the data).
        embed_dim: width E of the token and position embeddings.
        hidden_size: the convolutions' width C (their channels).
        kernel_widths: one odd filter width h per layer (ConvS2S's WMT'14 En-De: 20 layers of
            width 3; the deck's one-layer CNN: [3] with glu and residual false).
        out_dim: the annotations' width D (default: E, as ConvS2S maps back to E).
        glu: gated linear units (else f = tanh).
        residual: residual connections scaled by √0.5.
        pooling: how the summary pools the annotations.
        dropout: on the embeddings and before every convolution.
        max_positions: the longest source read (the position table's size).
        pad_id: the padding token, whose embedding stays zero.
    """

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int = 256,
        hidden_size: int = 256,
        kernel_widths: list[int] | tuple[int, ...] = (3, 3, 3, 3),
        out_dim: int | None = None,
        glu: bool = True,
        residual: bool = True,
        pooling: Pooling = "mean",
        dropout: float = 0.1,
        max_positions: int = 1024,
        pad_id: int = 0,
    ):
        super().__init__()
        if not kernel_widths:
            raise ValueError("kernel_widths must name at least one layer")
        if pooling not in ("mean", "max"):
            raise ValueError(f"pooling must be 'mean' or 'max', got {pooling!r}")
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=pad_id)
        self.positions = nn.Embedding(max_positions, embed_dim)
        self.dropout = Dropout(dropout)
        self.into = nn.Linear(embed_dim, hidden_size)
        self.layers = nn.ModuleList(
            ConvolutionalLayer(hidden_size, width, glu, residual, dropout)
            for width in kernel_widths
        )
        self.out_dim = embed_dim if out_dim is None else out_dim
        self.out = nn.Linear(hidden_size, self.out_dim)
        self.pooling = pooling
        self.max_positions = max_positions
        for embedding in (self.embedding, self.positions):
            nn.init.normal_(embedding.weight, std=0.1)  # Gehring et al. §3.5
        nn.init.zeros_(self.embedding.weight[pad_id])

    def forward(self, inputs: Tensor, mask: Tensor) -> Memory:
        """(B, S) ids and (B, S) mask -> Memory with states (B, S, D), summary (B, D)."""
        positions = torch.arange(inputs.size(1), device=inputs.device)
        e = self.dropout(self.embedding(inputs) + self.positions(positions)[None])  # (B, S, E)
        x = self.into(e) * mask[:, :, None]  # (B, S, C)
        for layer in self.layers:
            x = layer(x, mask)
        states = self.out(x) * mask[:, :, None]  # (B, S, D)
        if self.pooling == "max":
            summary = states.masked_fill(~mask[:, :, None], float("-inf")).amax(1)
            summary = summary.masked_fill(~mask.any(1, keepdim=True), 0.0)  # an empty source
        else:
            weights = mask[:, :, None].to(states.dtype)
            summary = (states * weights).sum(1) / weights.sum(1).clamp(min=1)
        return Memory(states=states, mask=mask, summary=summary)
