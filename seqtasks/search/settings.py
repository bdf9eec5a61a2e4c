"""What one search runs with, checked once: `SearchSettings`.

A task builds its settings from its config (`test_beam`, `length_alpha`, `beam_stop`, …) and
stores them in every checkpoint through its hyperparameters; `seqtasks.load`, the server and the
evaluation start from those and change only what their caller gives (`override`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import InitVar, dataclass, replace
from typing import Any

MAX_SOURCE_LENGTH = 250  # source tokens read by default; longer sources are cut
STOPS = ("exact", "heuristic")  # when beam search ends an input (`beam_search`)


def check_stop(stop: str, name: str = "stop") -> str:
    """`stop` if it names a stopping rule of `beam_search`; else a ValueError naming `name`."""
    if stop not in STOPS:
        raise ValueError(f"{name} must be one of {', '.join(STOPS)}, got {stop!r}")
    return stop


def check_positive(name: str, value: Any) -> int:
    """`value` if it is a positive integer (not a bool); else a ValueError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


@dataclass(frozen=True)
class SearchSettings:
    """How to search: greedy for one beam and one output, beam search otherwise. Built and
    checked once (from a config, a command's options, an API call or an HTTP request), it
    travels whole to the search loop (`seqtasks.search.search`).

    Attributes:
        beam: beam size (1 with n_best 1: greedy).
        length_alpha: α of the length penalty in beam search (Wu et al. 2016).
        stop: when beam search ends an input, "exact" or "heuristic" (`beam_search`).
        max_length_ratio, max_length_offset: outputs end at ratio · source length + offset.
        n_best: how many outputs per input, best first (at most `beam`).
        max_length: source tokens read (subwords); a longer source is cut, with a warning.
        cuda_graphs: on a GPU, replay each step of a Transformer decoder from a captured CUDA
            graph (`seqtasks.search.captured`): the same outputs, with one launch a step
            instead of ~90. It pays for greedy search in bf16 (1.74× on an H200); beam search
            is slower with it (docs/gpu.md, "Decoding"). Other decoders, and a CPU, search as
            without it.
        names: how the caller spells the fields, for its messages (`{"stop": "beam_stop"}`).

    Raises:
        ValueError: naming the field, for a beam, n_best or max_length that is not a positive
            integer, an n_best over the beam, or an unknown stop.
    """

    beam: int
    length_alpha: float = 1.0
    stop: str = "exact"
    max_length_ratio: float = 1.5
    max_length_offset: int = 10
    n_best: int = 1
    max_length: int = MAX_SOURCE_LENGTH
    cuda_graphs: bool = False
    names: InitVar[Mapping[str, str] | None] = None

    def __post_init__(self, names: Mapping[str, str] | None) -> None:
        name = dict(names or {}).get
        for field in ("beam", "n_best", "max_length"):
            check_positive(name(field, field), getattr(self, field))
        if self.n_best > self.beam:
            n_best, beam = name("n_best", "n_best"), name("beam", "beam")
            raise ValueError(f"{n_best}={self.n_best} cannot exceed {beam}={self.beam}")
        check_stop(self.stop, name("stop", "stop"))

    def override(self, **given: Any) -> SearchSettings:
        """These settings with those `given` that are not None, checked again."""
        return replace(self, **{key: value for key, value in given.items() if value is not None})

    @property
    def greedy(self) -> bool:
        """Whether one beam and one output: greedy search."""
        return self.beam == 1 and self.n_best == 1
