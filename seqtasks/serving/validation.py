"""The answers to bodies FastAPI refuses before any endpoint sees them, written so that they
cannot fail.

FastAPI's own 422 echoes each problem's input back through `jsonable_encoder` and a strict
JSON writer, which fails (and answers 500) for input JSON cannot carry: `NaN` or `Infinity`
(Python's JSON reader accepts them), invalid UTF-8 sent as a form, a lone surrogate in a key,
an array nested 950 deep. It also echoes all of a large body, once per problem. Here each
problem keeps its `loc`, `msg` and `type` (and a short `ctx`), with an `input` that is a JSON
value only when it is short and safe, otherwise a short ASCII repr; at most MAX_PROBLEMS are
listed. A body that the JSON reader itself cannot read (FastAPI's 400 "There was an error
parsing the body") is answered with what is wrong and what to send instead.
"""

from __future__ import annotations

import logging
import math
import reprlib
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from seqtasks.serving.requests import SEND_JSON, unreadable_body

log = logging.getLogger(__name__)

MAX_PROBLEMS = 20
MAX_TEXT = 100  # characters of an input, a key or a ctx value
SEND_IMAGE = "send an image with its own Content-Type (image/png, image/jpeg …), or a form"
FALLBACK = [{"loc": ["body"], "msg": "the body is not a valid request", "type": "invalid"}]

_repr = reprlib.Repr()
_repr.maxlevel, _repr.maxstring, _repr.maxother = 3, MAX_TEXT // 2, MAX_TEXT // 2
_repr.maxlist = _repr.maxtuple = _repr.maxdict = _repr.maxset = 4


def short_text(text: str, limit: int = MAX_TEXT) -> str:
    """`text` cut to `limit` characters, with lone surrogates written as `\\udXXX` escapes:
    a string any JSON writer takes."""
    clipped = text if len(text) <= limit else text[:limit] + "…"
    return clipped.encode("utf-8", "backslashreplace").decode("utf-8")


def short_value(value: Any) -> Any:
    """`value` itself if it is a short, JSON-safe scalar; otherwise a short ASCII repr (nested
    lists and dicts a few levels deep at most, bytes by their size and first bytes)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int) and abs(value) < 2**53:
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    if isinstance(value, str):
        return short_text(value)
    if isinstance(value, (bytes, bytearray)):
        return f"{len(value)} bytes: {bytes(value[: MAX_TEXT // 2])!r}"
    try:
        return short_text(_repr.repr(value))  # repr escapes lone surrogates
    except Exception:  # an integer too long to write, a repr that fails, …
        return f"<{type(value).__name__}>"


def problem(error: dict[str, Any]) -> dict[str, Any]:
    """One of pydantic's problems, JSON-safe and short: its loc, msg, type, input and ctx."""
    answer = {
        "type": short_text(str(error.get("type", "invalid"))),
        "loc": [p if isinstance(p, int) else short_text(str(p)) for p in error.get("loc", ())],
        "msg": short_text(str(error.get("msg", "")), 4 * MAX_TEXT),
        "input": short_value(error.get("input")),
    }
    ctx = error.get("ctx")
    if isinstance(ctx, dict):
        kept = {
            short_text(str(k)): short_value(v)
            for k, v in ctx.items()
            if not isinstance(v, BaseException)  # its message is already in msg
        }
        if kept:
            answer["ctx"] = kept
    return answer


def problems(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The first MAX_PROBLEMS of `errors`, and a note of how many more there are."""
    listed = [problem(error) for error in errors[:MAX_PROBLEMS]]
    if len(errors) > MAX_PROBLEMS:
        more = len(errors) - MAX_PROBLEMS
        listed.append({"type": "too_many_errors", "loc": ["body"], "msg": f"and {more} more"})
    return listed


async def validation_error_answer(request: Request, error: RequestValidationError) -> JSONResponse:
    """422 with the problems of a body FastAPI refused; never fails."""
    try:
        return JSONResponse({"detail": problems(list(error.errors()))}, status_code=422)
    except Exception:
        log.exception("the problems of a refused body could not be written; answering without")
        return JSONResponse({"detail": FALLBACK}, status_code=422)


async def http_error_answer(request: Request, error: HTTPException) -> Any:
    """FastAPI's answer to an HTTPException, except that a body its JSON reader could not read
    gets 400 with what is wrong with it (FastAPI says only "There was an error parsing the
    body")."""
    reason = None
    if error.status_code == 400 and error.__cause__ is not None:
        send = SEND_IMAGE if request.url.path == "/caption" else SEND_JSON
        reason = unreadable_body(error.__cause__, send)
    if reason is None:
        return await http_exception_handler(request, error)
    return JSONResponse({"detail": reason}, status_code=400)


def install(app: FastAPI) -> None:
    """Answer refused bodies on `app` as this module does."""
    app.add_exception_handler(RequestValidationError, validation_error_answer)
    app.add_exception_handler(HTTPException, http_error_answer)
