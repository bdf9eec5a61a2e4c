"""The Universal Transformer's recurrence in depth (Dehghani et al. 2019, §2.1;
../shared/seeds/002_c600f22193c4e1d3.txt, "Universal Transformer - Additions"), shared by its
encoder and decoder: one layer's weights applied T times to every position in parallel, with a
coordinate embedding P^t added to the state before every step t (eqs. 1–5)

    P^t_{i,2j} = sin(i / 10000^{2j/d}) + sin(t / 10000^{2j/d})        (and cos for 2j + 1)
    A^t = LN((H^{t−1} + P^t) + MultiHeadSelfAttention(H^{t−1} + P^t))
    H^t = LN(A^t + Transition(A^t))

H^0 is the tokens' embeddings alone: the positions come with every step's P^t, as in the
authors' tensor2tensor code (`add_position_timing_signal`). The step signal is sinusoidal over
t = 1 … T; the position signal is the Transformer's table (sinusoidal, or learned with
`positions: learned`), so with T = 1 the model is a one-layer Transformer whose inputs carry
the extra, constant sinusoid of t = 1. P^t joins the residual stream (with ResiDual, both
streams, which then start as a one-layer Transformer's do).

With `act`, each position halts by adaptive computation time (§2.2, `layers/act.py`): its
output is the ACT-weighted mean of its states, and once halted "its state is simply copied to
the next step" — the other positions read its carried state at later steps (with that step's
P^t), and a decoder's cache at depth t holds the keys and values of that carried state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

import torch
from torch import Tensor, nn

from seqtasks.layers.act import HaltingUnit, Pondering, halting_step
from seqtasks.layers.transformer import (
    Embeddings,
    Stream,
    TransformerSettings,
    sinusoidal_table,
)

# (step t from 0, the stream with P^t added, whether its cross-attention weights are wanted)
#   -> the stream after the shared layer, and those weights (or None)
Transition = Callable[[int, Stream, bool], tuple[Stream, Tensor | None]]


@dataclass
class UniversalSettings(TransformerSettings):
    """What the Universal Transformer encoder and decoder share: `TransformerSettings` (the one
    layer's sizes, dropout, norm placement, positions …) and the recurrence's own.

    Attributes:
        num_layers: 1, the one layer whose weights every step applies; any other value is
            refused (the depth is `steps`).
        steps: T, the steps of the recurrence (with `act`, the most a position takes).
        act: adaptive computation time: each position halts on its own (`layers/act.py`).
        act_threshold: 1 − ε, the halting probability at which a position halts (ε = 0.01).
        ponder_cost: τ, the weight of the ponder cost Σ (N + R) in each example's objective
            (with `act`; 0.01 as the authors' `act_loss_weight`).
    """

    num_layers: int = 1
    steps: int = 6
    act: bool = False
    act_threshold: float = 0.99
    ponder_cost: float = 0.01

    def __post_init__(self) -> None:
        if self.num_layers != 1:
            raise ValueError(
                f"num_layers={self.num_layers}: the Universal Transformer applies one layer "
                "`steps` times; set steps instead"
            )
        if isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps < 1:
            raise ValueError(f"steps must be a positive integer, got {self.steps!r}")
        if not 0 < self.act_threshold <= 1:
            raise ValueError(f"act_threshold must be in (0, 1] (1 − ε), got {self.act_threshold}")
        if self.ponder_cost < 0:
            raise ValueError(f"ponder_cost must be at least 0, got {self.ponder_cost}")

    def transformer(self) -> dict:
        """These settings' `TransformerSettings` fields, by name (num_layers 1)."""
        return {field.name: getattr(self, field.name) for field in fields(TransformerSettings)}


def token_states(embeddings: Embeddings, tokens: Tensor) -> Tensor:
    """H^0: (B, L) ids -> (B, L, D) their embeddings scaled by √D, with dropout, and without
    positions (every step's P^t brings them)."""
    return embeddings.dropout(embeddings.embedding(tokens) * embeddings.scale)


@dataclass
class Recurred:
    """What the recurrence gives: the output `stream` (ACT's weighted mean with `act`, else
    H^T), the cross-attention weights behind it (weighted alike: at step T without `act`),
    and with `act` each position's ponder cost N + R (P), else None."""

    stream: Stream
    attention: Tensor | None
    ponder: Tensor | None


def shifted(stream: Stream, coordinate: Tensor) -> Stream:
    """The stream with P^t added (to both streams with ResiDual)."""
    x, dual = stream
    return x + coordinate, None if dual is None else dual + coordinate


def chosen(running: Tensor, new: Stream, old: Stream) -> Stream:
    """Per position, `new` where `running` (P), else `old`: a halted position's carried state."""
    keep = running[..., None]
    x = torch.where(keep, new[0], old[0])
    return x, None if new[1] is None else torch.where(keep, new[1], old[1])


def weighted(total: Stream | None, new: Stream, weight: Tensor) -> Stream:
    """total + weight · new, per position (weight (P))."""
    w = weight[..., None].to(new[0].dtype)
    x = w * new[0] if total is None else total[0] + w * new[0]
    if new[1] is None:
        return x, None
    return x, (w * new[1] if total is None else total[1] + w * new[1])


def weighted_attention(total: Tensor | None, new: Tensor, weight: Tensor) -> Tensor:
    """total + weight · new for weights (…, T, S) or per head (B, H, T, S), weight (B, T)."""
    w = weight[..., None].to(new.dtype)
    if new.dim() == 4:
        w = w[:, None]
    return w * new if total is None else total + w * new


class DepthRecurrence(nn.Module):
    """T steps of a shared layer (`Transition`), the coordinate embedding added before each,
    with ACT where `act` (the halting unit its only parameters: none depend on T)."""

    def __init__(self, s: UniversalSettings):
        super().__init__()
        self.steps = s.steps
        self.threshold = s.act_threshold
        # (T, D) the step signal of t = 1 … T
        self.register_buffer(
            "timing", sinusoidal_table(s.steps + 1, s.d_model)[1:], persistent=False
        )
        self.halting = HaltingUnit(s.d_model) if s.act else None

    def forward(
        self, stream: Stream, positions: Tensor, transition: Transition, need_attention: bool
    ) -> Recurred:
        """`stream` H^0 (…, L, D), `positions` (L, D) its positions' signal -> `Recurred`."""
        last = self.steps - 1
        if self.halting is None:
            weights = None
            for t in range(self.steps):
                coordinate = positions + self.timing[t]  # (L, D) P^t
                stream, weights = transition(
                    t, shifted(stream, coordinate), need_attention and t == last
                )
            return Recurred(stream, weights, None)
        account = Pondering.start(stream[0][..., 0])
        output, attention = None, None
        for t in range(self.steps):
            new, weights = transition(
                t, shifted(stream, positions + self.timing[t]), need_attention
            )
            weight, after = halting_step(self.halting(new[0]), account, self.threshold, t == last)
            output = weighted(output, new, weight)
            if weights is not None:
                attention = weighted_attention(attention, weights, weight)
            stream = chosen(~account.halted, new, stream)
            account = after
        return Recurred(output, attention, account.cost)
