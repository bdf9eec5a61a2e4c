"""Sentences grouped by length, for scores by length (BLEU by source length as in Bahdanau et
al. 2015, Fig. 2; F1 by sentence length as EVALB reports it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass
class LengthBucket:
    """Sentences of `low`…`high` words (inclusive; `high` None: open-ended); subclasses add the
    bucket's score."""

    low: int
    high: int | None
    sentences: int

    @property
    def label(self) -> str:
        return f"{self.low}+" if self.high is None else f"{self.low}–{self.high}"


def length_ranges(edges: Sequence[int]) -> list[tuple[int, int | None]]:
    """The buckets that `edges` (upper bounds of all but the last) cut: (10, 20) gives 1–10,
    11–20 and 21+, as (low, high) with high None for the last."""
    bounds: list[int | None] = [0, *edges, None]
    return [(low + 1, high) for low, high in zip(bounds[:-1], bounds[1:])]


def in_bucket(length: int, low: int, high: int | None) -> bool:
    return low <= length and (high is None or length <= high)
