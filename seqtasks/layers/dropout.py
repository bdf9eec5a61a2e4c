"""Dropout (Srivastava et al. 2014) that is cheap on a CPU."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def random_bytes(shape: torch.Size, device: torch.device) -> Tensor:
    """Uniform random uint8 of `shape`, drawn four to a 32-bit word."""
    numel = shape.numel()
    words = torch.randint(
        -(2**31), 2**31 - 1, ((numel + 3) // 4,), dtype=torch.int32, device=device
    )
    return words.view(torch.uint8)[:numel].view(shape)


def dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    """`Dropout` as a function: on a CPU, zero each element when its random byte is below
    round(256 p), and scale the rest by 256 / (256 − round(256 p)); elsewhere `F.dropout`."""
    threshold = round(p * 256)
    if not training or threshold == 0:
        return x
    if x.device.type != "cpu":
        return F.dropout(x, p, training=True)
    keep = random_bytes(x.shape, x.device) >= threshold
    return torch.where(keep, x * (256 / (256 - threshold)), 0.0)


class Dropout(nn.Module):
    """Inverted dropout whose mask comes from 8-bit random numbers on the CPU.

    `torch.nn.Dropout` draws one Bernoulli variable per element, which on a CPU costs several
    times the matrix product that made the activations (measured in docs/transformer.md); one
    random byte per element, drawn four at a time, costs a third as much. The rate is rounded
    to a multiple of 1/256 (0.1 → 26/256 ≈ 0.102), and the kept activations are scaled by
    1/(1 − rate) so the expectation is unchanged. On a GPU it is `F.dropout`.

    Args:
        p: the probability of zeroing an element.
    """

    def __init__(self, p: float):
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout rate must be in [0, 1), got {p}")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
