"""CTranslate2's search set up to decode as seqtasks' own does (`seqtasks.search`), for an
exported model: the same output length limit per sentence, scores as total log-probabilities,
and beam search hypotheses ranked by Wu et al.'s length penalty.

What its options cannot say is done around it. CTranslate2 takes one `max_decoding_length` per
call, so a batch is searched under its longest sentence's limit and a sentence whose search
reached its own limit is searched again under that. Its beam search stops once it has
`beam_size · patience` finished hypotheses (seqtasks' goes on while a live beam could still
win: `patience=2` found the same outputs on Multi30k) and ranks them by score / length^lp, not
by Wu et al.'s score / ((5 + length) / 6)^α; so all of them are asked for and re-ranked here.
When more finish at its last step than it returns, CTranslate2 drops the worst by its own
ranking, so lp = α/2 is asked for, the closest to Wu's: length^(1/2) equals (5 + length) / 6
at length 1 (an output that is only EOS) and stays within a factor 0.84 to 1.34 of it up to
length 40 (docs/deployment.md).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class Decoded:
    """One sentence's output: target pieces without </s>, and its score as seqtasks gives it
    (greedy: the total log-probability, EOS included; beam: that over the length penalty)."""

    pieces: list[str]
    score: float


def length_limit(source_pieces: int, ratio: float, offset: int) -> int:
    """seqtasks' output limit for a source of `source_pieces` subwords plus its EOS:
    int(ratio · (pieces + 1)) + offset, in float32 as `search.max_lengths` computes it."""
    return int(np.float32(source_pieces + 1) * np.float32(ratio)) + offset


def wu_penalty(length: int, alpha: float) -> float:
    """Wu et al. (2016): ((5 + |Y|) / 6)^α, |Y| counting EOS (`search.beam.length_penalty`)."""
    return ((5.0 + length) / 6.0) ** alpha


def ctranslate2_length_penalty(alpha: float) -> float:
    """CTranslate2's `length_penalty` closest to Wu et al.'s with `alpha`, never 0 (which would
    stop its search at the first finished best beam)."""
    return max(alpha / 2, 1e-6)


def best_by_wu(result: Any, alpha: float, eos: str) -> Decoded:
    """The best of a CTranslate2 result's hypotheses by seqtasks' ranking. The result was
    asked for with `ctranslate2_length_penalty(alpha)` and `return_end_token=True`, so each
    score is the total log-probability over length^lp, the length counting </s>."""
    best, lp = None, ctranslate2_length_penalty(alpha)
    for pieces, score in zip(result.hypotheses, result.scores):
        length = max(len(pieces), 1)
        ranked = score * length**lp / wu_penalty(length, alpha)
        if best is None or ranked > best.score:
            best = Decoded(pieces[:-1] if pieces and pieces[-1] == eos else list(pieces), ranked)
    return best


def _search(beam_size: int, length_alpha: float, patience: float) -> dict[str, Any]:
    """`translate_batch` options for seqtasks' greedy search or beam search."""
    common: dict[str, Any] = dict(min_decoding_length=0, return_scores=True)
    if beam_size == 1:  # greedy: raw total log-probabilities
        return common | dict(beam_size=1, length_penalty=0.0)
    return common | dict(
        beam_size=beam_size,
        num_hypotheses=round(beam_size * patience),  # every finished one: re-ranked here
        patience=patience,
        length_penalty=ctranslate2_length_penalty(length_alpha),
        return_end_token=True,
    )


def _batches(rows: list[int], sources: Sequence[Sequence[str]], max_tokens: int) -> list[list[int]]:
    """`rows`, sorted by source length, cut into batches of at most `max_tokens` padded
    source subwords (EOS included)."""
    batches: list[list[int]] = [[]]
    for i in rows:
        if batches[-1] and (len(batches[-1]) + 1) * (len(sources[i]) + 1) > max_tokens:
            batches.append([])
        batches[-1].append(i)
    return [batch for batch in batches if batch]


def translate_as_seqtasks(
    translator: Any,
    sources: Sequence[Sequence[str]],
    beam_size: int,
    length_alpha: float,
    max_length_ratio: float,
    max_length_offset: int,
    eos: str = "</s>",
    patience: float = 2.0,
    max_tokens: int = 2000,
    **options: Any,
) -> list[Decoded]:
    """Translate source pieces (without </s>: the exported model appends it) with
    `translator` (a `ctranslate2.Translator` of an exported model) as seqtasks' `Translator`
    would with `beam_size` and the model's `length_alpha`, `max_length_ratio`,
    `max_length_offset` (its `search_settings()`).

    Sources are sorted by length and cut into batches of about `max_tokens` subwords, each
    searched under its longest sentence's limit. A sentence whose search ended before its own
    limit's last step (every hypothesis shorter than its limit) went as it would have under its
    own limit; the others are searched again, grouped by their own limit. An empty source gives
    an empty output, as in seqtasks. `options` go to every `translate_batch` call.
    """
    limits = [length_limit(len(p), max_length_ratio, max_length_offset) for p in sources]
    search = _search(beam_size, length_alpha, patience) | options
    decoded = [Decoded([], 0.0) for _ in sources]

    def submit(rows: list[int], limit: int) -> list[Any]:
        batch = [list(sources[i]) for i in rows]
        return translator.translate_batch(
            batch, max_decoding_length=limit, asynchronous=True, **search
        )

    def translate(jobs: list[tuple[list[int], int]], exact: bool) -> list[int]:
        """Decode each job's `rows` under its `limit`, all submitted at once (a translator
        with `inter_threads` > 1 runs several side by side); return the rows to decode again
        under their own limit."""
        pending = [(rows, limit, submit(rows, limit)) for rows, limit in jobs]
        again = []
        for rows, limit, results in pending:
            for i, result in zip(rows, (r.result() for r in results)):
                longest = max(map(len, result.hypotheses))
                if not exact and limits[i] < limit and longest >= limits[i]:
                    again.append(i)
                elif beam_size == 1:
                    decoded[i] = Decoded(result.hypotheses[0], result.scores[0])
                else:
                    decoded[i] = best_by_wu(result, length_alpha, eos)
        return again

    order = sorted((i for i, p in enumerate(sources) if p), key=lambda i: len(sources[i]))
    batches = _batches(order, sources, max_tokens)
    again = translate([(rows, max(limits[i] for i in rows)) for rows in batches], exact=False)
    by_limit: dict[int, list[int]] = defaultdict(list)
    for i in again:
        by_limit[limits[i]].append(i)
    translate([(rows, limit) for limit, rows in sorted(by_limit.items())], exact=True)
    return decoded
