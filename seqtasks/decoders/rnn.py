"""What the recurrent decoders share: the recurrent stack, its state, initialisation, attention
over the memory and `reorder`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import torch
from torch import Tensor, nn

from seqtasks.attention.base import Attention, AttentionMemory
from seqtasks.decoders.base import Decoder
from seqtasks.layers.dropout import Dropout
from seqtasks.layers.memory import Memory
from seqtasks.layers.recurrent import Hidden, select_rows, top_layer


@dataclass
class RNNState:
    """State of a recurrent decoder during search.

    `hidden` and `feed` have a row per hypothesis (R = B·K) and move in `reorder`; `memory`,
    what the attention reads of the source, has a row per input (B) and moves only when inputs
    are dropped.
    """

    hidden: Hidden  # (layers, R, H), or (h, c) for an LSTM
    memory: AttentionMemory | None = None  # values: the annotations (Luong: W_cc h_j) or projected
    feed: Tensor | None = None  # (R, D_f) extra input carried to the next step (Luong, plain c)


@dataclass
class RNNSettings:
    """What the recurrent decoders share; a decoder takes these by keyword (YAML: its
    `init_args`) and declares again only those whose default or meaning differs.

    Attributes:
        embed_dim: width of the target embeddings E y.
        hidden_size: width of the decoder state s.
        num_layers: stacked RNN layers; attention reads the top one.
        cell: "gru" or "lstm".
        dropout: on embeddings, between layers and before the output projection.
        pad_id: padding token id.
    """

    embed_dim: int = 256
    hidden_size: int = 512
    num_layers: int = 1
    cell: Literal["gru", "lstm"] = "gru"
    dropout: float = 0.2
    pad_id: int = 0


def single_lstm(
    embed_dim: int = 512, hidden_size: int = 1024, dropout: float = 0.5, pad_id: int = 0
) -> RNNSettings:
    """The one-layer LSTM of Xu et al.'s caption decoders, with their sizes: what
    `SoftAttentionDecoder`, `HardAttentionDecoder` and `ShowTellDecoder` take by keyword (dropout
    on the deep output before L_o)."""
    return RNNSettings(embed_dim, hidden_size, 1, "lstm", dropout, pad_id)


class RNNDecoder(Decoder):
    """Base of the recurrent decoders: target embeddings, an RNN stack initialised from the
    memory summary (s_0 = tanh(W_s c), as Cho et al.; Bahdanau et al. use the backward half
    ←h_1 of c only), and `reorder`.

    Args:
        vocab_size: target vocabulary size V (given by the task, from the data).
        memory_dim: width of the annotations (the encoder's `out_dim`, given by the task).
        rnn_input_dim: width of the RNN input at each step (set by the subclass).
        s: the settings.
        init_cell: start LSTM cells at tanh(W_c c) too (Xu et al. 2015) instead of at zero.
    """

    attention: Attention  # over the memory, set by the decoders that attend (`attention_state`)

    def __init__(
        self,
        vocab_size: int,
        memory_dim: int,
        rnn_input_dim: int,
        s: RNNSettings,
        init_cell: bool = False,
    ):
        super().__init__()
        self.vocab_size = vocab_size
        self.num_layers, self.cell = s.num_layers, s.cell
        self.embedding = nn.Embedding(vocab_size, s.embed_dim, padding_idx=s.pad_id)
        self.dropout = Dropout(s.dropout)
        width = s.num_layers * s.hidden_size  # s_0 of every layer at once
        self.init_hidden = nn.Linear(memory_dim, width)
        self.init_cell = nn.Linear(memory_dim, width) if init_cell else None
        self.rnn = self.recurrent_stack(rnn_input_dim, s)

    def recurrent_stack(self, input_dim: int, s: RNNSettings) -> nn.Module:
        """The recurrent layers: one stacked `nn.GRU`/`nn.LSTM` over `input_dim`-wide inputs,
        with dropout between its layers (GNMT's decoder gives each layer a module of its own)."""
        between = s.dropout if s.num_layers > 1 else 0.0
        rnn_class = nn.GRU if s.cell == "gru" else nn.LSTM
        return rnn_class(input_dim, s.hidden_size, s.num_layers, batch_first=True, dropout=between)

    def initial_hidden(self, summary: Tensor, beam_size: int = 1) -> Hidden:
        """(B, D) summary c -> s_0 = tanh(W_s c) for every layer and each of the `beam_size`
        rows of an input (LSTM cells start at tanh(W_c c) with `init_cell`, else at zero)."""
        h0 = self._per_layer(self.init_hidden, summary, beam_size)
        if self.cell == "gru":
            return h0
        if self.init_cell is None:
            return h0, torch.zeros_like(h0)
        return h0, self._per_layer(self.init_cell, summary, beam_size)

    def _per_layer(self, linear: nn.Linear, summary: Tensor, beam_size: int) -> Tensor:
        """tanh(W c) for every layer and row: (B, D) -> (l, R, H)."""
        x = torch.tanh(linear(summary)).repeat_interleave(beam_size, 0)  # (R, l·H)
        return x.unflatten(-1, (self.num_layers, -1)).transpose(0, 1).contiguous()  # (l, R, H)

    def attention_state(
        self, memory: Memory, beam_size: int, feed: Tensor | None = None
    ) -> RNNState:
        """The first state of a decoder with an `attention`: s_0 from the memory summary for
        every row, what the attention reads of the source projected once per input."""
        return RNNState(
            hidden=self.initial_hidden(memory.summary, beam_size),
            memory=self.attention.project_memory(memory.states, memory.mask),
            feed=feed,
        )

    def attend(
        self, query: Tensor, state: RNNState, per_head: bool = False
    ) -> tuple[Tensor, Tensor]:
        """(R, H) queries, K adjacent ones per input -> context (R, D_c) and weights (R, S),
        or (R, H_a, S) per head.

        The K hypotheses of an input attend together, as K queries against its annotations,
        so the memory is never repeated per hypothesis.
        """
        # (R, 1, D_c), (R, 1, S) or (R, H_a, 1, S)
        context, weights = self.attention(query[:, None], state.memory, per_head=per_head)
        return context[:, 0], weights.select(-2, 0)

    def reorder(self, state: RNNState, index: Tensor) -> RNNState:
        rows = top_layer(state.hidden).size(0)
        feed = None if state.feed is None else state.feed.index_select(0, index)
        state = replace(state, hidden=select_rows(state.hidden, index), feed=feed)
        if state.memory is not None and index.numel() != rows:  # whole inputs were dropped
            group = rows // state.memory.mask.size(0)
            state = replace(state, memory=state.memory.select(index[::group] // group))
        return state
