"""The decoder contract that search, tasks and apps rely on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import Tensor, nn

from seqtasks.layers.memory import Memory


@dataclass
class DecoderOutput:
    """Teacher-forced outputs.

    Attributes:
        logits: (B, T, V) unnormalised scores of the next token at every position.
        attention: (B, T, S) the attention weights, or None for a decoder without attention.
        choice_log_prob: (B, T) log-probability of the stochastic choice the decoder made at
            each step (hard attention's sampled location), 0 where it made none; None for a
            deterministic decoder. The task trains these choices by REINFORCE.
        sampled: (B,) bool, with `choice_log_prob`: the examples whose choices were sampled
            (hard attention's others used the expected context and made none).
    """

    logits: Tensor
    attention: Tensor | None = None
    choice_log_prob: Tensor | None = None
    sampled: Tensor | None = None


class Decoder(nn.Module):
    """An autoregressive decoder over a `Memory`.

    `forward` is the teacher-forced pass used in training; `init_state`, `step` and `reorder`
    are all that greedy, beam and sampling search need, so every decoder works with every search.
    Decoding step by step must give the same logits as `forward` (a tested invariant).

    During search the state holds R = B·K rows: K hypotheses per input, adjacent (rows
    b·K … b·K+K−1 belong to input b). What is derived from the memory once per input (attention
    keys, annotations, mask) is kept once per input, not once per row, and never copied per step.
    """

    vocab_size: int

    def forward(self, memory: Memory, tgt_in: Tensor) -> DecoderOutput:  # pragma: no cover
        """(B, T) target inputs (BOS y_1 … y_{T−1}) -> logits for y_1 … y_T."""
        raise NotImplementedError

    def init_state(self, memory: Memory, beam_size: int = 1) -> Any:  # pragma: no cover
        """The state before the first step: `beam_size` identical hypotheses per input."""
        raise NotImplementedError

    def step(
        self, prev_tokens: Tensor, state: Any
    ) -> tuple[Tensor, Any, Tensor | None]:  # pragma: no cover
        """(B,) previous tokens -> (B, V) logits, the new state, (B, S) attention or None."""
        raise NotImplementedError

    def reorder(self, state: Any, index: Tensor) -> Any:  # pragma: no cover
        """Row r of the new state takes old row index[r]. Rows stay grouped K per input, and
        `index` either permutes rows within each input's group or also drops whole groups (the
        inputs search has finished with), which must then drop their per-input tensors too."""
        raise NotImplementedError
