"""The decoder contract that search, tasks and apps rely on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import Tensor, nn

from seqtasks.memory import Memory


@dataclass
class DecoderOutput:
    """Teacher-forced outputs.

    Attributes:
        logits: (B, T, V) unnormalised scores of the next token at every position.
        attention: (B, T, S) the attention weights, or None for a decoder without attention.
    """

    logits: Tensor
    attention: Tensor | None = None


class Decoder(nn.Module):
    """An autoregressive decoder over a `Memory`.

    `forward` is the teacher-forced pass used in training; `init_state`, `step` and `reorder`
    are all that greedy, beam and sampling search need, so every decoder works with every search.
    Decoding step by step must give the same logits as `forward` (a tested invariant).

    Contract for `reorder`: the index only moves hypotheses between rows that decode the same
    input (beams of one sentence), so per-input tensors derived from the memory need not move.
    """

    vocab_size: int

    def forward(self, memory: Memory, tgt_in: Tensor) -> DecoderOutput:  # pragma: no cover
        """(B, T) target inputs (BOS y_1 … y_{T−1}) -> logits for y_1 … y_T."""
        raise NotImplementedError

    def init_state(self, memory: Memory) -> Any:  # pragma: no cover
        """The decoder state before the first step, for each row of `memory`."""
        raise NotImplementedError

    def step(
        self, prev_tokens: Tensor, state: Any
    ) -> tuple[Tensor, Any, Tensor | None]:  # pragma: no cover
        """(B,) previous tokens -> (B, V) logits, the new state, (B, S) attention or None."""
        raise NotImplementedError

    def reorder(self, state: Any, index: Tensor) -> Any:  # pragma: no cover
        """The state with its hypotheses permuted: row r takes old row index[r]."""
        raise NotImplementedError
