"""The soft-attention caption decoder of Xu et al. (2015), "Show, Attend and Tell: Neural Image
Caption Generation with Visual Attention", §3.1.2 and §4.2."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor, nn

from seqtasks.attention.base import Attention, context_width
from seqtasks.attention.scores import AdditiveAttention
from seqtasks.decoders.base import DecoderOutput
from seqtasks.decoders.readouts import DeepOutput
from seqtasks.decoders.rnn import RNNDecoder, RNNState, single_lstm
from seqtasks.layers.memory import Memory
from seqtasks.layers.recurrent import CellStack


class SoftAttentionDecoder(RNNDecoder):
    """An LSTM that, before each word, looks at the image grid a_1..a_L with the previous state:

        α_t = softmax_i(f_att(a_i, h_{t−1}))            additive attention (an MLP)
        β_t = σ(f_β(h_{t−1}))                            a scalar gate on the context
        ẑ_t = β_t Σ_i α_ti a_i
        h_t, c_t = LSTM([E y_{t−1}; ẑ_t], h_{t−1}, c_{t−1})
        p(y_t) ∝ exp(L_o(E y_{t−1} + L_h h_t + L_z ẑ_t))
        h_0 = tanh(f_init,h(ā)),  c_0 = tanh(f_init,c(ā)),  ā = (1/L) Σ_i a_i (the memory summary)

    The doubly stochastic penalty λ Σ_i (1 − Σ_t α_ti)² is a loss term, so the task adds it
    (`seqtasks.tasks.objective`). Only the recurrence is sequential: the deep output runs once
    over all T positions.

    Args:
        vocab_size: vocabulary size V (given by the task).
        memory_dim: width D of the annotations (given by the task).
        attention: f_att, built as `attention(hidden_size, memory_dim)`; `MultiHeadAttention`
            too, whose context is then hidden_size wide.
        **lstm: the rest `single_lstm`'s, by keyword: embed_dim, the width m of the word embeddings
            E y and of the deep output; hidden_size, the width n of the LSTM; dropout on the deep
            output before L_o; pad_id
    """

    def __init__(
        self,
        vocab_size: int,
        memory_dim: int,
        attention: Callable[[int, int], Attention] = AdditiveAttention,
        **lstm: Any,
    ):
        s = single_lstm(**lstm)
        context_dim = context_width(attention, s.hidden_size, memory_dim)
        super().__init__(vocab_size, memory_dim, s.embed_dim + context_dim, s, init_cell=True)
        embed_dim, hidden_size, dropout = s.embed_dim, s.hidden_size, s.dropout
        self.attention = attention(hidden_size, memory_dim)
        self.f_beta = nn.Linear(hidden_size, 1)
        self.readout = DeepOutput(embed_dim, hidden_size, context_dim, vocab_size, dropout)

    def start(self, memory: Memory, beam_size: int = 1) -> RNNState:
        return self.attention_state(memory, beam_size)

    def glimpse(
        self, query: Tensor, state: RNNState, per_head: bool = False
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """(R, n) h_{t−1} -> context Σ_i α_ti a_i (R, D), α_t (R, L) (or (R, H, L) per head),
        and no stochastic choice."""
        context, weights = self.attend(query, state, per_head)
        return context, weights, None

    def _recur(
        self, embedded: Tensor, stack: CellStack, state: RNNState, per_head: bool = False
    ) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        """(R, m) E y_{t−1} -> h_t (R, n), ẑ_t (R, D), α_t (R, L) (or (R, H, L) per head),
        log p(choice); `stack` steps on."""
        h_prev = stack.top  # (R, n)
        context, weights, choice_log_prob = self.glimpse(h_prev, state, per_head)
        z = torch.sigmoid(self.f_beta(h_prev)) * context  # (R, D) ẑ_t = β_t · context
        h = stack.step(torch.cat([embedded, z], dim=-1))
        return h, z, weights, choice_log_prob

    def step(self, prev_tokens: Tensor, state: RNNState) -> tuple[Tensor, RNNState, Tensor]:
        embedded = self.embedding(prev_tokens)  # (R, m)
        stack = CellStack(self.rnn, state.hidden)
        h, z, weights, _ = self._recur(embedded, stack, state)
        return self.readout(embedded, h, z), replace(state, hidden=stack.hidden), weights

    def forward(
        self, memory: Memory, tgt_in: Tensor, need_attention: bool = False, per_head: bool = False
    ) -> DecoderOutput:
        state = self.start(memory)
        embedded = self.embedding(tgt_in)  # (B, T, m)
        stack = CellStack(self.rnn, state.hidden, steps=tgt_in.size(1))
        hs, zs, alphas, choices = [], [], [], []
        for embedded_t in embedded.unbind(1):
            h, z, alpha, choice_log_prob = self._recur(embedded_t, stack, state, per_head)
            hs.append(h)
            zs.append(z)
            alphas.append(alpha)
            choices.append(choice_log_prob)
        logits = self.readout(embedded, torch.stack(hs, 1), torch.stack(zs, 1))  # (B, T, V)
        attention = torch.stack(alphas, -2)  # (B, T, L), or (B, H, T, L) per head
        if choices[0] is None:  # deterministic attention (or hard attention in eval mode)
            return DecoderOutput(logits, attention)
        # (B, T) log p(s_t), and which rows sampled (a `HardAttentionState`'s `sampling`)
        return DecoderOutput(logits, attention, torch.stack(choices, 1), state.sampling)
