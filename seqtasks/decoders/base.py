"""The decoder contract that search, tasks and apps rely on."""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Protocol

from torch import Tensor, nn

from seqtasks.layers.memory import Memory


@dataclass
class DecoderOutput:
    """Teacher-forced outputs.

    Attributes:
        logits: (B, T, V) unnormalised scores of the next token at every position.
        attention: (B, T, S) the weights over the memory behind every position, averaged over
            heads where there are several; (B, H, T, S) with `per_head` (H = 1 for a
            single-head decoder). None when the decoder has no attention
            (`Decoder.gives_attention` false), or it was not asked for and is not free.
        choice_log_prob: (B, T) log-probability of the stochastic choice the decoder made at
            each step (hard attention's sampled location), 0 where it made none; None for a
            deterministic decoder. The task trains these choices by REINFORCE.
        sampled: (B,) bool, with `choice_log_prob`: the examples whose choices were sampled
            (hard attention's others used the expected context and made none).
        auxiliary_loss: (B,) a term of the parts' own that the objective adds to each
            example's (a cost of their computation): the decoder's, with the encoder's
            `Memory.auxiliary_loss` joined by the task (`adding`); None for none.
    """

    logits: Tensor
    attention: Tensor | None = None
    choice_log_prob: Tensor | None = None
    sampled: Tensor | None = None
    auxiliary_loss: Tensor | None = None

    def adding(self, loss: Tensor | None) -> DecoderOutput:
        """These outputs with (B,) `loss` added to their `auxiliary_loss` (None adds none)."""
        if loss is None:
            return self
        total = loss if self.auxiliary_loss is None else self.auxiliary_loss + loss
        return replace(self, auxiliary_loss=total)


class FixedCacheState(Protocol):
    """A search state over caches of a fixed length: `rows` (R) and the next position `at`
    (1,), on the device, which every step moves on in place."""

    at: Tensor

    @property
    def rows(self) -> int: ...


class FixedCacheSteps(Protocol):
    """A decoder's search steps over caches that hold the whole length L from the start, each
    step writing its position in place, so that every step runs the same kernels on the same
    addresses (what a captured CUDA graph replays: `seqtasks.search.captured`); the outputs
    are those of `Decoder.step`."""

    def start(self, memory: Memory, beam_size: int, length: int) -> FixedCacheState:
        """The state before the first of at most `length` steps, B·`beam_size` rows."""
        ...

    def step(
        self, prev_tokens: Tensor, state: Any, need_weights: bool, prefix: int | None = None
    ) -> tuple[Tensor, Tensor | None]:
        """(R,) previous tokens -> (R, V) logits and (R, S) attention if `need_weights`,
        reading the caches' first `prefix` positions (all if None), which must hold
        `state.at`; writes them at `state.at` and moves it on by one, in place."""
        ...

    def reorder(self, state: Any, rows: Tensor, prefix: int | None = None) -> None:
        """Row r continues old row rows[r] (every row kept), in place, over the first
        `prefix` positions (all if None)."""
        ...


class Decoder(nn.Module, metaclass=ABCMeta):
    """An autoregressive decoder over a `Memory`: one contract for every decoder.

    - `forward(memory, tgt_in, need_attention, per_head)`: the teacher-forced pass of training
      and validation. Recurrent decoders compute their attention anyway and always return it;
      the Transformer computes its weights (the last layer's cross-attention) only when asked,
      since its fused kernel does not produce them.
    - `start(memory, beam_size)`, `step(prev_tokens, state)`, `reorder(state, index)`: all that
      greedy, beam and sampling search (`seqtasks.search`) need, so every decoder works with
      every search. `step` returns each row's attention (R, S) (heads averaged), or None.

    Decoding step by step gives the same logits and attention as `forward` (a tested
    invariant). A decoder without attention sets `gives_attention = False`; a task that needs
    attention weights (for a loss term or a plot) refuses it when it is built. Each row of the
    attention sums to 1 over the memory, but where one softmax spans the memory and the
    decoder's own past (the decoder-only Transformer: `attention_sums_to_one = False`), which
    the loss terms that read it as a distribution refuse.

    During search the state holds R = B·K rows: K hypotheses per input, adjacent (rows
    b·K … b·K+K−1 belong to input b). What is derived from the memory once per input (attention
    keys, annotations, mask) is kept once per input, not once per row, and never copied per step.
    """

    vocab_size: int
    gives_attention: ClassVar[bool] = True
    attention_sums_to_one: ClassVar[bool] = True
    max_positions: int | None = None  # the most steps it can take (None: any), BOS included

    @abstractmethod
    def forward(
        self, memory: Memory, tgt_in: Tensor, need_attention: bool = False, per_head: bool = False
    ) -> DecoderOutput:
        """(B, T) target inputs (BOS y_1 … y_{T−1}) -> logits for y_1 … y_T, and attention."""
        raise NotImplementedError

    @abstractmethod
    def start(self, memory: Memory, beam_size: int = 1) -> Any:
        """The state before the first step: `beam_size` identical hypotheses per input."""
        raise NotImplementedError

    @abstractmethod
    def step(self, prev_tokens: Tensor, state: Any) -> tuple[Tensor, Any, Tensor | None]:
        """(R,) previous tokens -> (R, V) logits, the new state, (R, S) attention or None."""
        raise NotImplementedError

    @abstractmethod
    def reorder(self, state: Any, index: Tensor) -> Any:
        """Row r of the new state takes old row index[r]. Rows stay grouped K per input, and
        `index` either permutes rows within each input's group or also drops whole groups (the
        inputs search has finished with), which must then drop their per-input tensors too."""
        raise NotImplementedError

    def search_widths(self) -> tuple[int, int]:
        """(cache, D): the elements one search row adds to the state per output position (0
        for a decoder whose state does not grow, such as a recurrent one), and the decoder's
        width, its embeddings' (what `seqtasks.search.budget` sizes a batch by)."""
        return 0, self.embedding.embedding_dim

    def fixed_cache_steps(self) -> FixedCacheSteps | None:
        """Its search steps over caches of a fixed length (`FixedCacheSteps`), for a decoder
        that has them; None otherwise (the search then steps with `step`)."""
        return None
