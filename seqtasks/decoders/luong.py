"""The global-attention decoder of Luong, Pham & Manning (2015), "Effective Approaches to
Attention-based Neural Machine Translation"."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, Literal

import torch
from torch import Tensor, nn

from seqtasks.attention.scores import Attention, GeneralAttention
from seqtasks.decoders.base import DecoderOutput, single_head
from seqtasks.decoders.rnn import RNNDecoder, RNNSettings, RNNState
from seqtasks.layers.memory import Memory
from seqtasks.layers.recurrent import recur, rnn_step


class LuongDecoder(RNNDecoder):
    """The RNN steps first, then attends with its *current* state:

        h_i = f(h_{i−1}, [E y_{i−1}; h̃_{i−1}])          (input feeding)
        α_i = softmax(score(h_i, h̄))      c_i = Σ_j α_ij h̄_j
        h̃_i = tanh(W_c [c_i; h_i])        p(y_i | y_<i, x) = softmax(W_s h̃_i)

    Without input feeding the recurrence no longer depends on attention, so the teacher-forced
    pass runs the RNN and the attention over all T positions at once.

    Args:
        vocab_size: target vocabulary size V (given by the task).
        memory_dim: width of the annotations (given by the task).
        attention: the score function, built as `attention(hidden_size, memory_dim)`.
        input_feeding: feed h̃_{i−1} into step i (Luong et al. §3.3).
        cell: "lstm" (the paper) or "gru".
        (the rest `RNNSettings`', by keyword: embed_dim, hidden_size (also the width of h̃_i),
        num_layers, dropout (also on h̃ before the output projection), pad_id)
    """

    def __init__(
        self,
        vocab_size: int,
        memory_dim: int,
        attention: Callable[[int, int], Attention] = GeneralAttention,
        input_feeding: bool = True,
        cell: Literal["gru", "lstm"] = "lstm",
        **rnn: Any,
    ):
        s = RNNSettings(cell=cell, **rnn)
        rnn_input_dim = s.embed_dim + (s.hidden_size if input_feeding else 0)
        super().__init__(vocab_size, memory_dim, rnn_input_dim, s)
        hidden_size = s.hidden_size
        self.input_feeding = input_feeding
        self.attention = attention(hidden_size, memory_dim)
        self.combine = nn.Linear(memory_dim + hidden_size, hidden_size, bias=False)  # W_c
        self.out = nn.Linear(hidden_size, vocab_size)  # W_s

    def start(self, memory: Memory, beam_size: int = 1) -> RNNState:
        feed = None  # h̃_0 = 0 with input feeding
        if self.input_feeding:
            feed = memory.states.new_zeros(memory.states.size(0) * beam_size, self.out.in_features)
        return self.attention_state(memory, beam_size, feed)

    def _attentional(self, context: Tensor, h: Tensor) -> Tensor:
        """h̃ = tanh(W_c [c; h]), over any leading dimensions."""
        return torch.tanh(self.combine(torch.cat([context, h], dim=-1)))

    def _recur(self, embedded: Tensor, state: RNNState) -> tuple[RNNState, Tensor, Tensor]:
        """(R, E) embedded y_{i−1} -> new state, h̃_i (R, H), α_i (R, S)."""
        rnn_input = embedded if state.feed is None else torch.cat([embedded, state.feed], dim=-1)
        h, hidden = rnn_step(self.rnn, rnn_input, state.hidden)  # (R, H)
        context, weights = self.attend(h, state)  # query h_i
        attentional = self._attentional(context, h)  # (R, H)
        feed = attentional if self.input_feeding else None
        return replace(state, hidden=hidden, feed=feed), attentional, weights

    def step(self, prev_tokens: Tensor, state: RNNState) -> tuple[Tensor, RNNState, Tensor]:
        embedded = self.dropout(self.embedding(prev_tokens))  # (B, E)
        state, attentional, weights = self._recur(embedded, state)
        return self.out(self.dropout(attentional)), state, weights

    def forward(
        self, memory: Memory, tgt_in: Tensor, need_attention: bool = False, per_head: bool = False
    ) -> DecoderOutput:
        state = self.start(memory)
        embedded = self.dropout(self.embedding(tgt_in))  # (B, T, E)
        if not self.input_feeding:
            outputs, _ = recur(self.rnn, embedded, state.hidden)  # (B, T, H)
            context, weights = self.attention(outputs, state.keys, state.values, state.mask)
            attentional = self._attentional(context, outputs)  # (B, T, H)
        else:
            attentionals, alphas = [], []
            for i in range(tgt_in.size(1)):
                state, h_tilde, alpha = self._recur(embedded[:, i], state)
                attentionals.append(h_tilde)
                alphas.append(alpha)
            attentional, weights = torch.stack(attentionals, 1), torch.stack(alphas, 1)
        return DecoderOutput(self.out(self.dropout(attentional)), single_head(weights, per_head))
