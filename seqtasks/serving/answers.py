"""The JSON answers of the endpoints, from `seqtasks.api`'s results: a text and its score, the
rest of an n-best list as `alternatives`, and, when a request asks for them (`"attention":
true`), the attention weights behind the best result with the pieces that label them.

A translation's `attention` is a list of rows, one per target piece (`pieces`), each over the
source's pieces and its EOS (`source_pieces`): `Translation.attention`, (T, S + 1). A caption's
is one row per word (`words`), each over the image's H·W grid cells, row by row (`grid`: [H,
W]): `Caption.attention`, (T, L). Weights are rounded to WEIGHT_DIGITS decimals, about 6 bytes of
JSON each: a request whose answer could carry more weights than the server's `max_attention`
(1,000,000 by default, ~6 MiB) is refused before any search (`endpoints.ModelEndpoint.
check_attention`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import Tensor

WEIGHT_DIGITS = 4


@dataclass
class Attended:
    """A translation with the source pieces its attention's columns stand for."""

    translation: Any  # seqtasks.api.Translation, its attention kept
    source_pieces: list[str]


def weights(attention: Tensor | None) -> list[list[float]]:
    """A (rows, columns) attention matrix as rows of rounded floats ([] for none)."""
    if attention is None:
        return []
    return [[round(w, WEIGHT_DIGITS) for w in row] for row in attention.float().tolist()]


def result(found: Any, key: str) -> dict[str, Any]:
    """`{key: text, "score": ...}` and, for an n-best list, its `alternatives` alike."""
    answer = {key: found.text, "score": float(found.score)}
    if found.alternatives:
        answer["alternatives"] = [
            {key: a.text, "score": float(a.score)} for a in found.alternatives
        ]
    return answer


def translation(found: Any) -> dict[str, Any]:
    """One translation's answer; with its attention when it is `Attended`."""
    if not isinstance(found, Attended):
        return result(found, "text")
    best = found.translation
    return {
        **result(best, "text"),
        "pieces": list(best.tokens),
        "source_pieces": list(found.source_pieces),
        "attention": weights(best.attention),
    }


def caption(found: Any) -> dict[str, Any]:
    """One caption's answer; with its words, their weights and the grid when it kept its
    attention (`Caption.attention` is None unless the request asked for it)."""
    answer = result(found, "caption")
    if found.attention is not None:
        answer["words"] = list(found.words)
        answer["attention"] = weights(found.attention)
        answer["grid"] = list(found.grid) if found.grid else None
    return answer


def nested(tree: Any) -> list[Any]:
    """An nltk tree as JSON: `[label, child, …]`, a leaf (a word) as its string, so that a
    client draws the words the parser read without splitting the bracket string again (a word
    may hold characters a client reads as space, such as U+FEFF in JavaScript)."""
    return [tree.label(), *(nested(c) if hasattr(c, "label") else str(c) for c in tree)]


def parses(found: list[Any]) -> dict[str, Any]:
    """The trees on one line each and as nested lists (`structures`: `nested`), their scores,
    how many edits the constrained decoder made to each bracket sequence (`repairs`), and any
    `alternatives`."""
    answer: dict[str, Any] = {
        "trees": [p.text for p in found],
        "structures": [nested(p.tree) for p in found],
        "scores": [float(p.score) for p in found],
        "repairs": [int(p.repairs) for p in found],
    }
    if any(p.alternatives for p in found):
        answer["alternatives"] = [
            [{"tree": a.text, "score": float(a.score)} for a in p.alternatives] for p in found
        ]
    return answer
