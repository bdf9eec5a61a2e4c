"""The encoder–decoder without attention (Cho et al. 2014; Sutskever et al. 2014)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch
from torch import Tensor

from seqtasks.decoders.base import DecoderOutput
from seqtasks.decoders.readouts import MaxoutReadout
from seqtasks.decoders.rnn import RNNDecoder, RNNSettings, RNNState
from seqtasks.layers.memory import Memory
from seqtasks.layers.recurrent import recur, rnn_step


class NoAttentionDecoder(RNNDecoder):
    """Everything the decoder knows of the source is one fixed vector c (the memory summary):

        s_0 = tanh(W_s c)      s_i = f(s_{i−1}, [E y_{i−1}; c])
        p(y_i | y_<i, c) ∝ exp(W_o maxout(U_o s_i + V_o E y_{i−1} + C_o c))

    This is the bottleneck that attention removes; it is here to be measured against. Its
    teacher-forced pass is a single call of the fused RNN over all T positions.

    Args: as `BahdanauDecoder`'s, without `attention`.
    """

    gives_attention = False

    def __init__(self, vocab_size: int, memory_dim: int, readout_dim: int = 256, **rnn: Any):
        s = RNNSettings(**rnn)
        super().__init__(vocab_size, memory_dim, s.embed_dim + memory_dim, s)
        features = s.hidden_size + s.embed_dim + memory_dim  # [s_i; E y_{i−1}; c]
        self.readout = MaxoutReadout(features, readout_dim, vocab_size, s.dropout)

    def start(self, memory: Memory, beam_size: int = 1) -> RNNState:
        return RNNState(
            hidden=self.initial_hidden(memory.summary, beam_size),
            feed=memory.summary.repeat_interleave(beam_size, 0),  # (R, D) the vector c
        )

    def step(self, prev_tokens: Tensor, state: RNNState) -> tuple[Tensor, RNNState, None]:
        embedded = self.dropout(self.embedding(prev_tokens))  # (B, E)
        features = torch.cat([embedded, state.feed], dim=-1)  # (B, E + D)
        h, hidden = rnn_step(self.rnn, features, state.hidden)  # (B, H)
        logits = self.readout(torch.cat([h, features], dim=-1))  # (B, V)
        return logits, replace(state, hidden=hidden), None

    def forward(
        self, memory: Memory, tgt_in: Tensor, need_attention: bool = False, per_head: bool = False
    ) -> DecoderOutput:
        state = self.start(memory)
        embedded = self.dropout(self.embedding(tgt_in))  # (B, T, E)
        c = memory.summary[:, None, :].expand(-1, tgt_in.size(1), -1)  # (B, T, D)
        features = torch.cat([embedded, c], dim=-1)  # (B, T, E + D)
        outputs, _ = recur(self.rnn, features, state.hidden)  # (B, T, H)
        return DecoderOutput(self.readout(torch.cat([outputs, features], dim=-1)), None)
