"""The encoder contract."""

from __future__ import annotations

from torch import Tensor, nn

from seqtasks.layers.memory import Memory


class Encoder(nn.Module):
    """Turns a batch of inputs into `Memory`. Subclasses set `out_dim` (the width D of states)."""

    out_dim: int

    def forward(self, inputs: Tensor, mask: Tensor) -> Memory:  # pragma: no cover - interface
        raise NotImplementedError
