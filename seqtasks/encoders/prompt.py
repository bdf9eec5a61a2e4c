"""The source as a prompt: its token vectors alone, for a decoder-only model to read.

A single network as encoder–decoder (`../shared/seeds/004…`, "A single RNN as encoder-decoder":
"[sentence] [SEP] [sentence]", "we use English as a prompt") has no encoder of its own: the one
network reads the source's tokens and then writes the target's. In seqtasks' contracts that
network is the decoder (`PromptedRNNDecoder`, `PromptedTransformerDecoder`), and this encoder only
looks the source tokens up, so that it keeps a table for the source vocabulary (the target's is
the decoder's) and the task, its data and its search stay as they are. Paired with an
encoder–decoder's decoder instead, it is a bag of embeddings under attention, which the matrix
trains like every other pairing.
"""

from __future__ import annotations

from torch import Tensor, nn

from seqtasks.encoders.base import Encoder
from seqtasks.layers.dropout import Dropout
from seqtasks.layers.memory import Memory


class PromptEncoder(Encoder):
    """E x_j for every source token x_j, and their mean over the real positions as the summary.

    Args:
        vocab_size: source vocabulary size V (given by the task, from the data).
        embed_dim: width D of the vectors (the decoder maps them to its own width).
        dropout: on the vectors.
        pad_id: the padding token, whose vector stays zero.
    """

    def __init__(
        self, vocab_size: int, embed_dim: int = 256, dropout: float = 0.1, pad_id: int = 0
    ):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=pad_id)
        nn.init.normal_(self.embedding.weight, std=embed_dim**-0.5)
        nn.init.zeros_(self.embedding.weight[pad_id])
        self.dropout = Dropout(dropout)
        self.out_dim = embed_dim

    def forward(self, inputs: Tensor, mask: Tensor) -> Memory:
        """(B, S) ids and (B, S) mask -> Memory with states (B, S, D), summary (B, D)."""
        states = self.dropout(self.embedding(inputs)) * mask[:, :, None]
        weights = mask[:, :, None].to(states.dtype)
        summary = states.sum(1) / weights.sum(1).clamp(min=1)
        return Memory(states=states, mask=mask, summary=summary)
