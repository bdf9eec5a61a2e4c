"""Transformer encoder (Vaswani et al. 2017, §3.1): self-attention over the whole source."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from seqtasks.attention.multihead import SelfAttention
from seqtasks.encoders.base import Encoder
from seqtasks.layers.memory import Memory
from seqtasks.layers.transformer import (
    Embeddings,
    FeedForward,
    NormPlacement,
    PositionKind,
    Residual,
    StackNorm,
    Stream,
    init_linear_layers,
    recomputed,
)


class EncoderLayer(nn.Module):
    """Self-attention over the unpadded positions, then the position-wise feed-forward net."""

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        ff_dim: int,
        dropout: float,
        attention_dropout: float,
        norm: NormPlacement,
    ):
        super().__init__()
        self.self_attention = SelfAttention(d_model, num_heads, attention_dropout)
        self.feed_forward = FeedForward(d_model, ff_dim)
        self.residual_attention = Residual(d_model, norm, dropout)
        self.residual_ff = Residual(d_model, norm, dropout)

    def forward(self, stream: Stream, mask: Tensor) -> Stream:
        stream = self.residual_attention(stream, lambda h: self.self_attention(h, key_mask=mask))
        return self.residual_ff(stream, self.feed_forward)


class TransformerEncoder(Encoder):
    """Embeddings with positions and a stack of self-attention layers.

    The summary c is the mean of the annotations over real positions, so RNN decoders (which
    start from c) can be paired with this encoder.

    Args:
        vocab_size: source vocabulary size V (given by the task, from the data).
        d_model: model width D (`out_dim`).
        num_heads: attention heads H.
        num_layers: stacked layers N.
        ff_dim: inner width of the feed-forward nets.
        dropout: on the embeddings and on every sub-layer's output (§5.4).
        attention_dropout: on the attention weights.
        norm: "post" (the paper), "pre" or "resi_dual"; see `seqtasks.transformer`.
        positions: "sinusoidal" or "learned".
        max_positions: the longest source accepted.
        pad_id: the padding token.
        activation_checkpointing: in training, recompute each layer in the backward pass
            instead of storing its activations (`seqtasks.layers.transformer.recomputed`).
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int = 256,
        num_heads: int = 4,
        num_layers: int = 3,
        ff_dim: int = 1024,
        dropout: float = 0.1,
        attention_dropout: float = 0.0,
        norm: NormPlacement = "post",
        positions: PositionKind = "sinusoidal",
        max_positions: int = 1024,
        pad_id: int = 0,
        activation_checkpointing: bool = False,
    ):
        super().__init__()
        self.embeddings = Embeddings(vocab_size, d_model, pad_id, positions, max_positions, dropout)
        self.layers = nn.ModuleList(
            EncoderLayer(d_model, num_heads, ff_dim, dropout, attention_dropout, norm)
            for _ in range(num_layers)
        )
        self.stack = StackNorm(d_model, norm)
        self.out_dim = d_model
        self.activation_checkpointing = activation_checkpointing
        init_linear_layers(self.layers)

    @property
    def embedding(self) -> nn.Embedding:
        """The token table (shared with the decoder's when the vocabulary is joint)."""
        return self.embeddings.embedding

    def forward(self, inputs: Tensor, mask: Tensor) -> Memory:
        """(B, S) ids and (B, S) mask -> Memory with states (B, S, D), summary (B, D)."""
        stream = self.stack.begin(self.embeddings(inputs))
        recompute = self.activation_checkpointing and self.training and torch.is_grad_enabled()
        for layer in self.layers:
            stream = recomputed(layer, recompute)(stream, mask)
        states = self.stack.end(stream)
        weights = mask[:, :, None].to(states.dtype)
        summary = (states * weights).sum(1) / weights.sum(1).clamp(min=1)
        return Memory(states=states, mask=mask, summary=summary)
