"""How many calls a search setting passes on its way to the search loop (issue 39's bars: POST
/translate in at most 6 from the endpoint's `predict`, the Python API in at most 5), counted on
the real stack: the functions of seqtasks between the entry and `beam_search`, each a call.
A layer added on the way (a wrapper, a second model method) fails here."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

import seqtasks
from seqtasks.search import beam
from seqtasks.serving.endpoint import Limits
from seqtasks.translation.endpoint import TranslateEndpoint, TranslateRequest

REPO = Path(__file__).resolve().parents[2]
CHECKPOINT = REPO / "tests" / "fixtures" / "pre_redesign" / "translation_transformer.ckpt"
PACKAGE = str(REPO / "seqtasks")


def calls_to_beam_search(monkeypatch, entry: str, action) -> list[str]:
    """The seqtasks functions on the stack from `entry` to the call of `beam_search`, when
    `action` runs, outermost first (the entry, then each function it called on the way)."""
    seen: list[list[str]] = []
    search = beam.beam_search

    def recording(*args, **kwargs):
        frames = inspect.stack()[1:]  # beam_search's callers, innermost first
        names = [f.frame.f_code.co_qualname for f in frames if f.filename.startswith(PACKAGE)]
        seen.append(names[: names.index(entry) + 1][::-1] if entry in names else names)
        return search(*args, **kwargs)

    monkeypatch.setattr("seqtasks.search.by_settings.beam_search", recording)
    action()
    assert seen, "beam_search was never called"
    return seen[0]


@pytest.fixture(scope="module")
def endpoint() -> TranslateEndpoint:
    api = TranslateEndpoint([str(CHECKPOINT)], Limits(), 1, max_batch_size=4, batch_timeout=0.0)
    api.setup("cpu")
    return api


def test_post_translate_reaches_the_search_loop_in_six_calls(endpoint, monkeypatch):
    job = endpoint.decode_request(TranslateRequest(sentences=["1 January 2000"], beam=3))
    path = calls_to_beam_search(
        monkeypatch, "BatchedEndpoint.predict", lambda: endpoint.predict([job])
    )
    assert path[0] == "BatchedEndpoint.predict", path
    assert len(path) <= 6, path  # each name calls the next; the last calls beam_search


def test_the_api_reaches_the_search_loop_in_five_calls(monkeypatch):
    model = seqtasks.load(CHECKPOINT, device="cpu")
    path = calls_to_beam_search(
        monkeypatch, "Translator.translate", lambda: model.translate(["1 January 2000"], beam=3)
    )
    assert path[0] == "Translator.translate", path
    assert len(path) <= 5, path
