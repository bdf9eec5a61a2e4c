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
from seqtasks.serving.requests import AttentionChoice, SearchRequest


class TranslateRequest(SearchRequest):
    """`{"sentences": ["Ein Hund rennt."], "beam": 5, "n_best": 1, "attention": false}`: raw
    sentences; `attention` true adds each best translation's attention matrix and pieces, "all"
    every attention behind it as well, by layer and head."""

    sentences: list[str] = Field(min_length=1)
    attention: AttentionChoice = False

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
    takes_attention = "all"  # the page asks for every attention, to pick a layer and head
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

    def run(
        self, inputs: list[list[int]], settings: SearchSettings, attention: bool | str
    ) -> list[Any]:
        model = self.model
        nbests = model.search_sources(inputs, settings, attention=bool(attention))
        found = model.translations(nbests, settings.n_best)
        if not attention:
            return found
        if attention == "all":  # the best translation's, read by one more pass
            best = [None if nbest is None else nbest[:1] for nbest in nbests]
            model.attach_attentions(
                inputs, best, found, lambda i, t: model.attention_names(inputs[i], t)
            )
        pieces = model.task.src_tokenizer.pieces
        return [Attended(t, pieces([*ids, EOS_ID])) for t, ids in zip(found, inputs, strict=True)]

    def answer(self, found: Any) -> dict[str, Any]:
        """A translation's answer; with its attention when it is `Attended`."""
        if not isinstance(found, Attended):
            return answers.result(found)
        best, columns = found.translation, found.source_pieces
        weights = answers.attention(best.attention, best.tokens, columns=columns)
        if best.attentions is None:
            return answers.result(best, attention=weights)
        return answers.result(best, attention=weights, attentions=answers.every_attention(best))
