"""What every search returns and what may constrain it; helpers all searches share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import Tensor

from seqtasks.layers.memory import Memory


@dataclass
class Hypothesis:
    """One output sequence.

    Attributes:
        tokens: the output ids, without BOS and EOS.
        score: total log-probability (beam search: divided by the length penalty).
        attention: (len(tokens), S) the weights behind each output token over the valid source
            positions, or None when not requested or the decoder has no attention.
        finished: whether the hypothesis ended with EOS (false when cut at the length limit).
    """

    tokens: list[int]
    score: float
    attention: Tensor | None = None
    finished: bool = True


class Constraint(Protocol):
    """Which tokens each search row may choose next. Like a decoder's, its state has a row per
    hypothesis (R = B·K, K adjacent per input) and follows the search's choices."""

    def start(self, max_length: Tensor, beam_size: int) -> Any:
        """The state before the first step, given the search's (B,) length limits."""

    def allowed(self, state: Any) -> Tensor:
        """(R, V) bool, true for the tokens row r may choose next (at least one per row)."""

    def advance(self, state: Any, tokens: Tensor) -> Any:
        """The state after row r chose tokens[r] (R,)."""

    def reorder(self, state: Any, index: Tensor) -> Any:
        """Row r of the new state takes old row index[r] (as `Decoder.reorder`)."""

    def room(self, limits: Tensor) -> Tensor:
        """The (B,) length limits the outputs need under the constraint, given the search's
        own (a grammar may need more than a short input's limit leaves)."""


def constrained_log_probs(logits: Tensor, constraint: Constraint | None, state: Any) -> Tensor:
    """(R, V) log-softmax of the logits; −inf where the constraint, if any, forbids a token."""
    log_probs = torch.log_softmax(logits.float(), dim=-1)
    if constraint is None:
        return log_probs
    return log_probs.masked_fill(~constraint.allowed(state), float("-inf"))


def row_candidates(
    logits: Tensor, constraint: Constraint | None, state: Any, width: int
) -> tuple[Tensor, Tensor]:
    """The `width` best tokens of every row and their log-probabilities, as `log_probs`
    gives them: (R, width) scores and token ids.

    The best 2K extensions of an input are among the 2K best tokens of each of its beams, so
    only those are kept. The log-softmax is PyTorch's fused kernel: on a CPU it costs half of a
    `logsumexp` over the same logits (which PyTorch composes of several passes), measured in
    docs/peers.md.
    """
    log_probs = constrained_log_probs(logits, constraint, state)
    return log_probs.topk(min(width, log_probs.size(-1)), dim=-1)


def max_lengths(memory: Memory, ratio: float, offset: int, most: int | None = None) -> Tensor:
    """(B,) output length limit per input: ratio · source length + offset, and at most `most`
    (the steps a decoder can take, `Decoder.max_positions`; None: no such limit)."""
    limits = (memory.lengths.float() * ratio).long() + offset
    return limits if most is None else limits.clamp(max=most)


def as_limits(max_length: int | Tensor, batch: int, device: torch.device) -> Tensor:
    if isinstance(max_length, Tensor):
        return max_length.to(device)
    return torch.full((batch,), max_length, dtype=torch.long, device=device)


def keep_rows(groups: Tensor, k: int) -> Tensor:
    """The rows of the given input groups (n,), K rows each: (n·K,)."""
    return (groups[:, None] * k + torch.arange(k, device=groups.device)).view(-1)


def shrink_threshold(shrink_below: float | None, device: torch.device) -> float:
    """`shrink_below`, or by default when search drops its finished inputs: once fewer than this
    share of its rows are live, their rows staying in the batch until then.

    On a CPU at once (1.0): every row costs its share of the arithmetic and a drop costs little,
    so the batch is exactly what it was before issue 29. On a GPU once fewer than half are
    (0.5): a step takes about as long for any number of rows, while a drop waits for the device
    (to count the rows kept) and moves every per-input tensor, so it is done a few times per
    batch, not at every step where an input ends.
    """
    if shrink_below is not None:
        return shrink_below
    return 1.0 if device.type == "cpu" else 0.5
