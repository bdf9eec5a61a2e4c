"""Who may use the server.

With an API key (`LIT_SERVER_API_KEY`), a request to any route but the page's own files (`GET /`
and its icon) answers 401 unless its `X-API-Key` header holds the key, compared in constant time
(`hmac.compare_digest`), before its body is read, a route is looked up or anything is said of
what the server holds (`KeyCheck`, the outermost layer of the app). A key that is set but empty
(`LIT_SERVER_API_KEY=`, as `$KEY` gives with KEY unset) would leave the server open without a
word: `server_key` refuses it unless an open server is asked for (`seqtasks serve --open`).

FastAPI's generated pages (`/docs`, `/redoc`) load their scripts from a CDN, though the page
promises that nothing leaves the machine, and `/openapi.json` would describe the API to anyone:
the server is built without them (`server.build_server`); docs/serving.md describes the API.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the command's parser imports this module: no FastAPI before it is needed
    from fastapi import FastAPI

KEY_VARIABLE = "LIT_SERVER_API_KEY"  # LitServe's name for it, which its users know
PUBLIC = {"/", "/favicon.ico"}  # the page's own files, which say nothing of the models


class ServerKeyError(ValueError):
    """A key the server must not start with: `error: <message>`, status 2."""


def server_key(environ: Mapping[str, str], open_server: bool) -> str | None:
    """The key requests must send (None: the server is open), from `environ`.

    Raises:
        ServerKeyError: for a key that is set but empty or blank, unless `open_server` asks for an
            open server; and for `open_server` with a key set (which of the two is meant?).
    """
    key = environ.get(KEY_VARIABLE)
    if key is not None and not key.strip():
        if open_server:
            return None
        raise ServerKeyError(
            f"{KEY_VARIABLE} is set but empty, which would serve without a key: set it to the "
            "key, unset it, or pass --open to serve without one"
        )
    if key is not None and open_server:
        raise ServerKeyError(
            f"--open serves without a key, but {KEY_VARIABLE} sets one: unset it, or leave out "
            "--open"
        )
    return key


class KeyCheck:
    """ASGI middleware: an HTTP request to a route outside `PUBLIC` answers 401 unless its
    X-API-Key header is `key`, before anything else of the app sees it."""

    def __init__(self, app, key: str):
        self.app = app
        self.key = key.encode("utf-8")

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or (
            scope["path"] in PUBLIC and scope["method"] in ("GET", "HEAD")
        ):
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or []).get(b"x-api-key", b"")
        if hmac.compare_digest(given, self.key):
            await self.app(scope, receive, send)
            return
        detail = (
            "this server needs its API key: send it in the X-API-Key header"
            if not given
            else "the X-API-Key header does not hold this server's key"
        )
        body = json.dumps({"detail": detail}).encode("utf-8")
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 401, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def install(app: FastAPI, key: str | None) -> None:
    """Put the app behind `key` (None: leave it open): the outermost middleware, so that
    LitServe's own layers, the routes and the validation answers come after it."""
    if key is not None:
        app.add_middleware(KeyCheck, key=key)
