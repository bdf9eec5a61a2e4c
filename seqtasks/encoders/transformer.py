"""Transformer encoder (Vaswani et al. 2017, §3.1): self-attention over the whole source."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from seqtasks.encoders.base import Encoder
from seqtasks.layers.memory import Memory
from seqtasks.layers.scalar_mix import ScalarMix
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
        layer_mix: the annotations are ELMo's mix of the embeddings and every layer's output
            (`ScalarMix`; the top one as the stack ends it, after its final norm), with weights
            that are the task's own, so that a task reads all the layers of a pre-trained
            encoder (docs/pretraining.md); false: the top layer's, as the paper.
        **settings: the rest `TransformerSettings`', by keyword: d_model, num_heads, num_layers,
            ff_dim, dropout, attention_dropout, norm, positions, max_positions, pad_id,
            self_attention, activation_checkpointing
    """

    def __init__(self, vocab_size: int, layer_mix: bool = False, **settings: Any):
        super().__init__()
        s = TransformerSettings(**settings)
        self.embeddings = s.embeddings(vocab_size)
        self.layers = nn.ModuleList(EncoderLayer(s) for _ in range(s.num_layers))
        self.stack = StackNorm(s.d_model, s.norm)
        self.out_dim = s.d_model
        self.max_positions = s.max_positions
        self.activation_checkpointing = s.activation_checkpointing
        self.layer_mix = ScalarMix(s.num_layers + 1) if layer_mix else None
        init_linear_layers(self.layers)

    @property
    def embedding(self) -> nn.Embedding:
        """The token table (shared with the decoder's when the vocabulary is joint)."""
        return self.embeddings.embedding

    def forward(self, inputs: Tensor, mask: Tensor) -> Memory:
        """(B, S) ids and (B, S) mask -> Memory with states (B, S, D), summary (B, D)."""
        stream = self.stack.begin(self.embeddings(inputs))
        mixing = self.layer_mix is not None
        below = []  # each layer's input, h_0 … h_{L−1}, kept for the layer mix alone
        recompute = self.activation_checkpointing and self.training and torch.is_grad_enabled()
        for layer in self.layers:
            if mixing:
                below.append(stream[0])
            stream = recomputed(layer, recompute)(stream, mask)
        states = self.stack.end(stream)
        if mixing:
            states = self.layer_mix([*below, states])
        weights = mask[:, :, None].to(states.dtype)
        summary = (states * weights).sum(1) / weights.sum(1).clamp(min=1)
        return Memory(states=states, mask=mask, summary=summary)

    def task_specific(self, key: str) -> bool:
        """The layer mix's weights are the task's."""
        return key.startswith("layer_mix.")
