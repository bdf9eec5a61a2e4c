"""The global-attention decoder of Luong, Pham & Manning (2015), "Effective Approaches to
Attention-based Neural Machine Translation"."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqtasks.attention.base import Attention
from seqtasks.attention.scores import GeneralAttention
from seqtasks.decoders.base import DecoderOutput
from seqtasks.decoders.rnn import RNNDecoder, RNNSettings, RNNState
from seqtasks.layers.memory import Memory
from seqtasks.layers.recurrent import CellStack, recur


class LuongDecoder(RNNDecoder):
    """The RNN steps first, then attends with its *current* state:

        h_i = f(h_{i−1}, [E y_{i−1}; h̃_{i−1}])          (input feeding)
        α_i = softmax(score(h_i, h̄))      c_i = Σ_j α_ij h̄_j
        h̃_i = tanh(W_c [c_i; h_i])        p(y_i | y_<i, x) = softmax(W_s h̃_i)

    Without input feeding the recurrence no longer depends on attention, so the teacher-forced
    pass runs the RNN (`recur`: one fused call) and the attention over all T positions at once.
    With it, h̃_{i−1} enters the first layer and comes from the top one, so every layer steps
    inside the loop (a `CellStack`); the output projection W_s still runs once after it. Where
    c_i is the α-weighted sum of the annotations (the score functions), the attention reads
    them projected by W_c's context half once per input, which makes each step's context H
    wide instead of D; a multi-head c_i (already H wide) enters W_c as it is.

    Args:
        vocab_size: target vocabulary size V (given by the task).
        memory_dim: width of the annotations (given by the task).
        attention: the attention over the annotations, built as `attention(hidden_size,
            memory_dim)`: a score function, or `MultiHeadAttention`.
        input_feeding: feed h̃_{i−1} into step i (Luong et al. §3.3).
        cell: "lstm" (the paper) or "gru".
        **rnn: the rest `RNNSettings`', by keyword: embed_dim, hidden_size (also the width of h̃_i),
            num_layers, dropout (also on h̃ before the output projection), pad_id
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
        context_dim = self.attention.out_dim
        self.combine = nn.Linear(context_dim + hidden_size, hidden_size, bias=False)  # W_c
        self.out = nn.Linear(hidden_size, vocab_size)  # W_s

    def start(self, memory: Memory, beam_size: int = 1) -> RNNState:
        feed = None  # h̃_0 = 0 with input feeding
        if self.input_feeding:
            feed = memory.states.new_zeros(memory.states.size(0) * beam_size, self.out.in_features)
        state = self.attention_state(memory, beam_size, feed)
        if not self.attention.values_are_annotations:
            return state
        # W_c [c_i; h_i] = W_cc c_i + W_ch h_i, and W_cc c_i = Σ_j α_ij W_cc h̄_j: the attention
        # reads the annotations projected once per input (H wide, not D), so each step's context
        # is already W_cc c_i.
        W_cc = self.combine.weight[:, : -self.combine.out_features]  # (H, D)
        values = F.linear(state.memory.values, W_cc)  # (B, S, H)
        return replace(state, memory=state.memory._replace(values=values))

    def _W_ch(self) -> Tensor:
        """W_chᵀ (H, H), the part of W_c that reads h, sliced once per pass (a slice per step
        costs a zero fill and a copy per step in the backward pass) and cast once under
        autocast (which caches the casts of parameters, not of their slices)."""
        W_ch = self.combine.weight[:, -self.combine.out_features :].t()
        device = W_ch.device.type
        if torch.is_autocast_enabled(device):
            return W_ch.to(torch.get_autocast_dtype(device))
        return W_ch

    def _attentional(self, context: Tensor, h: Tensor, W_ch: Tensor) -> Tensor:
        """The attention's context, W_cc c (…, H) as `start` arranges for a score function,
        and h (…, H) -> h̃ = tanh(W_cc c + W_ch h) (…, H), one matrix product; a multi-head c
        (…, H) -> tanh(W_c [c; h])."""
        if not self.attention.values_are_annotations:
            return torch.tanh(self.combine(torch.cat([context, h], dim=-1)))
        combined = torch.addmm(context.flatten(0, -2), h.flatten(0, -2), W_ch)
        return torch.tanh(combined).view_as(h)

    def _recur(
        self,
        embedded: Tensor,
        feed: Tensor | None,
        stack: CellStack,
        state: RNNState,
        W_ch: Tensor,
        per_head: bool = False,
    ) -> tuple[Tensor, Tensor]:
        """(R, E) embedded y_{i−1}, h̃_{i−1} (R, H) or None -> h̃_i (R, H), α_i (R, S) (or
        (R, H_a, S) per head)."""
        rnn_input = embedded if feed is None else torch.cat([embedded, feed], dim=-1)
        h = stack.step(rnn_input)  # (R, H)
        context, weights = self.attend(h, state, per_head)  # query h_i
        return self._attentional(context, h, W_ch), weights

    def step(self, prev_tokens: Tensor, state: RNNState) -> tuple[Tensor, RNNState, Tensor]:
        embedded = self.dropout(self.embedding(prev_tokens))  # (R, E)
        stack = CellStack(self.rnn, state.hidden)
        attentional, weights = self._recur(embedded, state.feed, stack, state, self._W_ch())
        feed = attentional if self.input_feeding else None
        state = replace(state, hidden=stack.hidden, feed=feed)
        return self.out(self.dropout(attentional)), state, weights

    def forward(
        self, memory: Memory, tgt_in: Tensor, need_attention: bool = False, per_head: bool = False
    ) -> DecoderOutput:
        state = self.start(memory)
        embedded = self.dropout(self.embedding(tgt_in))  # (B, T, E)
        if not self.input_feeding:  # the RNN and the attention over all T positions at once
            outputs, _ = recur(self.rnn, embedded, state.hidden)  # (B, T, H)
            context, weights = self.attention(outputs, state.memory, per_head=per_head)
            attentional = self._attentional(context, outputs, self._W_ch())  # (B, T, H)
        else:
            stack = CellStack(self.rnn, state.hidden, steps=tgt_in.size(1))
            feed, W_ch, attentionals, alphas = state.feed, self._W_ch(), [], []
            for embedded_i in embedded.unbind(1):
                feed, alpha = self._recur(embedded_i, feed, stack, state, W_ch, per_head)
                attentionals.append(feed)
                alphas.append(alpha)
            attentional, weights = torch.stack(attentionals, 1), torch.stack(alphas, -2)
        return DecoderOutput(self.out(self.dropout(attentional)), weights)  # (B, [H,] T, S)
