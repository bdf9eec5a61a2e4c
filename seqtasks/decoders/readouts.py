"""Deep output layers: how a recurrent decoder turns its state into next-token logits."""

from __future__ import annotations

from torch import Tensor, nn

from seqtasks.layers.dropout import Dropout


class MaxoutReadout(nn.Module):
    """Deep output (Pascanu et al. 2014; the maxout of Bahdanau et al. 2015 App. A.2.2):
    t = maxout(W_t [inputs]) with pools of 2, then logits = W_o t."""

    def __init__(self, in_dim: int, readout_dim: int, vocab_size: int, dropout: float):
        super().__init__()
        self.hidden = nn.Linear(in_dim, 2 * readout_dim)
        self.dropout = Dropout(dropout)
        self.out = nn.Linear(readout_dim, vocab_size)

    def forward(self, features: Tensor) -> Tensor:
        """(…, in_dim) -> (…, V)"""
        t = self.hidden(features).unflatten(-1, (-1, 2)).amax(dim=-1)  # (…, readout_dim)
        return self.out(self.dropout(t))


class DeepOutput(nn.Module):
    """The deep output layer of Xu et al. (eq. 7):

        p(y_t | a, y_<t) ∝ exp(L_o(E y_{t−1} + L_h h_t + L_z ẑ_t))

    as printed, with dropout on the sum (the authors' code also puts a tanh on the sum before
    the dropout; eq. 7 has none, and neither has this layer). `context_dim` 0 leaves L_z ẑ
    out (the no-attention control).
    """

    def __init__(
        self, embed_dim: int, hidden_size: int, context_dim: int, vocab_size: int, dropout: float
    ):
        super().__init__()
        self.L_h = nn.Linear(hidden_size, embed_dim)
        self.L_z = nn.Linear(context_dim, embed_dim, bias=False) if context_dim else None
        self.dropout = Dropout(dropout)
        self.L_o = nn.Linear(embed_dim, vocab_size)

    def forward(self, embedded: Tensor, h: Tensor, z: Tensor | None = None) -> Tensor:
        """(…, m) E y_{t−1}, (…, n) h_t, (…, D) ẑ_t -> (…, V) logits."""
        deep = embedded + self.L_h(h)  # (…, m)
        if self.L_z is not None:
            deep = deep + self.L_z(z)
        return self.L_o(self.dropout(deep))
