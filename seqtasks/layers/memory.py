"""`Memory`: what every encoder hands every decoder."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class Memory:
    """The annotations h_1..h_S of one batch of inputs.

    Attributes:
        states: (B, S, D) one vector per source token or image cell.
        mask: (B, S) bool, true where a position is real (not padding).
        summary: (B, D) the fixed-length vector c (Cho et al. 2014) that initialises a decoder
            and is all a no-attention decoder ever sees of the input.
        grid: (H, W) when the states come from an image (S = H·W), so an attention row can be
            drawn as a heat map; None for text.
        auxiliary_loss: (B,) a term of the encoder's own that the task adds to each example's
            objective (a cost of its computation), or None.
    """

    states: Tensor
    mask: Tensor
    summary: Tensor
    grid: tuple[int, int] | None = None
    auxiliary_loss: Tensor | None = None

    @property
    def lengths(self) -> Tensor:
        """(B,) number of real positions per row."""
        return self.mask.sum(dim=1)

    def index_select(self, index: Tensor) -> Memory:
        """The rows named by `index` (B',), in that order."""
        loss = self.auxiliary_loss
        return Memory(
            states=self.states.index_select(0, index),
            mask=self.mask.index_select(0, index),
            summary=self.summary.index_select(0, index),
            grid=self.grid,
            auxiliary_loss=None if loss is None else loss.index_select(0, index),
        )


def lengths_to_mask(lengths: Tensor, max_len: int | None = None) -> Tensor:
    """(B,) lengths -> (B, max_len) bool mask, true on the first `length` positions."""
    max_len = int(lengths.max()) if max_len is None else max_len
    return torch.arange(max_len, device=lengths.device)[None, :] < lengths[:, None]
