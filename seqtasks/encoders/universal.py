"""Universal Transformer encoder (Dehghani et al. 2019, §2.1–2.2; ../shared/seeds/
002_c600f22193c4e1d3.txt, "Universal Transformer - Additions"): the Transformer's encoder layer
(`EncoderLayer`) applied `steps` times with shared weights, a coordinate embedding over
position and step added before each (`layers/universal.py`), optionally halting per source
position by adaptive computation time (`layers/act.py`)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from seqtasks.encoders.base import Encoder
from seqtasks.encoders.transformer import EncoderLayer
from seqtasks.layers.memory import Memory
from seqtasks.layers.transformer import (
    StackNorm,
    Stream,
    init_linear_layers,
    recomputed,
)
from seqtasks.layers.universal import DepthRecurrence, UniversalSettings, token_states


class UniversalTransformerEncoder(Encoder):
    """Token embeddings, then T steps of one self-attention layer over the whole source.

    The summary c is the mean of the annotations over real positions (as the Transformer
    encoder's). With `act`, `Memory.auxiliary_loss` is each example's ponder cost τ Σ_j (N_j +
    R_j) over its real positions, which the task adds to the objective.

    Args:
        vocab_size: source vocabulary size V (given by the task, from the data).
        **settings: `UniversalSettings`', by keyword: steps, act, act_threshold, ponder_cost,
            and the layer's d_model, num_heads, ff_dim, dropout, attention_dropout, norm,
            positions, max_positions, pad_id, self_attention, activation_checkpointing
            (num_layers may only be 1)
    """

    def __init__(self, vocab_size: int, **settings: Any):
        super().__init__()
        s = UniversalSettings(**settings)
        self.embeddings = s.embeddings(vocab_size)
        self.layer = EncoderLayer(s)
        self.recurrence = DepthRecurrence(s)
        self.stack = StackNorm(s.d_model, s.norm)
        self.out_dim = s.d_model
        self.max_positions = s.max_positions
        self.ponder_cost = s.ponder_cost
        self.activation_checkpointing = s.activation_checkpointing
        init_linear_layers(self.layer)

    @property
    def embedding(self) -> torch.nn.Embedding:
        """The token table (shared with the decoder's when the vocabulary is joint)."""
        return self.embeddings.embedding

    def forward(self, inputs: Tensor, mask: Tensor) -> Memory:
        """(B, S) ids and (B, S) mask -> Memory with states (B, S, D), summary (B, D)."""
        recompute = self.activation_checkpointing and self.training and torch.is_grad_enabled()
        layer = recomputed(self.layer, recompute)

        def transition(t: int, stream: Stream, need_weights: bool) -> tuple[Stream, None]:
            return layer(stream, mask), None

        positions = self.embeddings.position_table(0, inputs.size(1))  # (S, D)
        stream = self.stack.begin(token_states(self.embeddings, inputs))
        recurred = self.recurrence(stream, positions, transition, need_attention=False)
        states = self.stack.end(recurred.stream)
        weights = mask[:, :, None].to(states.dtype)
        summary = (states * weights).sum(1) / weights.sum(1).clamp(min=1)
        ponder = None
        if recurred.ponder is not None:
            ponder = self.ponder_cost * (recurred.ponder * mask).sum(1)  # (B,)
        return Memory(states=states, mask=mask, summary=summary, auxiliary_loss=ponder)
