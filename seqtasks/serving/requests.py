"""What clients send to the endpoints (each task's request is in its `endpoint.py`): JSON bodies
that FastAPI checks against these models in the HTTP process, before anything is queued for a
model. A body that is not JSON, a
missing or misspelt field, a wrong type (`"sentences": "a string"`, `[1, 2]`), an empty list, a
beam out of range, text that is not valid Unicode (a lone `\\ud800` escape) or a token that
cannot be a leaf of a tree (empty, or holding white space) is answered there with 422 and an
account of each problem (`validation`); limits set on the command line (sentences per request,
their length) are checked by the endpoint. JSON sent without its Content-Type (as `curl -d`
sends it) is read all the same.

This module must not use `from __future__ import annotations`: FastAPI reads the field types
(and LitServe the `decode_request` annotation) as objects, not strings.
"""

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, model_validator

MAX_BEAM = 16
SEND_JSON = "send a JSON object, with Content-Type: application/json"


def search_width() -> int | None:
    """A beam or n-best size field: a JSON integer from 1 to MAX_BEAM (not "5", 5.5 or true),
    or none for the model's."""
    return Field(None, strict=True, ge=1, le=MAX_BEAM)


def unreadable_body(error: BaseException, send: str = SEND_JSON) -> str | None:
    """What is wrong with a body that JSON cannot read because of `error`, and what to `send`
    instead; None for an error that says nothing about the body."""
    if isinstance(error, UnicodeDecodeError):
        return f"the body is not valid UTF-8 (byte {error.start}): {send}"
    if isinstance(error, RecursionError):
        return f"the body nests arrays or objects too deeply to be read: {send}"
    if isinstance(error, json.JSONDecodeError):
        return f"the body is not a JSON object ({error.msg}): {send}"
    if isinstance(error, ValueError):  # "Exceeds the limit (4300 digits) for integer string …"
        return f"the body is not a JSON object ({str(error).partition(':')[0][:100]}): {send}"
    return None


class SearchRequest(BaseModel):
    """Search settings every endpoint takes: `beam` and how many results of it (`n_best`),
    each the model's when not given (the endpoint refuses an n_best over the beam)."""

    model_config = ConfigDict(extra="forbid")

    beam: int | None = search_width()
    n_best: int | None = search_width()

    @model_validator(mode="before")
    @classmethod
    def json_whatever_its_content_type(cls, data: object) -> object:
        """Read a JSON body sent without `Content-Type: application/json` (as `curl -d` sends
        it), which FastAPI hands over as bytes; other bodies are refused saying what to send."""
        if not isinstance(data, (str, bytes)):
            return data
        try:
            text = data.decode("utf-8") if isinstance(data, bytes) else data
            return json.loads(text)
        except (ValueError, RecursionError) as error:
            raise ValueError(unreadable_body(error)) from None


def attention_flag() -> bool:
    """Whether the answer carries attention weights: a JSON true or false (not 1 or "true")."""
    return Field(False, strict=True)


# `attention_flag`'s JSON true or false, or "all": every attention by layer and head as well
AttentionChoice = StrictBool | Literal["all"]
