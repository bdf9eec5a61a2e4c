"""Transformer encoder (Vaswani et al. 2017, §3.1): self-attention over the whole source."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from seqtasks.encoders.base import Encoder
from seqtasks.layers.memory import Memory
from seqtasks.layers.transformer import (
    FeedForward,
    Residual,
    StackNorm,
    Stream,
    TransformerSettings,
    init_linear_layers,
    recomputed,
)


class EncoderLayer(nn.Module):
    """Self-attention over the unpadded positions, then the position-wise feed-forward net."""

    def __init__(self, s: TransformerSettings):
        super().__init__()
        self.self_attention = s.self_attention_layer()
        self.feed_forward = FeedForward(s.d_model, s.ff_dim)
        self.residual_attention = Residual(s.d_model, s.norm, s.dropout)
        self.residual_ff = Residual(s.d_model, s.norm, s.dropout)

    def forward(self, stream: Stream, mask: Tensor) -> Stream:
        stream = self.residual_attention(stream, lambda h: self.self_attention(h, key_mask=mask))
        return self.residual_ff(stream, self.feed_forward)


class TransformerEncoder(Encoder):
    """Embeddings with positions and a stack of self-attention layers.

    The summary c is the mean of the annotations over real positions, so RNN decoders (which
    start from c) can be paired with this encoder.

    Args:
        vocab_size: source vocabulary size V (given by the task, from the data).
        **settings: the rest `TransformerSettings`', by keyword: d_model, num_heads, num_layers,
            ff_dim, dropout, attention_dropout, norm, positions, max_positions, pad_id,
            self_attention, activation_checkpointing
    """

    def __init__(self, vocab_size: int, **settings: Any):
        super().__init__()
        s = TransformerSettings(**settings)
        self.embeddings = s.embeddings(vocab_size)
        self.layers = nn.ModuleList(EncoderLayer(s) for _ in range(s.num_layers))
        self.stack = StackNorm(s.d_model, s.norm)
        self.out_dim = s.d_model
        self.max_positions = s.max_positions
        self.activation_checkpointing = s.activation_checkpointing
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
