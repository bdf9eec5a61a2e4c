"""What `seqtasks serve` says of itself, without a server: the lines it writes while its workers
load and once it is ready (`startup`), the names it gives its models instead of their paths
(`served.model_name`), the port it listens on (`server.free_port`), and plain-text answers
ending with a newline (`plain`). tests/serving/test_serve.py checks them on a running server."""

from __future__ import annotations

import asyncio
import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from test_serve_requests import Worker

from seqtasks.serving import plain
from seqtasks.serving.served import model_name
from seqtasks.serving.server import free_port
from seqtasks.serving.startup import Startup, address, loopback
from seqtasks.serving.workers import wait_for_workers


class Clock:
    """A clock the test moves by hand."""

    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def startup(lines: list[str], clock: Clock) -> Startup:
    return Startup(
        {"translation": ["de-en", "de-en-2"], "parsing": ["wsj"]},
        {"translation": "/translate", "parsing": "/parse"},
        write=lines.append,
        clock=clock,
    )


def test_loading_is_said_at_once_then_every_so_often_naming_what_is_not_ready():
    lines: list[str] = []
    clock = Clock()
    said = startup(lines, clock)
    statuses = {"translate_0": "starting", "translate_1": "ready", "parse_0": "starting"}
    said.loading(statuses)
    assert lines == ["loading translation (de-en + de-en-2), parsing (wsj) in 3 worker processes"]
    for seconds in (5, 14.9):
        clock.now = 100 + seconds
        said.loading(statuses)
    assert len(lines) == 1  # nothing new before 15 s
    clock.now = 116
    said.loading({**statuses, "parse_0": "ready"})
    assert (
        lines[1] == "still loading after 16 s: translation (de-en + de-en-2): 1 of 2 workers ready"
    )
    clock.now = 125
    said.loading(statuses)
    clock.now = 131.5
    said.loading(statuses)
    assert lines[2:] == [
        "still loading after 32 s: translation (de-en + de-en-2): 1 of 2 workers ready; "
        "parsing (wsj): 0 of 1 worker ready"
    ]
    said.ready("http://127.0.0.1:8123")
    assert lines[3] == "ready on http://127.0.0.1:8123 (translation: de-en + de-en-2; parsing: wsj)"


def test_the_workers_wait_hands_each_look_to_the_progress_and_none_once_all_are_ready():
    looks: list[dict] = []
    states = iter(["starting", "starting", "ready"])

    class Statuses:  # LitServe's shared dict, its worker ready at the third look
        def items(self):
            return [("translate_0", next(states))]

    wait_for_workers(Statuses(), [Worker(True)], None, looks.append)
    assert looks == [{"translate_0": "starting"}] * 2


def test_the_ready_line_names_where_the_server_listens_and_asks_it_there():
    assert address("127.0.0.1", 8000) == "http://127.0.0.1:8000"
    assert address("::", 8000) == "http://[::]:8000"
    assert loopback("0.0.0.0", 8000) == "http://127.0.0.1:8000"
    assert loopback("::", 8000) == "http://[::1]:8000"


def test_models_are_named_by_what_they_are_never_by_their_path(tmp_path, monkeypatch):
    folder = tmp_path / "models" / "de-en"
    folder.mkdir(parents=True)
    run = tmp_path / "runs" / "transformer" / "lightning_logs" / "version_3" / "checkpoints"
    named = tmp_path / "runs" / "rnn" / "csv" / "version_0" / "checkpoints"
    plain_run = tmp_path / "runs" / "dates" / "checkpoints"
    for place in (run, named, plain_run):
        place.mkdir(parents=True)
    assert model_name(str(folder), folder) == "de-en"
    assert model_name(f"{folder}/", f"{folder}/") == "de-en"
    monkeypatch.chdir(folder)
    assert model_name(".", Path(".")) == "de-en"
    assert model_name("../de-en", Path("../de-en")) == "de-en"
    assert model_name("hf://org/de-en", tmp_path / "snapshots" / "0123abc") == "hf://org/de-en"
    assert model_name("hf://org/de-en@0123456789ab", folder) == "hf://org/de-en@0123456789ab"
    assert model_name(str(run / "last.ckpt"), run / "last.ckpt") == "last (transformer version_3)"
    assert model_name(str(named / "a.ckpt"), named / "a.ckpt") == "a (csv version_0)"
    step = plain_run / "epoch=0-step=2.ckpt"
    assert model_name(str(step), step) == "epoch=0-step=2 (dates)"
    assert model_name("translator.ckpt", Path("translator.ckpt")) == "translator"
    names = [
        model_name(str(p), p)
        for p in (folder, run / "last.ckpt", named / "a.ckpt", step, tmp_path / "t.ckpt")
    ]
    assert not [name for name in names if str(tmp_path) in name or "/" in name], names


def test_a_free_port_is_picked_for_0_and_a_taken_one_refused():
    port = free_port("127.0.0.1", 0)
    assert 1024 <= port <= 65535
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        with pytest.raises(OSError):
            free_port("127.0.0.1", port)
    assert free_port("127.0.0.1", port) == port  # free again


def answer(app, method: str = "GET") -> tuple[list[tuple[bytes, bytes]], bytes]:
    """The headers and body `app` (ASGI) sends for one request, asked in a thread of its own."""
    sent: list[dict] = []

    async def receive():
        return {"type": "http.request", "body": b""}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": method, "path": "/", "headers": []}
    with ThreadPoolExecutor(1) as thread:
        thread.submit(asyncio.run, plain.Lines(app)(scope, receive, send)).result()
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["headers"], body


def app_sending(headers: list[tuple[bytes, bytes]], *chunks: bytes):
    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for k, chunk in enumerate(chunks):
            more = k < len(chunks) - 1
            await send({"type": "http.response.body", "body": chunk, "more_body": more})

    return app


@pytest.mark.parametrize(
    "headers, chunks, body",
    [
        ([(b"content-length", b"2")], [b"ok"], b"ok\n"),  # LitServe's /health
        ([(b"content-type", b"text/plain")], [b"not ", b"ready"], b"not ready\n"),
        ([(b"content-type", b"text/plain; charset=utf-8")], [b"ok\n"], b"ok\n"),
        ([(b"content-type", b"application/json")], [b'{"a": 1}'], b'{"a": 1}'),
        ([(b"content-type", b"text/html; charset=utf-8")], [b"<p>x</p>"], b"<p>x</p>"),
        ([], [b""], b""),
    ],
    ids=["health", "chunked", "ended already", "json", "html", "empty"],
)
def test_plain_text_answers_end_with_a_newline_and_others_pass_as_they_are(headers, chunks, body):
    sent_headers, sent = answer(app_sending(headers, *chunks))
    assert sent == body
    found = dict(sent_headers)
    if b"content-length" in found:
        assert int(found[b"content-length"]) == len(body)
    if sent != b"".join(chunks):
        assert found[b"content-type"] == b"text/plain; charset=utf-8"


def test_a_head_answer_is_left_as_it_is():
    """It has no body to end, and its headers describe the GET answer's."""
    headers = [(b"content-length", b"2")]
    assert answer(app_sending(headers, b""), "HEAD") == (headers, b"")
