"""Adaptive computation time (Graves 2016, §2; per position in the Universal Transformer,
Dehghani et al. 2019, §2.2): a halting unit decides, after each step n of a recurrence, how
much of the remaining probability mass this step's state takes,

    p^n = σ(W h^n + b)                       the halting probability of step n's state h^n
    N = min{n : Σ_{n'≤n} p^{n'} ≥ 1 − ε}     the steps taken (at most T)
    R = 1 − Σ_{n<N} p^n                      the remainder
    output = Σ_{n<N} p^n h^n + R h^N         a weighted mean of the states
    ρ = N + R                                the ponder cost; τ ρ is added to the loss

A position still running at step T halts there with its remainder, so its weights always sum
to 1. N is a count, so only R carries the ponder cost's gradient: it pushes the probabilities of
the steps before N up, and so N down. As in Graves, p^n reads the state step n produced, and
the output is the weighted sum; the authors' tensor2tensor code (the paper's appendix) reads p
from the step's input and, by default, interpolates the states instead of summing them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

HALTING_BIAS = 1.0  # b at the start: p ≈ 0.73, so every position ponders about two steps


@dataclass(frozen=True)
class Pondering:
    """ACT's account of every position (any shape P, e.g. (B, T)) after some steps.

    Attributes:
        halted: (P) bool, the positions that have halted.
        total: (P) Σ p^n over the steps before halting (the running sum while running).
        steps: (P) N, the steps taken (the count so far while running).
        remainder: (P) R where halted, 0 while running.
    """

    halted: Tensor
    total: Tensor
    steps: Tensor
    remainder: Tensor

    @classmethod
    def start(cls, like: Tensor) -> Pondering:
        """Before the first step, for positions shaped like `like` (float32 throughout)."""
        zeros = torch.zeros(like.shape, device=like.device)
        return cls(zeros.bool(), zeros, zeros, zeros)

    @property
    def cost(self) -> Tensor:
        """(P) the ponder cost ρ = N + R of every position."""
        return self.steps + self.remainder


def halting_step(
    p: Tensor, before: Pondering, threshold: float, last: bool
) -> tuple[Tensor, Pondering]:
    """One step of ACT for every position: this step's halting probabilities p (P) -> the
    weight of this step's state in the output (P), and the account after it.

    The weight is p for a position that goes on, its remainder R = 1 − Σ p for one that halts
    now (its Σ p reaches `threshold` = 1 − ε with this step's, or this is the `last` step), and
    0 for one that halted before.
    """
    running = ~before.halted
    halts = running & ((before.total + p >= threshold) | last)
    goes_on = running & ~halts
    remainder = 1 - before.total
    weight = torch.where(goes_on, p, torch.where(halts, remainder, torch.zeros_like(p)))
    after = Pondering(
        halted=before.halted | halts,
        total=before.total + p * goes_on,
        steps=before.steps + running.float(),
        remainder=torch.where(halts, remainder, before.remainder),
    )
    return weight, after


class HaltingUnit(nn.Module):
    """p = σ(W h + b), one probability per position of a (…, D) state, in float32. b starts at
    `HALTING_BIAS`, as in the authors' tensor2tensor code (`act_halting_bias_init`)."""

    def __init__(self, d_model: int):
        super().__init__()
        self.linear = nn.Linear(d_model, 1)
        nn.init.xavier_uniform_(self.linear.weight)
        nn.init.constant_(self.linear.bias, HALTING_BIAS)

    def forward(self, h: Tensor) -> Tensor:
        """(…, D) -> (…,)"""
        return torch.sigmoid(self.linear(h).float())[..., 0]
