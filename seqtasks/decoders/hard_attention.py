"""The stochastic "hard" attention decoder of Xu et al. (2015), §4.1."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

import torch
from torch import Tensor

from seqtasks.decoders.rnn import RNNState
from seqtasks.decoders.show_attend_tell import SoftAttentionDecoder
from seqtasks.layers.memory import Memory


@dataclass
class HardAttentionState(RNNState):
    """`RNNState` plus, in training, which rows sample a location this pass."""

    sampling: Tensor | None = None  # (R,) bool; None outside training


class HardAttentionDecoder(SoftAttentionDecoder):
    """The soft-attention decoder, except that at each step the context is *one* annotation,
    the location s_t drawn from α_t:

        s_t ~ Multinoulli(α_t)       ẑ_t = β_t a_{s_t}

    Training (§4.1): the word loss trains everything but the choice of s; the choice gets the
    REINFORCE rule, with reward log p(y | s, a), a moving-average baseline and an entropy bonus,
    all added by the task from `DecoderOutput.choice_log_prob` (`seqtasks.tasks.objective`).
    As in the paper, each image uses the expected context Σ_i α_ti a_i instead of a sample
    with probability `expectation_probability` (those rows make no choice and are trained like
    soft attention). The coin is tossed per image; the authors' code tosses one per batch.

    At test time (eval mode: validation, search, the apps) no location is sampled: the context
    is the expectation Σ_i α_ti a_i (`test_context="expectation"`, what the authors' sampler
    does) or the annotation at the peak of α (`"argmax"`).

    Args: `SoftAttentionDecoder`'s, by keyword (`embed_dim`, `hidden_size`, `attention`,
        `dropout`, `pad_id`; YAML and `--help` list them, and a misspelt one is refused), and
        expectation_probability: per image and training pass, the chance of using the expected
            context instead of sampling locations.
        test_context: the context in eval mode, "expectation" or "argmax".
    """

    def __init__(
        self,
        vocab_size: int,
        memory_dim: int,
        expectation_probability: float = 0.5,
        test_context: Literal["expectation", "argmax"] = "expectation",
        **soft_attention: Any,
    ):
        super().__init__(vocab_size, memory_dim, **soft_attention)
        if not self.attention.values_are_annotations:
            raise ValueError(
                f"HardAttentionDecoder samples one annotation as its context, but "
                f"{type(self.attention).__name__}'s context is no weighted sum of the annotations:"
                " choose a score function (AdditiveAttention, GeneralAttention, …)"
            )
        self.expectation_probability = expectation_probability
        self.test_context = test_context

    def start(self, memory: Memory, beam_size: int = 1) -> HardAttentionState:
        state = super().start(memory, beam_size)
        sampling = None
        if self.training:
            per_input = torch.rand(memory.states.size(0), device=memory.states.device)
            sampling = (per_input >= self.expectation_probability).repeat_interleave(beam_size)
        return HardAttentionState(**vars(state), sampling=sampling)

    def glimpse(
        self, query: Tensor, state: HardAttentionState, per_head: bool = False
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """(R, n) h_{t−1} -> context (R, D), α_t (R, L) (as (R, 1, L) per head), and
        log α_{t, s_t} (R,) of the sampled locations (0 on rows that used the expectation), or
        None in eval mode."""
        expected, weights = self.attend(query, state)  # (R, D), (R, L)
        shown = weights[:, None] if per_head else weights
        if state.sampling is None:  # eval mode
            if self.test_context == "expectation":
                return expected, shown, None
            return self._annotation_at(weights.argmax(dim=-1), state), shown, None
        location = torch.multinomial(weights, 1)[:, 0]  # (R,) s_t ~ Multinoulli(α_t)
        log_prob = weights.gather(1, location[:, None])[:, 0].log()  # (R,)
        sampled = self._annotation_at(location, state)  # (R, D)
        context = torch.where(state.sampling[:, None], sampled, expected)
        return context, shown, log_prob.masked_fill(~state.sampling, 0.0)

    @staticmethod
    def _annotation_at(location: Tensor, state: RNNState) -> Tensor:
        """(R,) one location per row -> (R, D) that row's annotation a_location (rows come K
        adjacent per input, and the annotations once per input)."""
        rows = location.size(0)
        values = state.memory.values  # (B, L, D)
        inputs = torch.arange(rows, device=location.device) // (rows // values.size(0))
        return values[inputs, location]

    def reorder(self, state: HardAttentionState, index: Tensor) -> HardAttentionState:
        moved = super().reorder(state, index)
        if state.sampling is None:
            return moved
        return replace(moved, sampling=state.sampling.index_select(0, index))
