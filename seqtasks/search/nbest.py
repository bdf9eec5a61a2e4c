"""The best hypotheses found for every input, kept in tensors on the search's device.

Beam search records what ends at a step here with a few tensor operations over the whole
batch, without reading anything back to the host or looping over inputs; the hypotheses are
read back once, when the search is over.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from seqtasks.search.hypothesis import Hypothesis


@dataclass
class Candidates:
    """Hypotheses that may end at one step: C per input for n inputs, in the order they end.

    Attributes:
        score: (n, C) float64 log-probability over the length penalty, −inf where there is none.
        tokens: (n, C, T) output ids (without BOS and EOS), the first `length` of each valid.
        length: (n, C) the number of tokens.
        ended: (n, C) bool, whether the hypothesis ended with EOS.
        attention: (n, C, T, S) the weights behind each token, or None.
    """

    score: Tensor
    tokens: Tensor
    length: Tensor
    ended: Tensor
    attention: Tensor | None = None


class NBest:
    """The `n_best` best-scoring hypotheses of each of `batch` inputs (−inf scores: none yet),
    best first, earlier first among equal scores (as Python's stable `sorted` ranks them), for
    outputs of at most `steps` tokens."""

    def __init__(self, batch: int, n_best: int, steps: int, device: torch.device):
        self.n_best = n_best
        self.score = torch.full((batch, n_best), float("-inf"), dtype=torch.float64, device=device)
        self.tokens = torch.zeros((batch, n_best, steps), dtype=torch.long, device=device)
        self.length = torch.zeros((batch, n_best), dtype=torch.long, device=device)
        self.ended = torch.zeros((batch, n_best), dtype=torch.bool, device=device)
        self.attention: Tensor | None = None  # (B, n_best, steps, S) once some is given

    def add(self, inputs: Tensor, new: Candidates) -> None:
        """Keep, for each of `inputs` (n,), the best of what it had and of `new`."""
        width = new.tokens.size(2)  # every hypothesis so far fits in the first `width` tokens
        merged = torch.cat([self.score[inputs], new.score], dim=1)  # (n, n_best + C)
        order = merged.sort(dim=1, descending=True, stable=True).indices[:, : self.n_best]
        self.score[inputs] = merged.gather(1, order)
        self.length[inputs] = torch.cat([self.length[inputs], new.length], 1).gather(1, order)
        self.ended[inputs] = torch.cat([self.ended[inputs], new.ended], 1).gather(1, order)
        tokens = torch.cat([self.tokens[inputs, :, :width], new.tokens], dim=1)
        self.tokens[inputs, :, :width] = tokens.gather(1, order[:, :, None].expand(-1, -1, width))
        if new.attention is None:
            return
        if self.attention is None:
            shape = (*self.tokens.shape, new.attention.size(-1))
            self.attention = new.attention.new_zeros(shape)
        attention = torch.cat([self.attention[inputs, :, :width], new.attention], dim=1)
        index = order[:, :, None, None].expand(-1, -1, width, attention.size(-1))
        self.attention[inputs, :, :width] = attention.gather(1, index)

    def hypotheses(self, valid: list[int]) -> list[list[Hypothesis]]:
        """Read back: each input's hypotheses, best first, their attention over its `valid`
        source positions."""
        scores, lengths = self.score.tolist(), self.length.tolist()
        ended, tokens = self.ended.tolist(), self.tokens.tolist()  # lists: no tensor per row
        attention = None if self.attention is None else self.attention.cpu()
        results = []
        for b, row in enumerate(scores):
            nbest = []
            for j, score in enumerate(row):
                if score == float("-inf"):
                    break
                n = lengths[b][j]
                weights = None if attention is None else attention[b, j, :n, : valid[b]].clone()
                nbest.append(Hypothesis(tokens[b][j][:n], score, weights, ended[b][j]))
            results.append(nbest)
        return results
