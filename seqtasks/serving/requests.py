"""What clients send to /translate and /parse: JSON bodies that FastAPI checks against these
models in the HTTP process, before anything is queued for a model. A body that is not JSON, a
missing or misspelt field, a wrong type (`"sentences": "a string"`, `[1, 2]`), an empty list or
a beam out of range is answered there with 422 and FastAPI's account of each problem; limits set
on the command line (sentences per request, their length) are checked by the endpoint. JSON sent
without its Content-Type (as `curl -d` sends it) is read all the same.

This module must not use `from __future__ import annotations`: FastAPI reads the field types
(and LitServe the `decode_request` annotation) as objects, not strings.
"""

import json

from pydantic import BaseModel, ConfigDict, Field, model_validator

MAX_BEAM = 16


def search_width(default: int) -> int:
    """A beam or n-best size field: a JSON integer from 1 to MAX_BEAM (not "5", 5.5 or true)."""
    return Field(default, strict=True, ge=1, le=MAX_BEAM)


class SearchRequest(BaseModel):
    """Search settings every endpoint takes: `beam` and how many results of it (`n_best`)."""

    model_config = ConfigDict(extra="forbid")

    beam: int
    n_best: int = search_width(1)

    @model_validator(mode="before")
    @classmethod
    def json_whatever_its_content_type(cls, data: object) -> object:
        """Read a JSON body sent without `Content-Type: application/json` (as `curl -d` sends
        it), which FastAPI hands over as text; other text is refused saying what to send."""
        if isinstance(data, (str, bytes)):
            try:
                return json.loads(data)
            except ValueError:
                raise ValueError(
                    "the body is not a JSON object: send one, with Content-Type: application/json"
                ) from None
        return data

    @model_validator(mode="after")
    def n_best_within_beam(self) -> "SearchRequest":
        if self.n_best > self.beam:
            raise ValueError(f"n_best ({self.n_best}) cannot exceed beam ({self.beam})")
        return self


class TranslateRequest(SearchRequest):
    """`{"sentences": ["Ein Hund rennt."], "beam": 5, "n_best": 1}`: raw sentences."""

    sentences: list[str] = Field(min_length=1)
    beam: int = search_width(5)


class ParseRequest(SearchRequest):
    """`{"sentences": ["He left ."], "beam": 10}`: each sentence a string (split into PTB
    tokens) or a list of tokens (taken as they are)."""

    sentences: list[str | list[str]] = Field(min_length=1)
    beam: int = search_width(10)


class CaptionSettings(SearchRequest):
    """The form fields an image upload may carry beside the image (`beam`, `n_best`)."""

    beam: int = search_width(3)
