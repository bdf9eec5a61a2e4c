"""Search over any `Decoder` through its contract: greedy, sampling and batched beam search.

Each function decodes a whole batch at once and returns, for every input, a list of
`Hypothesis` (one for greedy and sampling, up to `n_best` for beam search), best first.
An optional `Constraint` removes tokens from the choice at every step (their log-probability
becomes −inf; the others keep theirs), e.g. to allow only well-formed bracket sequences.
"""

from __future__ import annotations

from torch import Tensor

from seqtasks.decoders.base import Decoder
from seqtasks.layers.memory import Memory
from seqtasks.search.beam import beam_search, length_penalty
from seqtasks.search.hypothesis import Constraint, Hypothesis, max_lengths
from seqtasks.search.single_path import greedy, sample
from seqtasks.search.workers import run_batches

__all__ = [
    "Constraint",
    "Hypothesis",
    "beam_search",
    "decode",
    "greedy",
    "length_penalty",
    "max_lengths",
    "run_batches",
    "sample",
]


def decode(
    decoder: Decoder,
    memory: Memory,
    bos: int,
    eos: int,
    max_length: int | Tensor,
    beam_size: int = 1,
    n_best: int = 1,
    alpha: float = 1.0,
    return_attention: bool = False,
    constraint: Constraint | None = None,
) -> list[list[Hypothesis]]:
    """What tasks and apps decode with: greedy search for one beam and one output, batched
    beam search (length penalty `alpha`, `n_best` outputs) otherwise."""
    if beam_size == 1 and n_best == 1:
        return greedy(decoder, memory, bos, eos, max_length, return_attention, constraint)
    return beam_search(
        decoder,
        memory,
        bos,
        eos,
        max_length,
        beam_size,
        alpha,
        n_best,
        return_attention,
        constraint,
    )
