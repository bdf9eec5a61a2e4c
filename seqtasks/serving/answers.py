"""What the endpoints' JSON answers share (each task's `endpoint.py` builds its own): a text and
its score, the rest of an n-best list as `alternatives`, and, when a request asks for them
(`"attention": true`), the attention weights behind the best result, rounded.

A translation's `attention` is a list of rows, one per target piece (`pieces`), each over the
source's pieces and its EOS (`source_pieces`): `Translation.attention`, (T, S + 1). A caption's
is one row per word (`words`), each over the image's H·W grid cells, row by row (`grid`: [H,
W]): `Caption.attention`, (T, L). Weights are rounded to WEIGHT_DIGITS decimals, about 6 bytes of
JSON each: a request whose answer could carry more weights than the server's `max_attention`
(1,000,000 by default, ~6 MiB) is refused before any search (`endpoint.ModelEndpoint.
check_attention`).
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

WEIGHT_DIGITS = 4


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
