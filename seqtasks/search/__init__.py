"""Search over any `Decoder` through its contract: greedy, sampling and batched beam search.

`search(decoder, memory, settings, constraint)` is the one way in: it picks greedy or beam
search from the `SearchSettings` and the length limits from them. Each algorithm decodes a
whole batch at once and returns, for every input, a list of `Hypothesis` (one for greedy and
sampling, up to `n_best` for beam search), best first. An optional `Constraint` removes tokens
from the choice at every step (their log-probability becomes −inf; the others keep theirs),
e.g. to allow only well-formed bracket sequences.
"""

from seqtasks.search.beam import beam_search, length_penalty
from seqtasks.search.by_settings import limits, search
from seqtasks.search.hypothesis import Constraint, Hypothesis, max_lengths
from seqtasks.search.settings import STOPS, SearchSettings, check_stop
from seqtasks.search.single_path import greedy, sample
from seqtasks.search.workers import run_batches

__all__ = [
    "STOPS",
    "Constraint",
    "Hypothesis",
    "SearchSettings",
    "beam_search",
    "check_stop",
    "greedy",
    "length_penalty",
    "limits",
    "max_lengths",
    "run_batches",
    "sample",
    "search",
]
