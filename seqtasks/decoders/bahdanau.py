"""The attention decoder of Bahdanau, Cho & Bengio (2015), "Neural Machine Translation by
Jointly Learning to Align and Translate"."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor

from seqtasks.attention.base import Attention, context_width
from seqtasks.attention.scores import AdditiveAttention
from seqtasks.decoders.base import DecoderOutput
from seqtasks.decoders.readouts import MaxoutReadout
from seqtasks.decoders.rnn import RNNDecoder, RNNSettings, RNNState
from seqtasks.layers.memory import Memory
from seqtasks.layers.recurrent import CellStack


class BahdanauDecoder(RNNDecoder):
    """One step i attends with the *previous* state, then updates the RNN:

        α_i = softmax(score(s_{i−1}, h))     c_i = Σ_j α_ij h_j
        s_i = f(s_{i−1}, [E y_{i−1}; c_i])
        p(y_i | y_<i, x) ∝ exp(W_o maxout(U_o s_i + V_o E y_{i−1} + C_o c_i))

    The output reads the new state s_i, as eq. (4) g(y_{i−1}, s_i, c_i) and later toolkits
    (dl4mt, Nematus) do; the paper's App. A.2.2 and its original code read s_{i−1}. Only the
    recurrence is sequential: in the teacher-forced pass the deep output and the
    vocabulary projection run once over all T positions.

    Args:
        vocab_size: target vocabulary size V (given by the task).
        memory_dim: width of the annotations (given by the task).
        attention: the attention over the annotations, built as `attention(hidden_size,
            memory_dim)`: a score function, or `MultiHeadAttention` (its context c_i is then
            hidden_size wide, the heads' output).
        readout_dim: width of the maxout deep-output layer t (l in the paper).
        **rnn: the rest `RNNSettings`', by keyword: embed_dim, hidden_size, num_layers, cell ("gru",
            the paper's, by default), dropout, pad_id
    """

    def __init__(
        self,
        vocab_size: int,
        memory_dim: int,
        attention: Callable[[int, int], Attention] = AdditiveAttention,
        readout_dim: int = 256,
        **rnn: Any,
    ):
        s = RNNSettings(**rnn)
        context_dim = context_width(attention, s.hidden_size, memory_dim)
        super().__init__(vocab_size, memory_dim, s.embed_dim + context_dim, s)
        self.attention = attention(s.hidden_size, memory_dim)
        features = s.hidden_size + s.embed_dim + context_dim  # [s_i; E y_{i−1}; c_i]
        self.readout = MaxoutReadout(features, readout_dim, vocab_size, s.dropout)

    def start(self, memory: Memory, beam_size: int = 1) -> RNNState:
        return self.attention_state(memory, beam_size)

    def _recur(
        self, embedded: Tensor, stack: CellStack, state: RNNState, per_head: bool = False
    ) -> tuple[Tensor, Tensor, Tensor]:
        """(R, E) embedded y_{i−1} -> s_i (R, H), c_i (R, D), α_i (R, S) (or (R, H_a, S) per
        head); `stack` steps on."""
        context, weights = self.attend(stack.top, state, per_head)  # query s_{i−1}
        s = stack.step(torch.cat([embedded, context], dim=-1))  # (R, H)
        return s, context, weights

    def step(self, prev_tokens: Tensor, state: RNNState) -> tuple[Tensor, RNNState, Tensor]:
        embedded = self.dropout(self.embedding(prev_tokens))  # (R, E)
        stack = CellStack(self.rnn, state.hidden)
        s, context, weights = self._recur(embedded, stack, state)
        logits = self.readout(torch.cat([s, embedded, context], dim=-1))  # (R, V)
        return logits, replace(state, hidden=stack.hidden), weights

    def forward(
        self, memory: Memory, tgt_in: Tensor, need_attention: bool = False, per_head: bool = False
    ) -> DecoderOutput:
        state = self.start(memory)
        embedded = self.dropout(self.embedding(tgt_in))  # (B, T, E)
        stack = CellStack(self.rnn, state.hidden, steps=tgt_in.size(1))
        states, contexts, weights = [], [], []
        for embedded_i in embedded.unbind(1):
            s, context, alpha = self._recur(embedded_i, stack, state, per_head)
            states.append(s)
            contexts.append(context)
            weights.append(alpha)
        features = torch.cat(
            [torch.stack(states, 1), embedded, torch.stack(contexts, 1)], dim=-1
        )  # (B, T, H + E + D)
        return DecoderOutput(self.readout(features), torch.stack(weights, -2))  # (B, [H,] T, S)
