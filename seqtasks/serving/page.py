"""`GET /`: one self-contained page for the tasks a server holds (`static/`: HTML, CSS and
JavaScript shipped in the package, put together here into one answer that needs nothing from
the internet). The page sends its requests to this server's endpoints, asking for the attention
weights (`answers`), and draws them: a heat map of target × source pieces for /translate, each
word's weights over the photo for /caption, the tree for /parse.

The HTML holds a section per task between `<!--task:NAME-->` and `<!--/task:NAME-->`; the
sections of tasks not served are cut out, and the served tasks' names are given to the script.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from importlib.resources import files

from fastapi import FastAPI
from fastapi.responses import HTMLResponse

STATIC = files("seqtasks.serving") / "static"


def render(tasks: Iterable[str]) -> str:
    """The page for `tasks` (names of `seqtasks.registry.TASKS`), its CSS and script inline."""
    served = sorted(tasks)
    html = (STATIC / "index.html").read_text(encoding="utf-8")
    for task in re.findall(r"<!--task:(\w+)-->", html):
        if task not in served:
            html = re.sub(rf"<!--task:{task}-->.*?<!--/task:{task}-->\n?", "", html, flags=re.S)
    names = json.dumps(served).replace("<", "\\u003c")
    parts = {
        "/*CSS*/": (STATIC / "page.css").read_text(encoding="utf-8"),
        "/*JS*/": (STATIC / "page.js").read_text(encoding="utf-8"),
        "/*TASKS*/": names,
    }
    return re.sub(r"/\*(CSS|JS|TASKS)\*/", lambda m: parts[m.group(0)], html)


def install(app: FastAPI, tasks: Iterable[str]) -> None:
    """Serve the page of `tasks` at GET / (in place of LitServe's "litserve running")."""
    page = render(tasks)
    app.router.routes[:] = [
        route
        for route in app.router.routes
        if not (getattr(route, "path", None) == "/" and "GET" in getattr(route, "methods", ()))
    ]

    async def index() -> HTMLResponse:
        return HTMLResponse(page)

    app.add_api_route("/", index, methods=["GET"], include_in_schema=False)
