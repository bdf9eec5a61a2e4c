"""POST /parse: `seqtasks serve`'s endpoint for parsing models, its request body and its
answer.

No `from __future__ import annotations` here: LitServe hands `decode_request`'s annotation to
FastAPI as the request body's type, and FastAPI reads the request's field types, as objects,
not strings.
"""

from typing import Any

from pydantic import Field, field_validator

from seqtasks.data.text import check_text
from seqtasks.parsing.ptb_text import check_tokens
from seqtasks.search.settings import SearchSettings
from seqtasks.serving import answers
from seqtasks.serving.batching import Job, RequestError
from seqtasks.serving.endpoint import ModelEndpoint
from seqtasks.serving.requests import SearchRequest


class ParseRequest(SearchRequest):
    """`{"sentences": ["He left ."], "beam": 10}`: each sentence a string (split into PTB
    tokens) or a list of tokens (taken as they are, so each must be a word: not empty, and
    without white space)."""

    sentences: list[str | list[str]] = Field(min_length=1)

    @field_validator("sentences")
    @classmethod
    def valid_words(cls, sentences: list[str | list[str]]) -> list[str | list[str]]:
        for i, sentence in enumerate(sentences):
            if isinstance(sentence, str):
                check_text(sentence, f"sentence {i}")
                continue
            for j, token in enumerate(sentence):
                check_text(token, f"sentence {i}, token {j}")
            check_tokens(sentence, f"sentence {i}")
        return sentences


def nested(tree: Any) -> list[Any]:
    """An nltk tree as JSON: `[label, child, …]`, a leaf (a word) as its string, so that a
    client draws the words the parser read without splitting the bracket string again (a word
    may hold characters a client reads as space, such as U+FEFF in JavaScript)."""
    return [tree.label(), *(nested(c) if hasattr(c, "label") else str(c) for c in tree)]


class ParseEndpoint(ModelEndpoint):
    """POST /parse `{"sentences": [...], "beam": 10}` (beam and n_best: the checkpoint's unless
    given) -> `{"results": [{"text": "(TOP (S ...))", "score": ..., "alternatives": [...],
    "tree": [...], "repairs": 0}, ...]}`, one per sentence, in order: each tree on one line
    and as nested lists (`nested`), and how many edits the constrained decoder made to its
    bracket sequence (`repairs`)."""

    path = "/parse"
    unit = "words"
    title, prompt, action = "Parsing", "Sentence to parse", "Parse"
    takes_attention = False

    def decode_request(self, request: ParseRequest) -> Job | RequestError:
        return super().decode_request(request)

    def read(self, index: int, sentence: str | list[str]) -> tuple[list[str], int]:
        try:
            words = self.model.tokens(sentence, index)
        except (TypeError, ValueError) as error:  # not text, or a token that is no word
            raise RequestError(422, str(error)) from None
        return words, len(words)

    def run(self, inputs: list[list[str]], settings: SearchSettings, attention: bool):
        return self.model.parse(inputs, settings=settings)

    def answer(self, found: Any) -> dict[str, Any]:
        return answers.result(found, tree=nested(found.tree), repairs=int(found.repairs))
