"""Ensembles: several trained models that decode as one, through the encoder and decoder
contracts, so every search and every task works with them unchanged.

At each step the members' next-token log-probabilities are averaged, log p(y) = (1/N) Σ_n
log p_n(y), as OpenNMT-py does (fairseq averages probabilities instead); search then normalises
that sum again (a product of experts), so scores stay log-probabilities of one distribution.
Members must share their vocabularies; each keeps its own architecture and search state.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from seqtasks.decoders.base import Decoder, DecoderOutput
from seqtasks.encoders.base import Encoder
from seqtasks.layers.memory import Memory


@dataclass
class EnsembleMemory(Memory):
    """The first member's `Memory` (which search reads for sizes, lengths and the image grid),
    carrying every member's own in `members`."""

    members: tuple[Memory, ...] = ()

    def index_select(self, index: Tensor) -> EnsembleMemory:
        return EnsembleMemory.of(tuple(m.index_select(index) for m in self.members))

    @staticmethod
    def of(members: tuple[Memory, ...]) -> EnsembleMemory:
        first = members[0]
        return EnsembleMemory(
            states=first.states,
            mask=first.mask,
            summary=first.summary,
            grid=first.grid,
            members=members,
        )


class EnsembleEncoder(Encoder):
    """Every member encodes the same inputs (tokens, or images of one size)."""

    def __init__(self, members: list[Encoder]):
        super().__init__()
        self.reads = _agreed((member.reads for member in members), "read different inputs:")
        self.members = nn.ModuleList(members)
        self.out_dim = members[0].out_dim
        self.max_positions = _shortest(member.max_positions for member in members)

    def forward(self, *inputs: Any) -> EnsembleMemory:
        return EnsembleMemory.of(tuple(member(*inputs) for member in self.members))


def _agreed(values: Iterable[Any], differ: str) -> Any:
    """The one value every member has; else a ValueError: "ensemble members `differ`" and
    the values."""
    kinds = set(values)
    if len(kinds) != 1:
        raise ValueError(f"ensemble members {differ} {sorted(kinds)}")
    return kinds.pop()


def _shortest(limits: Iterable[int | None]) -> int | None:
    """The most positions every member takes (None: every member takes any number)."""
    return min((limit for limit in limits if limit is not None), default=None)


def _mean_attention(weights: list[Tensor | None]) -> Tensor | None:
    """The members' attention averaged, when all give it over the same positions; else None
    (e.g. image encoders with grids of different sizes)."""
    if any(w is None for w in weights) or len({w.shape for w in weights}) != 1:
        return None
    return torch.stack(weights).mean(dim=0)


class EnsembleDecoder(Decoder):
    """Decodes with every member and returns the mean of their log-probabilities as logits;
    its search state is the tuple of the members' states."""

    def __init__(self, members: list[Decoder]):
        super().__init__()
        sizes = (member.vocab_size for member in members)
        self.vocab_size = _agreed(sizes, "have different vocabularies: sizes")
        self.members = nn.ModuleList(members)
        self.gives_attention = all(member.gives_attention for member in members)
        self.attention_sums_to_one = all(member.attention_sums_to_one for member in members)
        self.max_positions = _shortest(member.max_positions for member in members)

    def forward(
        self, memory: Memory, tgt_in: Tensor, need_attention: bool = False, per_head: bool = False
    ) -> DecoderOutput:
        outputs = [
            member(own, tgt_in, need_attention=need_attention)
            for member, own in zip(self.members, _members(memory))
        ]
        log_probs = torch.stack([o.logits.float().log_softmax(-1) for o in outputs]).mean(dim=0)
        attention = _mean_attention([o.attention for o in outputs])
        if per_head and attention is not None:
            attention = attention[:, None]
        return DecoderOutput(log_probs, attention)

    def start(self, memory: Memory, beam_size: int = 1) -> tuple[Any, ...]:
        return tuple(
            member.start(own, beam_size) for member, own in zip(self.members, _members(memory))
        )

    def search_widths(self) -> tuple[int, int]:
        """The members' summed: every member keeps its own state."""
        widths = [member.search_widths() for member in self.members]
        return sum(c for c, _ in widths), sum(w for _, w in widths)

    def step(
        self, prev_tokens: Tensor, state: tuple[Any, ...]
    ) -> tuple[Tensor, tuple[Any, ...], Tensor | None]:
        steps = [member.step(prev_tokens, own) for member, own in zip(self.members, state)]
        log_probs = torch.stack([logits.float().log_softmax(-1) for logits, _, _ in steps])
        attention = _mean_attention([weights for _, _, weights in steps])
        return log_probs.mean(dim=0), tuple(new for _, new, _ in steps), attention

    def reorder(self, state: tuple[Any, ...], index: Tensor) -> tuple[Any, ...]:
        return tuple(member.reorder(own, index) for member, own in zip(self.members, state))


def _members(memory: Memory) -> tuple[Memory, ...]:
    if not isinstance(memory, EnsembleMemory):
        raise TypeError("an EnsembleDecoder reads the EnsembleMemory of an EnsembleEncoder")
    return memory.members
