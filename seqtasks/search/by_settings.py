"""`search`: the one way every caller searches (validation, `seqtasks.load`'s models, the
commands and the server), from a `SearchSettings` that travels whole from where it was given."""

from __future__ import annotations

from torch import Tensor

from seqtasks.decoders.base import Decoder
from seqtasks.layers.memory import Memory
from seqtasks.search.beam import beam_search
from seqtasks.search.captured import CapturedSteps
from seqtasks.search.hypothesis import Constraint, Hypothesis, max_lengths
from seqtasks.search.settings import SearchSettings
from seqtasks.search.single_path import greedy


def search(
    decoder: Decoder,
    memory: Memory,
    settings: SearchSettings,
    constraint: Constraint | None = None,
    attention: bool = False,
) -> list[list[Hypothesis]]:
    """Per input, its `settings.n_best` outputs, best first (with their attention, if asked
    for): greedy search for one beam and one output, batched beam search otherwise. An output
    ends within `limits`; under a `constraint`, only the tokens it allows are chosen. With
    `settings.cuda_graphs`, the steps of a decoder with `fixed_cache_steps` (a Transformer's)
    on a GPU are replayed from CUDA graphs and every row stays in the batch to the end
    (`CapturedSteps`)."""
    found = limits(decoder, memory, settings, constraint)
    shrink = None  # the search's default
    graphs = settings.cuda_graphs and memory.states.is_cuda
    if graphs and decoder.fixed_cache_steps() is not None:
        steps = CapturedSteps(decoder, int(found.max()), attention)  # start, step, reorder
        decoder, shrink = steps, 0.0  # type: ignore[assignment]
    if settings.greedy:
        return greedy(
            decoder, memory, found, attention=attention, constraint=constraint, shrink_below=shrink
        )
    return beam_search(
        decoder, memory, settings, found, attention=attention, constraint=constraint,
        shrink_below=shrink,
    )  # fmt: skip


def limits(
    decoder: Decoder,
    memory: Memory,
    settings: SearchSettings,
    constraint: Constraint | None = None,
) -> Tensor:
    """(B,) output length limits: `settings.max_length_ratio` · input length +
    `max_length_offset`, at most the decoder's positions, and at least what the constraint
    needs room for (`Constraint.room`)."""
    ratio, offset = settings.max_length_ratio, settings.max_length_offset
    found = max_lengths(memory, ratio, offset, decoder.max_positions)
    return found if constraint is None else constraint.room(found)
