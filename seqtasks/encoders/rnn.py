"""Bidirectional recurrent text encoder (Bahdanau et al. 2015, §3.2)."""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from seqtasks.encoders.base import Encoder
from seqtasks.memory import Memory


class RNNEncoder(Encoder):
    """Embeddings and a bidirectional GRU/LSTM over packed sequences.

    The annotation of token j concatenates both directions, h_j = [→h_j; ←h_j], so it summarises
    the whole sentence with a focus on the words around j. The summary c = [→h_S; ←h_1] joins the
    last state of each direction of the top layer.

    Args:
        vocab_size: source vocabulary size V (given by the task, from the data).
        embed_dim: width of the token embeddings.
        hidden_size: width of each direction; `out_dim` is twice this.
        num_layers: stacked bidirectional layers.
        cell: "gru" (Bahdanau et al.) or "lstm".
        dropout: on the embeddings, between layers and on the annotations.
        pad_id: the padding token, whose embedding stays zero.
    """

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int = 256,
        hidden_size: int = 256,
        num_layers: int = 1,
        cell: Literal["gru", "lstm"] = "gru",
        dropout: float = 0.2,
        pad_id: int = 0,
    ):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=pad_id)
        rnn_class = nn.GRU if cell == "gru" else nn.LSTM
        self.rnn = rnn_class(
            embed_dim,
            hidden_size,
            num_layers=num_layers,
            batch_first=True,
            bidirectional=True,
            dropout=dropout if num_layers > 1 else 0.0,
        )
        self.dropout = nn.Dropout(dropout)
        self.out_dim = 2 * hidden_size

    def forward(self, inputs: Tensor, mask: Tensor) -> Memory:
        """(B, S) token ids and (B, S) mask -> Memory with states (B, S, 2H), summary (B, 2H)."""
        lengths = mask.sum(dim=1)
        embedded = self.dropout(self.embedding(inputs))  # (B, S, E)
        packed = pack_padded_sequence(
            embedded, lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        outputs, final = self.rnn(packed)
        states, _ = pad_packed_sequence(outputs, batch_first=True, total_length=inputs.size(1))
        h_n = final[0] if isinstance(final, tuple) else final  # (layers·2, B, H)
        summary = torch.cat([h_n[-2], h_n[-1]], dim=-1)  # (B, 2H): [→h_S; ←h_1]
        return Memory(states=self.dropout(states), mask=mask, summary=summary)
