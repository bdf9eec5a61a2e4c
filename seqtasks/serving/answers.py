"""The one shape of every endpoint's JSON answer: `{"results": [result, ...]}`, one result per
input in order (a sentence of /translate or /parse, the image of /caption), each

    {"text": ..., "score": ..., "alternatives": [{"text": ..., "score": ...}, ...], ...}

with the rest of its n-best list, best first, in `alternatives` ([] for n_best 1), and what its
task adds (a parse's `tree` and `repairs`). When a request asks for them (`"attention": true`),
a result also holds the weights behind it, `"attention": {"weights": [[...]], "rows": [...],
...}`: a row per output piece (`rows`), each over the source's pieces and its EOS (`columns`,
for a translation: `Translation.attention`, (T, S + 1)) or over the image's H·W grid cells, row
by row (`grid`: [H, W], for a caption: `Caption.attention`, (T, L)). Weights are rounded to
WEIGHT_DIGITS decimals, about 6 bytes of JSON each: a request whose answer could carry more
weights than the server's `max_attention` (1,000,000 by default, ~6 MiB) is refused before any
search (`endpoint.ModelEndpoint.check_attention`).

A translation asked for `"attention": "all"` also holds `"attentions"`: every attention behind
it by kind, layer and head (`Translation.attentions`), `{"encoder": [layer][head][row][column],
"decoder": …, "cross": …, "source": […], "target": […], "inputs": […], "memory": […]}`, the
encoder's maps over `source` × `source`, the decoder's over `target` × `inputs`, the
cross-attention's over `target` × `memory`; counted within `max_attention` too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import Tensor

from seqtasks.attention.recording import KINDS

WEIGHT_DIGITS = 4


def weights(attention: Tensor | None) -> list[list[float]]:
    """A (rows, columns) attention matrix as rows of rounded floats ([] for none)."""
    if attention is None:
        return []
    return [[round(w, WEIGHT_DIGITS) for w in row] for row in attention.float().tolist()]


def result(found: Any, **extra: Any) -> dict[str, Any]:
    """One result's answer: its text and score, its `alternatives` alike, and `extra`."""
    return {
        "text": found.text,
        "score": float(found.score),
        "alternatives": [{"text": a.text, "score": float(a.score)} for a in found.alternatives],
        **extra,
    }


def attention(matrix: Tensor | None, rows: Sequence[str], **over: Any) -> dict[str, Any]:
    """The attention behind a result: its `weights`, the output pieces of its `rows`, and what
    each row is over (`columns`: source pieces, or `grid`: [H, W] image cells)."""
    return {"weights": weights(matrix), "rows": list(rows), **over}


def every_attention(found: Any) -> dict[str, Any]:
    """A result's `attentions` (`tasks.attentions.Attentions`) as the answer holds them: each
    kind's maps as [layer][head] matrices of rounded weights, and the pieces they are over."""
    maps = found.attentions
    return {
        **{
            kind: [[weights(head) for head in layer] for layer in maps.layers(kind)]
            for kind in KINDS
        },
        "source": maps.source,
        "target": maps.target,
        "inputs": maps.inputs,
        "memory": maps.memory,
    }
