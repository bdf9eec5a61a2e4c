"""POST /translate: `seqtasks serve`'s endpoint for translation models, its request body and
its answer.

No `from __future__ import annotations` here: LitServe hands `decode_request`'s annotation to
FastAPI as the request body's type, and FastAPI reads the request's field types, as objects,
not strings.
"""

from dataclasses import dataclass
from typing import Any

from pydantic import Field, field_validator

from seqtasks.data.text import check_text
from seqtasks.data.tokenizer import EOS_ID
from seqtasks.search.settings import SearchSettings
from seqtasks.serving import answers
from seqtasks.serving.batching import Job, RequestError
from seqtasks.serving.endpoint import ModelEndpoint
from seqtasks.serving.requests import SearchRequest, attention_flag


class TranslateRequest(SearchRequest):
    """`{"sentences": ["Ein Hund rennt."], "beam": 5, "n_best": 1, "attention": false}`: raw
    sentences; `attention` adds each best translation's attention matrix and pieces."""

    sentences: list[str] = Field(min_length=1)
    attention: bool = attention_flag()

    @field_validator("sentences")
    @classmethod
    def valid_text(cls, sentences: list[str]) -> list[str]:
        for i, sentence in enumerate(sentences):
            check_text(sentence, f"sentence {i}")
        return sentences


@dataclass
class Attended:
    """A translation with the source pieces its attention's columns stand for."""

    translation: Any  # seqtasks.translation.translator.Translation, its attention kept
    source_pieces: list[str]


class TranslateEndpoint(ModelEndpoint):
    """POST /translate `{"sentences": [...], "beam": 5, "n_best": 1}` (beam and n_best: the
    checkpoint's unless given) -> `{"results": [{"text": ..., "score": ..., "alternatives":
    [...]}, ...]}`, one per sentence, in order; with `"attention": true` each also has its
    `attention` over the source's pieces (`answers`)."""

    path = "/translate"
    unit = "subwords"
    title, prompt, action = "Translation", "Sentence to translate", "Translate"

    def decode_request(self, request: TranslateRequest) -> Job | RequestError:
        return super().decode_request(request)

    def read(self, index: int, sentence: str) -> tuple[list[int], int]:
        """The sentence read once, into the subword ids the model searches from."""
        ids = self.model.task.src_tokenizer.encode(sentence.strip())
        return ids, len(ids)

    def search_settings(self, request: TranslateRequest) -> SearchSettings:
        """The model's, with the request's beam and n_best, reading at most the server's
        `max_length` subwords of a source."""
        settings = super().search_settings(request)
        return settings.override(max_length=self.limits.max_length)

    def run(self, inputs: list[list[int]], settings: SearchSettings, attention: bool) -> list[Any]:
        model = self.model
        found = model.translations(
            model.search_sources(inputs, settings, attention=attention), settings.n_best
        )
        if not attention:
            return found
        pieces = model.task.src_tokenizer.pieces
        return [Attended(t, pieces([*ids, EOS_ID])) for t, ids in zip(found, inputs, strict=True)]

    def answer(self, found: Any) -> dict[str, Any]:
        """A translation's answer; with its attention when it is `Attended`."""
        if not isinstance(found, Attended):
            return answers.result(found)
        best, columns = found.translation, found.source_pieces
        weights = answers.attention(best.attention, best.tokens, columns=columns)
        return answers.result(best, attention=weights)
