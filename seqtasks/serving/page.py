"""`GET /`: one self-contained page (`static/`: HTML, CSS and JavaScript shipped in the package,
put together here into one answer that needs nothing from the internet), and `GET /models`,
what the page learns of the models the server holds.

The page is the same whatever is served, and names no task: its script asks `/models` (with the
key typed into it; a client without the key learns nothing of the models) and builds a section
for each task served from its endpoint's form (`ModelEndpoint.form`: its path, whether it reads
text or an image, its labels), with its models' names, an example input, and the models' own
search settings, which a request leaves to the model unless its user changes them. It asks for
the attention weights where the models give them, and draws each answer (`answers`, one shape
for every endpoint) by what it holds: a heat map for attention over source pieces, each word's
weights over the photo for attention over an image grid, a tree for a `tree`.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from importlib.resources import files
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from fastapi.responses import HTMLResponse, JSONResponse, Response

if TYPE_CHECKING:
    from seqtasks.serving.endpoint import Limits
    from seqtasks.serving.served import Served

STATIC = files("seqtasks.serving") / "static"
SCRIPTS = ("views.js", "sections.js")  # one script: how answers are drawn, then the sections
# The page's icon, also at /favicon.ico: a browser asks for one on every load.
ICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" '
    'rx="3" fill="#1a5fb4"/><path d="M3 11h10M3 7h6" stroke="#fff" stroke-width="2"/></svg>'
)


def render() -> str:
    """The page, its CSS, script and icon inline."""
    html = (STATIC / "index.html").read_text(encoding="utf-8")
    parts = {
        "/*CSS*/": (STATIC / "page.css").read_text(encoding="utf-8"),
        "/*JS*/": "\n".join((STATIC / name).read_text(encoding="utf-8") for name in SCRIPTS),
        "/*ICON*/": "data:image/svg+xml," + ICON.replace("#", "%23").replace('"', "'"),
    }
    return re.sub(r"/\*(CSS|JS|ICON)\*/", lambda m: parts[m.group(0)], html)


def describe(
    groups: dict[str, Served], limits: Limits, forms: dict[str, dict[str, str]]
) -> dict[str, Any]:
    """What `GET /models` answers: for each task served, its endpoint's form (`form`: its
    path, whether it reads text or an image, its heading and labels:
    `ModelEndpoint.form`), its models' names (never their paths: `served.model_name`), an
    example input (None where the training data's was not recorded), their own search
    settings (None where not recorded: the page then leaves them to the model without showing
    them), whether a request may ask for their attention (the models give it and the endpoint
    takes it), and the limits of a request."""
    return {
        task: {
            "form": forms[task],
            "models": served.names,
            "example": served.example,
            "search": None if served.search is None else {**served.search, "n_best": 1},
            "attention": served.attention and forms[task]["attention"],
            "limits": asdict(limits),
        }
        for task, served in groups.items()
    }


def install(app: FastAPI, models: dict[str, Any]) -> None:
    """Serve the page at GET / (in place of LitServe's "litserve running"), its icon at
    GET /favicon.ico, and `models` (`describe`) at GET /models."""
    page = render()
    app.router.routes[:] = [
        route
        for route in app.router.routes
        if not (getattr(route, "path", None) == "/" and "GET" in getattr(route, "methods", ()))
    ]

    async def index() -> HTMLResponse:
        return HTMLResponse(page)

    async def icon() -> Response:
        return Response(ICON, media_type="image/svg+xml")

    async def served() -> JSONResponse:
        return JSONResponse(models)

    app.add_api_route("/", index, methods=["GET"], include_in_schema=False)
    app.add_api_route("/favicon.ico", icon, methods=["GET"], include_in_schema=False)
    app.add_api_route("/models", served, methods=["GET"], include_in_schema=False)
