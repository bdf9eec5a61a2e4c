"""A single RNN as encoder–decoder (`../shared/seeds/004…`, "A single RNN as encoder-decoder"):
one unidirectional recurrent language model reads the source as a prompt, then writes the
target, and "the hidden state at <s> encodes the text".

    h_j = f(h_{j−1}, P m_j)           j = 1 … S, the prompt (P maps the memory to E)
    s_0 = h_S,   s_i = f(s_{i−1}, E y_{i−1}),   p(y_i | y_<i, x) = softmax(W_o s_i + b_o)

with y_0 = <s> as the deck's separator. The same weights f read the source and write the target;
the loss falls on the target alone (the task scores the decoder's logits, which are the target's
only). This is the deck's question "what would be the problems?" made measurable: everything the
target learns of the source passes through s_0, as in the encoder–decoder without attention, but
with one set of weights doing both jobs (docs/architectures.md compares them).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence

from seqtasks.decoders.base import Decoder, DecoderOutput
from seqtasks.decoders.rnn import RNNSettings, RNNState
from seqtasks.layers.dropout import Dropout
from seqtasks.layers.memory import Memory
from seqtasks.layers.recurrent import Hidden, recur, rnn_step, select_rows


class PromptedRNNDecoder(Decoder):
    """A decoder-only recurrent model over any memory taken as its prompt: a text encoder's
    states (`PromptEncoder`'s token vectors make it the deck's single RNN) or an image grid's
    cells, read in order.

    Teacher forcing reads the prompt with the fused RNN over each row's real positions (packed,
    so a shorter source never reads padding) and the target in one more call; search reads the
    prompt once in `start` and then takes one step of the same RNN per output token.

    Args:
        vocab_size: target vocabulary size V (given by the task).
        memory_dim: width of the prompt's vectors (the encoder's `out_dim`, given by the task).
        **rnn: `RNNSettings`: embed_dim, hidden_size, num_layers, cell, dropout, pad_id.
    """

    gives_attention = False

    def __init__(self, vocab_size: int, memory_dim: int, **rnn: Any):
        super().__init__()
        s = RNNSettings(**rnn)
        self.vocab_size = vocab_size
        self.embedding = nn.Embedding(vocab_size, s.embed_dim, padding_idx=s.pad_id)
        self.prompt = nn.Linear(memory_dim, s.embed_dim)  # P
        self.dropout = Dropout(s.dropout)
        between = s.dropout if s.num_layers > 1 else 0.0
        rnn_class = nn.GRU if s.cell == "gru" else nn.LSTM
        self.rnn = rnn_class(
            s.embed_dim, s.hidden_size, s.num_layers, batch_first=True, dropout=between
        )
        self.output = nn.Linear(s.hidden_size, vocab_size)  # W_o, b_o

    def read_prompt(self, memory: Memory) -> Hidden:
        """h_S of every layer, (l, B, H) (an LSTM's (h, c)): the RNN run over each row's real
        prompt positions from zero; zero for an empty prompt."""
        x = self.dropout(self.prompt(memory.states))  # (B, S, E)
        lengths = memory.lengths
        packed = pack_padded_sequence(
            x, lengths.clamp(min=1).cpu(), batch_first=True, enforce_sorted=False
        )
        if x.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
            # Autocast's CPU LSTM fails on CPUs without AVX-512 (`recur`): read in float32.
            with torch.autocast("cpu", enabled=False):
                _, hidden = self.rnn(packed._replace(data=packed.data.float()))
        else:
            _, hidden = self.rnn(packed)
        empty = (lengths == 0)[None, :, None]  # (1, B, 1)
        if isinstance(hidden, tuple):
            return tuple(h.masked_fill(empty, 0.0) for h in hidden)  # type: ignore[return-value]
        return hidden.masked_fill(empty, 0.0)

    def start(self, memory: Memory, beam_size: int = 1) -> RNNState:
        hidden = self.read_prompt(memory)
        rows = torch.arange(memory.states.size(0), device=memory.states.device)
        return RNNState(hidden=select_rows(hidden, rows.repeat_interleave(beam_size)))

    def step(self, prev_tokens: Tensor, state: RNNState) -> tuple[Tensor, RNNState, None]:
        h, hidden = rnn_step(self.rnn, self.dropout(self.embedding(prev_tokens)), state.hidden)
        return self.output(self.dropout(h)), replace(state, hidden=hidden), None

    def reorder(self, state: RNNState, index: Tensor) -> RNNState:
        return replace(state, hidden=select_rows(state.hidden, index))

    def forward(
        self, memory: Memory, tgt_in: Tensor, need_attention: bool = False, per_head: bool = False
    ) -> DecoderOutput:
        hidden = self.read_prompt(memory)
        outputs, _ = recur(self.rnn, self.dropout(self.embedding(tgt_in)), hidden)  # (B, T, H)
        return DecoderOutput(self.output(self.dropout(outputs)), None)
