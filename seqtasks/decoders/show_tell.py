"""The no-attention caption decoder, after Vinyals et al. (2015), "Show and Tell"."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from torch import Tensor

from seqtasks.decoders.base import DecoderOutput
from seqtasks.decoders.readouts import DeepOutput
from seqtasks.decoders.rnn import RNNDecoder, RNNState, single_lstm
from seqtasks.layers.memory import Memory
from seqtasks.layers.recurrent import recur, rnn_step


class ShowTellDecoder(RNNDecoder):
    """The control for `SoftAttentionDecoder`: the image enters once, as the pooled vector ā
    (the memory summary) that sets the LSTM's initial state, and is never looked at again:

        h_0 = tanh(f_init,h(ā)),  c_0 = tanh(f_init,c(ā))
        h_t, c_t = LSTM(E y_{t−1}, h_{t−1}, c_{t−1})
        p(y_t) ∝ exp(L_o(E y_{t−1} + L_h h_t))

    Show and Tell feeds the image as the LSTM's input at t = −1; here it sets h_0 and c_0
    through the same layers as the attention decoders, so the two differ by attention alone.
    The teacher-forced pass is one call of the fused LSTM over all T positions.

    Args: `single_lstm`'s, by keyword, as `SoftAttentionDecoder`'s without `attention`.
    """

    gives_attention = False

    def __init__(self, vocab_size: int, memory_dim: int, **lstm: Any):
        s = single_lstm(**lstm)
        super().__init__(vocab_size, memory_dim, s.embed_dim, s, init_cell=True)
        embed_dim, hidden_size, dropout = s.embed_dim, s.hidden_size, s.dropout
        self.readout = DeepOutput(embed_dim, hidden_size, 0, vocab_size, dropout)

    def start(self, memory: Memory, beam_size: int = 1) -> RNNState:
        return RNNState(hidden=self.initial_hidden(memory.summary, beam_size))

    def step(self, prev_tokens: Tensor, state: RNNState) -> tuple[Tensor, RNNState, None]:
        embedded = self.embedding(prev_tokens)  # (R, m)
        h, hidden = rnn_step(self.rnn, embedded, state.hidden)  # (R, n)
        return self.readout(embedded, h), replace(state, hidden=hidden), None

    def forward(
        self, memory: Memory, tgt_in: Tensor, need_attention: bool = False, per_head: bool = False
    ) -> DecoderOutput:
        embedded = self.embedding(tgt_in)  # (B, T, m)
        outputs, _ = recur(self.rnn, embedded, self.initial_hidden(memory.summary))  # (B, T, n)
        return DecoderOutput(self.readout(embedded, outputs), None)
