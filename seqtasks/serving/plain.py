"""Plain-text answers end with a newline. LitServe's GET /health answers `ok` or `not ready`
without one (and without a Content-Type), so `curl …/health` left the shell's prompt on the
same line and a script reading lines got none. An answer without a Content-Type, or a
text/plain one, gets a newline where its body has none, and says it is UTF-8 plain text; JSON,
HTML and the rest pass as they are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fastapi import FastAPI

TEXT = b"text/plain; charset=utf-8"


def is_plain(start: dict[str, Any]) -> bool:
    """Whether the answer `start` opens (an ASGI `http.response.start`) is plain text."""
    kind = dict(start.get("headers") or []).get(b"content-type")
    return kind is None or kind.lower().startswith(b"text/plain")


def ended(body: bytes) -> bytes:
    """`body` ending with a newline (an empty body stays empty)."""
    return body + b"\n" if body and not body.endswith(b"\n") else body


class Lines:
    """ASGI middleware: each plain-text answer's body gathered, ended with a newline, and sent
    with its length; a HEAD answer, which has no body, and every other answer as it comes."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] == "HEAD":
            await self.app(scope, receive, send)
            return
        held: dict[str, Any] = {}

        async def send_ended(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start" and is_plain(message):
                held.update(start=message, body=b"")
                return
            if message["type"] != "http.response.body" or "start" not in held:
                await send(message)
                return
            held["body"] += message.get("body", b"")
            if message.get("more_body"):
                return
            body = ended(held["body"])
            start = held["start"]
            headers = [
                (name, value)
                for name, value in start.get("headers") or []
                if name not in (b"content-length", b"content-type")
            ]
            headers += [(b"content-type", TEXT), (b"content-length", b"%d" % len(body))]
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, send_ended)


def install(app: FastAPI) -> None:
    """End the app's plain-text answers with a newline (`Lines`)."""
    app.add_middleware(Lines)
