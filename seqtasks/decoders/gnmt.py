"""The decoder of GNMT, Wu et al. (2016), "Google's Neural Machine Translation System: Bridging
the Gap between Human and Machine Translation", §3 and Fig. 1 (`../shared/seeds/001…`, "Google
Neural Machine Translation (Wu et al. (2016))")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, Literal

import torch
from torch import Tensor, nn

from seqtasks.attention.base import Attention, context_width
from seqtasks.attention.scores import AdditiveAttention
from seqtasks.decoders.base import DecoderOutput
from seqtasks.decoders.rnn import RNNDecoder, RNNSettings, RNNState
from seqtasks.layers.dropout import dropout
from seqtasks.layers.memory import Memory
from seqtasks.layers.recurrent import Hidden, LayerState, layer_weights, recur


class GNMTDecoder(RNNDecoder):
    """A stack of L recurrent layers of which only the bottom one steers the attention, whose
    context then enters every layer (h^k_i: layer k's state at step i, o^k_i what it passes up):

        α_i = softmax(score(h¹_{i−1}, x))      a_i = Σ_t α_it x_t
        o¹_i = h¹_i = RNN_1(h¹_{i−1}, [E y_{i−1}; a_i])
        h^k_i = RNN_k(h^k_{i−1}, [o^{k−1}_i; a_i])                        k = 2 … L
        o^k_i = h^k_i + o^{k−1}_i  for k ≥ residual_from, else h^k_i
        p(y_i | y_<i, x) = softmax(W_o o^L_i)

    The query is the bottom layer's output at the previous step, as §3's attention equations
    have it (s_t = AttentionFunction(y_{i−1}, x_t), y_{i−1} the bottom decoder layer's output);
    the residuals are §3.1's (x^k_t = m^k_t + x^{k−1}_t), from the third layer up in the paper;
    the softmax reads the top layer; every layer starts at tanh(W_s c) (`RNNDecoder`). Fig. 1's
    reason for the design holds here too: only the bottom layer waits for the attention, so the
    teacher-forced pass steps the bottom layer and runs each layer above over all T positions in
    one fused call (`recur`); a search step is one cell step per layer.

    Dropout falls on the embeddings, on o^{k−1} where layer k reads it (the residual adds it as
    it was, as TensorFlow NMT's GNMT wraps a dropout cell in a residual one) and before W_o.

    Args:
        vocab_size: target vocabulary size V (given by the task).
        memory_dim: width of the annotations (given by the task).
        attention: the attention over the annotations, built as `attention(hidden_size,
            memory_dim)`: GNMT's is additive (a feed-forward network with one hidden layer);
            any score function or `MultiHeadAttention` fits.
        residual_from: the first layer, counting from 1 at the bottom, that adds its input
            o^{k−1} to its output (GNMT: 3; None or above num_layers: no residuals).
        cell: "lstm" (the paper's) or "gru".
        **rnn: the rest `RNNSettings`', by keyword: embed_dim, hidden_size, num_layers (L; GNMT
            has 8), dropout, pad_id.
    """

    def __init__(
        self,
        vocab_size: int,
        memory_dim: int,
        attention: Callable[[int, int], Attention] = AdditiveAttention,
        residual_from: int | None = 3,
        cell: Literal["gru", "lstm"] = "lstm",
        **rnn: Any,
    ):
        s = RNNSettings(cell=cell, **rnn)
        if s.num_layers < 1:
            raise ValueError(f"num_layers must be at least 1, got {s.num_layers}")
        if residual_from is not None and residual_from < 2:
            raise ValueError(
                f"residual_from must be at least 2 (layer 1 reads [E y; a], no layer's "
                f"output), got {residual_from}"
            )
        context_dim = context_width(attention, s.hidden_size, memory_dim)
        super().__init__(vocab_size, memory_dim, s.embed_dim + context_dim, s)
        self.attention = attention(s.hidden_size, memory_dim)
        self.residual_from, self.between = residual_from, s.dropout
        self.out = nn.Linear(s.hidden_size, vocab_size)  # W_o

    def recurrent_stack(self, input_dim: int, s: RNNSettings) -> nn.ModuleList:
        """One single-layer RNN per layer, since each reads the context beside what is below
        it: the bottom [E y_{i−1}; a_i] (`input_dim` wide), layer k ≥ 2 [o^{k−1}_i; a_i]."""
        context_dim = input_dim - s.embed_dim
        widths = [input_dim] + [s.hidden_size + context_dim] * (s.num_layers - 1)
        rnn_class = nn.GRU if s.cell == "gru" else nn.LSTM
        return nn.ModuleList(rnn_class(width, s.hidden_size, batch_first=True) for width in widths)

    def start(self, memory: Memory, beam_size: int = 1) -> RNNState:
        return self.attention_state(memory, beam_size)

    def _bottom(
        self, embedded: Tensor, bottom: LayerState, state: RNNState, per_head: bool = False
    ) -> tuple[LayerState, Tensor, Tensor]:
        """(R, E) embedded y_{i−1} and the bottom layer's state h¹_{i−1} -> its state h¹_i,
        a_i (R, C) and α_i (R, S) (or (R, H_a, S) per head)."""
        context, weights = self.attend(_output(bottom), state, per_head)  # query h¹_{i−1}
        bottom = _cell(self.rnn[0], torch.cat([embedded, context], dim=-1), bottom)
        return bottom, context, weights

    def _upper_input(self, below: Tensor, context: Tensor) -> Tensor:
        """o^{k−1} (…, H), dropped out in training, and a (…, C) -> [o^{k−1}; a] (…, H + C)."""
        return torch.cat([dropout(below, self.between, self.training), context], dim=-1)

    def _residual(self, layer: int, output: Tensor, below: Tensor) -> Tensor:
        """o^k from layer k's output h^k and its input o^{k−1} (`layer` = k − 1, from 0)."""
        if self.residual_from is not None and layer + 1 >= self.residual_from:
            return output + below
        return output

    def step(self, prev_tokens: Tensor, state: RNNState) -> tuple[Tensor, RNNState, Tensor]:
        embedded = self.dropout(self.embedding(prev_tokens))  # (R, E)
        layers = _layers(state.hidden)
        layers[0], context, weights = self._bottom(embedded, layers[0], state)
        x = _output(layers[0])  # (R, H)
        for k in range(1, self.num_layers):
            layers[k] = _cell(self.rnn[k], self._upper_input(x, context), layers[k])
            x = self._residual(k, _output(layers[k]), x)
        logits = self.out(self.dropout(x))  # (R, V)
        return logits, replace(state, hidden=_stacked(layers)), weights

    def forward(
        self, memory: Memory, tgt_in: Tensor, need_attention: bool = False, per_head: bool = False
    ) -> DecoderOutput:
        state = self.start(memory)
        embedded = self.dropout(self.embedding(tgt_in))  # (B, T, E)
        bottom, outputs, contexts, alphas = _layers(state.hidden)[0], [], [], []
        for embedded_i in embedded.unbind(1):
            bottom, context, alpha = self._bottom(embedded_i, bottom, state, per_head)
            outputs.append(_output(bottom))
            contexts.append(context)
            alphas.append(alpha)
        x, context = torch.stack(outputs, 1), torch.stack(contexts, 1)  # (B, T, H), (B, T, C)
        for k in range(1, self.num_layers):  # every position at once: the inputs are known
            h, _ = recur(self.rnn[k], self._upper_input(x, context), _layer(state.hidden, k))
            x = self._residual(k, h, x)  # (B, T, H)
        return DecoderOutput(self.out(self.dropout(x)), torch.stack(alphas, -2))  # (B, [H,] T, S)


def _cell(rnn: nn.LSTM | nn.GRU, x: Tensor, state: LayerState) -> LayerState:
    """One step of the one-layer `rnn` from `state` on (R, input) inputs, a fused cell."""
    if isinstance(state, tuple):
        return torch.lstm_cell(x, state, *layer_weights(rnn, 0))
    return torch.gru_cell(x, state, *layer_weights(rnn, 0))


def _output(state: LayerState) -> Tensor:
    """(R, H) a layer's output h (an LSTM's, not its cell c)."""
    return state[0] if isinstance(state, tuple) else state


def _layers(hidden: Hidden) -> list[LayerState]:
    """(L, R, H) (an LSTM's (h, c)) -> each layer's state."""
    if isinstance(hidden, tuple):
        return list(zip(*(h.unbind(0) for h in hidden)))
    return list(hidden.unbind(0))


def _stacked(layers: list[LayerState]) -> Hidden:
    """Each layer's state -> (L, R, H) (an LSTM's (h, c)), as search's state holds it."""
    if isinstance(layers[0], tuple):
        return tuple(torch.stack(part) for part in zip(*layers))  # type: ignore[return-value]
    return torch.stack(layers)  # type: ignore[arg-type]


def _layer(hidden: Hidden, k: int) -> Hidden:
    """Layer k's state as a one-layer RNN takes it: (1, R, H) (an LSTM's (h, c))."""
    if isinstance(hidden, tuple):
        return tuple(h[k : k + 1] for h in hidden)  # type: ignore[return-value]
    return hidden[k : k + 1]
