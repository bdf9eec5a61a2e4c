"""`seqtasks serve` (seqtasks.serving): the batching logic on its own, then a real server in
subprocesses on tiny checkpoints, spoken to over HTTP with urllib.

One server runs for the module, with a translation ensemble (the same checkpoint twice), a
parser and a captioner; its answers must equal what `seqtasks.load(...)` gives for the same
inputs, under concurrency and beside bad requests, which get a 4xx of their own.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest
import torch
import yaml
from browser import chromium, screenshot, tab_to, unnamed, wait_for_install
from conftest import load_script, subprocess_env, two_step_trainer
from test_serve_fuzz import bomb, fuzz_requests, fuzz_seed

import seqtasks
from seqtasks.captioning.uploads import UploadError, read_upload
from seqtasks.cli.export import main as export
from seqtasks.cli.serve import main
from seqtasks.serving.batching import BatchedEndpoint, Job, RequestError
from seqtasks.serving.page import render
from seqtasks.serving.server import ServerSettings, build_server

LIMITS = ["--max-sentences", "8", "--max-chars", "200", "--max-length", "30"]
LIMITS += ["--max-attention", "5000"]
KEY = "s3cret-k3y"  # the module's server is started with it, as LIT_SERVER_API_KEY
SENTENCES = [
    "Ein Hund rennt durch den Schnee.",
    "Zwei Männer spielen Fußball.",
    "Eine Frau liest ein Buch im Park.",
    "",
    "Kinder spielen am Strand.",
    "Ein Mann fährt Fahrrad.",
]


# ---- batching, without a server -------------------------------------------------------------
class Doubler(BatchedEndpoint):
    """An endpoint whose model doubles numbers (and fails on 13), recording its calls."""

    def __init__(self):
        super().__init__(max_batch_size=8)
        self.calls: list[tuple[list[int], int, int]] = []

    def check(self, request: dict) -> Job:
        if request.get("bad"):
            raise RequestError(413, "too big")
        return Job(request["x"], request["beam"], 1)

    def run(self, inputs: list[int], beam: int, n_best: int, attention: bool = False) -> list[int]:
        self.calls.append((inputs, beam, n_best))
        if 13 in inputs:
            raise RuntimeError("unlucky")
        return [2 * x + 100 * beam for x in inputs]

    def respond(self, results: list[int]) -> dict:
        return {"y": results}


def serve_batch(api: Doubler, requests: list[dict]) -> list:
    """What LitServe's batched loop does with a batch: decode each, batch, predict, unbatch."""
    return api.unbatch(api.predict(api.batch([api.decode_request(r) for r in requests])))


def test_one_model_call_per_beam_and_each_request_gets_its_own_slice():
    api = Doubler()
    requests = [
        {"x": [1, 2], "beam": 2},
        {"x": [3], "beam": 5},
        {"x": [0], "beam": 2, "bad": True},
        {"x": [4, 5, 6], "beam": 2},
        {"x": [7], "beam": 5},
    ]
    outputs = serve_batch(api, requests)
    assert sorted(api.calls) == [([1, 2, 4, 5, 6], 2, 1), ([3, 7], 5, 1)]
    assert outputs[0] == [202, 204] and outputs[1] == [506] and outputs[3] == [208, 210, 212]
    assert outputs[4] == [514]
    assert isinstance(outputs[2], RequestError) and outputs[2].status == 413
    response = api.encode_response(outputs[2])
    assert response.status_code == 413 and json.loads(response.body) == {"detail": "too big"}


def test_a_request_that_makes_the_model_fail_fails_alone():
    api = Doubler()
    outputs = serve_batch(
        api, [{"x": [1], "beam": 1}, {"x": [13], "beam": 1}, {"x": [2], "beam": 1}]
    )
    assert outputs[0] == [102] and outputs[2] == [104]
    assert isinstance(outputs[1], RequestError) and outputs[1].status == 500


def test_unbatched_predict_takes_and_returns_one_item():
    api = Doubler()
    api.max_batch_size = 1
    assert api.predict(api.decode_request({"x": [1, 2], "beam": 1})) == [102, 104]


def test_uploads_are_raw_images_or_forms():
    image = bytes(range(256)) * 4 + b"\r\n--"
    assert read_upload(image).image == image and read_upload(image).fields == {}
    form = (
        b'--XyZ\r\nContent-Disposition: form-data; name="beam"\r\n\r\n4\r\n'
        b'--XyZ\r\nContent-Disposition: form-data; name="image"; filename="a.png"\r\n'
        b"Content-Type: image/png\r\n\r\n" + image + b"\r\n--XyZ--\r\n"
    )
    upload = read_upload(form)
    assert upload.image == image and upload.fields == {"beam": "4"}
    with pytest.raises(UploadError, match="empty"):
        read_upload(b"")
    with pytest.raises(UploadError, match="one image file"):
        read_upload(b'--XyZ\r\nContent-Disposition: form-data; name="beam"\r\n\r\n4\r\n--XyZ--\r\n')


def test_the_endpoints_of_tasks_not_loaded_say_what_is_served():
    server = build_server({"parsing": ["parser.ckpt"]}, ServerSettings(device="cpu"))
    routes = {route.path: route for route in server.app.routes}
    assert "/parse" in routes
    for path, task in (("/translate", "translation"), ("/caption", "captioning")):
        response = asyncio.run(routes[path].endpoint())
        assert response.status_code == 404
        assert json.loads(response.body)["detail"].startswith(
            f"this server has no {task} model, so no {path}: it serves POST /parse."
        )


def test_a_task_whose_endpoint_cannot_be_imported_does_not_stop_a_server_of_others(
    monkeypatch, caplog
):
    """Every registered task not served gets a 404 route; one whose endpoint module is broken
    gets none, with a warning naming it, and the server of the other tasks is built."""
    from seqtasks import registry
    from seqtasks.serving import server as server_module

    broken = registry.TaskEntry("broken_task", "broken", task=".task.T", model=".model.M",
                                endpoint=".endpoint.Missing")  # fmt: skip
    monkeypatch.setattr(server_module, "tasks", lambda: {**registry.tasks(), "broken": broken})
    with caplog.at_level("WARNING", logger="seqtasks.serving.server"):
        server = build_server({"parsing": ["parser.ckpt"]}, ServerSettings(device="cpu"))
    routes = {route.path for route in server.app.routes}
    assert {"/parse", "/translate", "/caption"} <= routes
    assert "no route for the broken task: its endpoint .endpoint.Missing cannot be imported" in (
        caplog.text
    )


def test_an_outside_endpoint_at_a_path_another_task_answers_never_shadows_it(monkeypatch, caplog):
    """A task whose endpoint answers a path a served task answers (an outside package's
    POST /parse) gets no 404 route there, with a warning; served together, the two are refused
    in one line, before any worker starts."""
    from seqtasks import registry
    from seqtasks.serving import server as server_module

    twin = registry.TaskEntry(
        "seqtasks.parsing", "twin", ".task.ParsingTask", ".parser.Parser",
        endpoint=".endpoint.ParseEndpoint",
    )  # fmt: skip
    monkeypatch.setattr(server_module, "tasks", lambda: {**registry.tasks(), "twin": twin})
    with caplog.at_level("WARNING", logger="seqtasks.serving.server"):
        server = build_server({"parsing": ["parser.ckpt"]}, ServerSettings(device="cpu"))
    paths = [route.path for route in server.app.routes]
    assert paths.count("/parse") == 1
    assert "no route for the twin task: /parse is the parsing task's" in caplog.text
    with pytest.raises(ValueError, match="cannot serve twin and parsing together: both answer"):
        build_server({"parsing": ["a.ckpt"], "twin": ["b.ckpt"]}, ServerSettings(device="cpu"))


def test_command_line_errors_are_reported_before_anything_starts(tmp_path, capsys, monkeypatch):
    with pytest.raises(SystemExit):
        main([str(tmp_path / "missing.ckpt")])
    assert "argument MODEL: no such checkpoint or model folder: " in capsys.readouterr().err
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.ckpt").touch()  # there: the option at fault is the one refused
    with pytest.raises(SystemExit):
        main(["x.ckpt", "--port", "80"])
    assert "--port: must be from 1024 to 65535, got 80" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["x.ckpt", "--batch-timeout", "0"])
    assert "--batch-timeout must be > 0 with --max-batch-size > 1" in capsys.readouterr().err


# ---- tiny checkpoints -------------------------------------------------------------------------
def fit(root: Path, model: dict, data: dict) -> Path:
    """Train `model` on `data` for 2 steps with `seqtasks fit` in this process; its checkpoint."""
    from seqtasks.cli.main import main as seqtasks_main

    trainer = two_step_trainer(root)
    config = {"seed_everything": 0, "trainer": trainer, "model": model, "data": data}
    root.mkdir(parents=True)
    (root / "config.yaml").write_text(yaml.safe_dump(config))
    seqtasks_main(["fit", "--config", str(root / "config.yaml")])
    return sorted(root.glob("**/*.ckpt"))[-1]


def part(name: str, **init_args) -> dict:
    return {"class_path": name, "init_args": init_args}


TRANSFORMER = {"d_model": 16, "num_heads": 2, "ff_dim": 32, "num_layers": 1, "dropout": 0.0}
RNN = {"embed_dim": 8, "hidden_size": 8, "dropout": 0.0}


@pytest.fixture(scope="module")
def checkpoints(toy_data_dir, ptb_dir, tmp_path_factory, monkeypatch_module) -> dict[str, Path]:
    """A tiny Transformer translator, BiGRU + Bahdanau parser and shapes captioner."""
    monkeypatch_module.setattr(sys, "argv", ["seqtasks"])
    root = tmp_path_factory.mktemp("serve")
    trees = root / "ptb"
    trees.mkdir()
    for split, count in (("train", 40), ("dev", 6)):
        lines = (ptb_dir / f"{split}.mrg").read_text().splitlines()[:count]
        (trees / f"{split}.mrg").write_text("\n".join(lines) + "\n")
    shapes = {split: 4 for split in ("train", "val", "test", "holdout")}
    return {
        "images": root / "shapes" / "images",
        "translation": fit(
            root / "translation",
            part(
                "seqtasks.translation.task.TranslationTask",
                encoder=part("seqtasks.encoders.TransformerEncoder", **TRANSFORMER),
                decoder=part("seqtasks.decoders.TransformerDecoder", **TRANSFORMER),
                val_beam=1,
                test_beam=2,  # what a request without a beam gets
            ),
            part(
                "seqtasks.translation.data.TranslationData",
                data_dir=str(toy_data_dir),
                max_tokens=400,
            ),
        ),
        "parsing": fit(
            root / "parsing",
            part(
                "seqtasks.parsing.task.ParsingTask",
                encoder=part("seqtasks.encoders.RNNEncoder", **RNN),
                decoder=part("seqtasks.decoders.BahdanauDecoder", readout_dim=8, **RNN),
                val_beam=1,
            ),
            part(
                "seqtasks.parsing.data.ParsingData",
                data_dir=str(trees),
                test_split="dev",
                min_count=1,
            ),
        ),
        "captioning": fit(
            root / "captioning",
            part(
                "seqtasks.captioning.task.CaptioningTask",
                encoder=part("seqtasks.encoders.PatchEncoder", patch=8, channels=[8, 8]),
                decoder=part("seqtasks.decoders.SoftAttentionDecoder", embed_dim=8, hidden_size=8),
                val_beam=1,
                max_caption_length=6,
            ),
            part(
                "seqtasks.captioning.data.ShapesData",
                data_dir=str(root / "shapes"),
                level=1,
                counts=shapes,
            ),
        ),
    }


def test_ensemble_members_that_do_not_fit_are_refused_before_anything_starts(
    checkpoints, tmp_path, capsys
):
    """Checked in the command, not in a worker that would fail to load them."""
    stored = torch.load(checkpoints["translation"], map_location="cpu", weights_only=True)
    for entries in (stored["seqtasks"], stored["seqtasks_identity"]["fingerprints"]):
        entries["src_tokenizer"], entries["tgt_tokenizer"] = (
            entries["tgt_tokenizer"],
            entries["src_tokenizer"],
        )
    torch.save(stored, tmp_path / "swapped.ckpt")
    assert main([str(checkpoints["translation"]), str(tmp_path / "swapped.ckpt")]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: cannot ensemble") and "source tokenizer: " in error


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


# ---- servers ----------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(
    url: str,
    body: object = None,
    content_type: str | None = "application/json",
    key: str | None = None,
):
    """(status, answer) of a POST of `body` (bytes as they are, else as JSON), or of a GET when
    `body` is None, with `key` as X-API-Key if given; the answer parsed from JSON when it is
    JSON, else as text."""
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    headers = {"Content-Type": content_type} if content_type and data is not None else {}
    if key is not None:
        headers["X-API-Key"] = key
    request = urllib.request.Request(url, data=data, headers=headers)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=120) as response:
            status, text = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, text = error.code, error.read()
    try:
        return status, json.loads(text)
    except json.JSONDecodeError:
        return status, text.decode()


class Server:
    """`python -m seqtasks serve ARGS` on a free port (or on `port`: 0 lets it choose one, which
    `url` then does not know), its output in `log`; with `key`, started with it as
    LIT_SERVER_API_KEY, and asked with it (`get`, `post`)."""

    def __init__(
        self,
        args: list[str],
        folder: Path,
        key: str | None = None,
        port: int | None = None,
        log_level: str = "warning",
    ):
        port = free_port() if port is None else port
        self.url = f"http://127.0.0.1:{port}"
        self.key = key
        self.log = folder / "server.log"
        env = subprocess_env() | ({"LIT_SERVER_API_KEY": key} if key is not None else {})
        with open(self.log, "wb") as log:
            command = [sys.executable, "-m", "seqtasks", "serve", *args, "--log-level", log_level]
            self.process = subprocess.Popen(
                [*command, "--port", str(port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=folder,
                env=env,
                start_new_session=True,  # a process group of its own, to check it ends whole
            )

    def wait_until_healthy(self, timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"the server ended: {self.output()}"
            try:
                if self.get("/health")[0] == 200:
                    return
            except (urllib.error.URLError, ConnectionError):
                pass
            time.sleep(0.25)
        pytest.fail(f"no healthy server after {timeout} s: {self.output()}")

    def post(self, path: str, body: object, content_type: str | None = "application/json"):
        return call(self.url + path, body, content_type, self.key)

    def get(self, path: str):
        return call(self.url + path, key=self.key)

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def stop(self) -> int:
        """SIGTERM, as a service manager stops it; its exit status once every process it
        started has ended too (-9: something had to be killed)."""
        self.process.send_signal(signal.SIGTERM)
        try:
            status = self.process.wait(60)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:  # its HTTP, worker and manager processes
                os.killpg(self.process.pid, 0)
                time.sleep(0.2)
        except ProcessLookupError:
            return status
        except subprocess.TimeoutExpired:
            pass
        os.killpg(self.process.pid, signal.SIGKILL)
        return -9


@pytest.fixture(scope="module")
def server(checkpoints, tmp_path_factory):
    """A healthy server of the three tasks taking bodies up to 1 MiB; stopped with SIGTERM
    afterwards, which must end it cleanly. It serves the model folders exported from the
    checkpoints (the translator an ensemble of its checkpoint and its folder), and its answers
    are checked against `seqtasks.load` of the checkpoints."""
    folders = tmp_path_factory.mktemp("folders")
    for task in ("translation", "parsing", "captioning"):
        assert export([str(checkpoints[task]), "--to", "folder", str(folders / task)]) == 0
    translation = str(checkpoints["translation"])
    models = [translation, *(str(folders / task) for task in checkpoints if task != "images")]
    limits = [*LIMITS, "--batch-timeout", "0.05", "--max-payload-mb", "1"]
    started = Server([*models, *limits], tmp_path_factory.mktemp("server"), KEY)
    try:
        started.wait_until_healthy()
        yield started
    finally:
        status = started.stop()
    assert status == 0, f"SIGTERM ends the server cleanly: {started.output()}"


@pytest.fixture(scope="module")
def translator(checkpoints):
    translation = checkpoints["translation"]
    return seqtasks.load([translation, translation], device="cpu")


def expected(translations) -> list[dict]:
    return [{"text": t.text, "score": t.score} for t in translations]


def assert_same(answer: list[dict], reference: list[dict]) -> None:
    """Equal texts, and scores within float noise (batches of other sizes pad differently)."""
    assert [a["text"] for a in answer] == [r["text"] for r in reference]
    assert [a["score"] for a in answer] == pytest.approx([r["score"] for r in reference], abs=1e-4)


@pytest.mark.slow
def test_health_and_info_cover_every_endpoint(server):
    assert server.get("/health") == (200, "ok\n")  # a line, as curl shows it
    status, info = server.get("/info")
    assert status == 200 and sorted(info["model"]) == ["captioning", "parsing", "translation"]


@pytest.mark.slow
def test_no_answer_nor_the_page_names_where_the_models_are(server, checkpoints, tmp_path_factory):
    """/info, /models and the page name each model (a folder by its name, a checkpoint by its
    file's stem and run folder), never by its path: that would tell every client where the
    server keeps its files."""
    checkpoint = checkpoints["translation"]
    names = {
        "translation": [f"{checkpoint.stem} ({checkpoint.parent.parent.name})", "translation"],
        "parsing": ["parsing"],
        "captioning": ["captioning"],
    }
    assert server.get("/info")[1]["model"] == names
    assert {task: about["models"] for task, about in server.get("/models")[1].items()} == names
    answers = [json.dumps(server.get(path)[1]) for path in ("/info", "/models", "/health")]
    answers.append(call(server.url + "/")[1])
    root = str(tmp_path_factory.getbasetemp())
    assert not [text for text in answers if root in text or str(checkpoint.parent) in text]


@pytest.mark.slow
def test_translate_answers_as_the_python_api_does(server, translator):
    status, answer = server.post("/translate", {"sentences": SENTENCES, "beam": 3})
    assert status == 200, answer
    assert_same(answer["results"], expected(translator.translate(SENTENCES, beam=3)))

    status, answer = server.post("/translate", {"sentences": SENTENCES[:2], "beam": 3, "n_best": 2})
    reference = translator.translate(SENTENCES[:2], beam=3, n_best=2)
    assert status == 200, answer
    assert_same(answer["results"], expected(reference))
    for got, want in zip(answer["results"], reference):
        assert_same(got["alternatives"], expected(want.alternatives))


@pytest.mark.slow
def test_concurrent_requests_with_different_beams_each_get_their_own_results(server, translator):
    beams = (1, 2, 3)
    references = {
        beam: dict(zip(SENTENCES, expected(translator.translate(SENTENCES, beam=beam))))
        for beam in beams
    }
    rng = random.Random(0)
    requests = [
        {"sentences": rng.sample(SENTENCES, rng.randint(1, 3)), "beam": rng.choice(beams)}
        for _ in range(50)
    ]
    with ThreadPoolExecutor(50) as pool:
        answers = list(pool.map(lambda r: server.post("/translate", r), requests))
    for request, (status, answer) in zip(requests, answers):
        assert status == 200, answer
        reference = [references[request["beam"]][s] for s in request["sentences"]]
        assert_same(answer["results"], reference)


TOO_MANY = {"sentences": ["Ein Hund."] * 9}
TOO_LONG = {"sentences": ["Ein Hund.", " ".join("abcdefghijklmnopqrstuvwxyz") * 2]}
CURL_D = "application/x-www-form-urlencoded"  # what curl -d sends without -H 'Content-Type: …'
# read by Python's JSON reader (under `seqtasks serve`, whose stack is some 50 frames deep when
# it reads a body); its echo used to overflow
DEEP = b"[" * 900 + b"]" * 900
DEEP_FOR_ITS_CHECK = b"[" * 950 + b"]" * 950  # too deep for the body check's own JSON reading
DEEPER = b"[" * 5000 + b"]" * 5000  # more than the JSON reader reads


@dataclass(frozen=True)
class Bad:
    """A bad request, the status it must get and a piece of its `detail`."""

    path: str
    body: object  # a JSON value, or the bytes of the body
    status: int
    message: str
    content_type: str = "application/json"


BAD_REQUESTS = {
    "empty body": Bad("/translate", b"", 422, "Field required"),
    "invalid JSON": Bad("/translate", b'{"sentences": [', 422, "JSON decode error"),
    "a string": Bad("/translate", {"sentences": "Ein Hund."}, 422, "valid list"),
    "numbers": Bad("/translate", {"sentences": [1, 2]}, 422, "valid string"),
    "missing field": Bad("/translate", {"beam": 5}, 422, "Field required"),
    "misspelt field": Bad("/translate", {"sentences": ["a"], "beams": 2}, 422, "Extra inputs"),
    "empty list": Bad("/translate", {"sentences": []}, 422, "at least 1 item"),
    "beam 0": Bad("/translate", {"sentences": ["a"], "beam": 0}, 422, "greater than or equal"),
    "beam 17": Bad("/translate", {"sentences": ["a"], "beam": 17}, 422, "less than or equal"),
    "beam as text": Bad("/translate", {"sentences": ["a"], "beam": "5"}, 422, "valid integer"),
    "n_best over beam": Bad(
        "/translate",
        {"sentences": ["a"], "beam": 2, "n_best": 3},
        422,
        "n_best=3 cannot exceed beam=2",
    ),
    "n_best over the model's beam": Bad(
        "/translate", {"sentences": ["a"], "n_best": 3}, 422, "n_best=3 cannot exceed beam=2"
    ),
    "too many sentences": Bad("/translate", TOO_MANY, 413, "9 sentences in one request"),
    "too many characters": Bad(
        "/translate", {"sentences": ["a", "x" * 201]}, 413, "sentence 1 has 201 characters"
    ),
    "too many subwords": Bad("/translate", TOO_LONG, 413, "sentence 1 has"),
    "too many words": Bad("/parse", {"sentences": ["a " * 31]}, 413, "sentence 0 has 31 words"),
    "parse numbers": Bad("/parse", {"sentences": [[1]]}, 422, "valid string"),
    "no such endpoint": Bad("/translation", {"sentences": ["a"]}, 404, "Not Found"),
    "over 1 MiB": Bad("/translate", {"sentences": ["a" * 2**20]}, 413, "Payload too large"),
    "lone surrogate": Bad(
        "/translate",
        {"sentences": ["Ein Hund.", "\ud800 hallo"]},  # sent as the JSON escape \ud800
        422,
        "sentence 1 is not valid Unicode text: it holds an unpaired surrogate U+D800",
    ),
    "beam NaN": Bad("/translate", b'{"sentences": ["a"], "beam": NaN}', 422, '"input": "nan"'),
    "beam Infinity": Bad("/translate", b'{"sentences": ["a"], "beam": Infinity}', 422, "integer"),
    "beam 1e400": Bad("/translate", b'{"sentences": ["a"], "beam": 1e400}', 422, '"inf"'),
    "invalid UTF-8 as curl -d sends it": Bad(
        "/translate",
        b'{"sentences": ["\xff\xfe hallo"]}',
        422,
        "the body is not valid UTF-8 (byte 16): send a JSON object",
        CURL_D,
    ),
    "invalid UTF-8": Bad(
        "/translate", b'{"sentences": ["\xff\xfe hallo"]}', 400, "not valid UTF-8 (byte 16)"
    ),
    "deep nesting": Bad("/translate", DEEP, 422, '"input": "[[[[...]]]]"'),
    "deep nesting as curl -d sends it": Bad(
        "/parse", DEEP_FOR_ITS_CHECK, 422, "nests arrays or objects", CURL_D
    ),
    "deeper nesting": Bad("/parse", DEEPER, 400, "the body nests arrays or objects too deeply"),
    "many problems": Bad("/translate", {"sentences": list(range(2000))}, 422, "and 1980 more"),
    "empty token": Bad("/parse", {"sentences": [["", "a"]]}, 422, "sentence 0: token 0 is empty"),
    "token with a space": Bad(
        "/parse", {"sentences": ["a", ["a b", "c"]]}, 422, "sentence 1: token 0 ('a b') holds white"
    ),
    "token with a no-break space": Bad(
        "/parse", {"sentences": [["x", "a\u00a0b"]]}, 422, "token 1 ('a\\\\xa0b') holds white space"
    ),
    "surrogate token": Bad(
        "/parse", {"sentences": [["\udfff"]]}, 422, "sentence 0, token 0 is not valid Unicode"
    ),
}


def detail_text(answer: object) -> str:
    """An answer's detail as JSON text (non-ASCII as it is), to look for a message in."""
    detail = answer["detail"] if isinstance(answer, dict) else answer
    return json.dumps(detail, ensure_ascii=False)


@pytest.mark.slow
@pytest.mark.parametrize("case", BAD_REQUESTS, ids=str)
def test_bad_requests_get_a_4xx_that_says_why_and_the_server_goes_on(case, server, translator):
    bad = BAD_REQUESTS[case]
    got, answer = server.post(bad.path, bad.body, bad.content_type)
    assert got == bad.status, answer
    assert bad.message in detail_text(answer)
    got, answer = server.post("/translate", {"sentences": SENTENCES[:2]})
    assert got == 200  # with the checkpoint's beam
    assert_same(answer["results"], expected(translator.translate(SENTENCES[:2], beam=2)))


@pytest.mark.slow
def test_json_sent_as_curl_d_sends_it_is_read_and_other_text_refused(server, translator):
    status, answer = server.post("/translate", {"sentences": SENTENCES[:2]}, CURL_D)
    assert status == 200
    assert_same(answer["results"], expected(translator.translate(SENTENCES[:2])))
    status, answer = server.post("/translate", b"sentences=Ein+Hund", CURL_D)
    assert status == 422 and "the body is not a JSON object" in json.dumps(answer)


@pytest.fixture(scope="module")
def parser(checkpoints):
    return seqtasks.load(checkpoints["parsing"], device="cpu")


@pytest.fixture(scope="module")
def captioner(checkpoints):
    return seqtasks.load(checkpoints["captioning"], device="cpu")


@pytest.mark.slow
def test_parse_answers_as_the_python_api_does(server, parser):
    sentences = ["The dog barked .", ["He", "left", "(", "quietly", ")"], ""]
    status, answer = server.post("/parse", {"sentences": sentences, "beam": 3})
    assert status == 200, answer
    parses = parser.parse(sentences, beam=3)
    assert_same(answer["results"], expected(parses))
    assert answer["results"][2]["text"] == "(TOP )" and answer["results"][2]["tree"] == ["TOP"]

    def leaves(tree: list | str) -> list[str]:  # a nested [label, child, ...]'s words
        return [tree] if isinstance(tree, str) else [w for child in tree[1:] for w in leaves(child)]

    assert [leaves(r["tree"]) for r in answer["results"]] == [p.tree.leaves() for p in parses]
    assert [r["tree"][0] for r in answer["results"]] == ["TOP"] * 3
    assert [r["repairs"] for r in answer["results"]] == [p.repairs for p in parses]


def form(fields: dict[str, str | bytes] | list[tuple[str, str | bytes]], image: bytes) -> bytes:
    """A multipart/form-data body as `curl -F` writes it (fields given as pairs may repeat)."""
    pairs = fields.items() if isinstance(fields, dict) else fields
    parts = [
        f'--B0und\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n'.encode()
        + (v if isinstance(v, bytes) else v.encode())
        + b"\r\n"
        for k, v in pairs
    ]
    head = b'--B0und\r\nContent-Disposition: form-data; name="image"; filename="x.png"\r\n'
    parts.append(head + b"Content-Type: image/png\r\n\r\n" + image + b"\r\n")
    return b"".join(parts) + b"--B0und--\r\n"


MULTIPART = "multipart/form-data; boundary=B0und"


@pytest.fixture(scope="module")
def image(checkpoints) -> bytes:
    return sorted(checkpoints["images"].glob("*.png"))[0].read_bytes()


@pytest.mark.slow
def test_caption_takes_an_image_body_or_a_form(server, captioner, image):
    status, answer = server.post("/caption", image, "image/png")
    (caption,) = captioner.caption([image])
    assert status == 200, answer
    assert_same(answer["results"], expected([caption]))

    status, answer = server.post("/caption", form({"beam": "2", "n_best": "2"}, image), MULTIPART)
    (caption,) = captioner.caption([image], beam=2, n_best=2)
    assert status == 200, answer
    (got,) = answer["results"]
    assert_same([got], expected([caption]))
    assert_same(got["alternatives"], expected(caption.alternatives))


def damaged(image: bytes) -> bytes:
    """A PNG whose first chunk after the header is renamed: Pillow raises SyntaxError."""
    return image[:37] + b"IDxT" + image[41:]


IMAGE_REQUESTS = {  # a body, or how to make it of the test image
    "not an image": Bad(
        "/caption",
        b"GIF89a but not really",
        422,
        'cannot read the image (21 bytes): cannot identify image file"',
        "image/gif",
    ),
    "empty body": Bad("/caption", b"", 422, "Field required", "image/png"),
    "form without an image": Bad(
        "/caption",
        b'--B\r\nContent-Disposition: form-data; name="beam"\r\n\r\n2\r\n--B--\r\n',
        422,
        "one image file",
        "multipart/form-data; boundary=B",
    ),
    "form with beam 0": Bad(
        "/caption",
        lambda image: form({"beam": "0"}, image),
        422,
        "beam: Input should be greater",
        MULTIPART,
    ),
    "image over 1 MiB": Bad(
        "/caption", b"\x89PNG" + bytes(2**21), 413, "Payload too large", "image/png"
    ),
    "form with beam ²": Bad(
        "/caption",
        lambda image: form({"beam": "²"}, image),
        422,
        "bad form field: beam: Input should be a valid integer (got '²')",
        MULTIPART,
    ),
    "form with beam twice": Bad(
        "/caption",
        lambda image: form([("beam", "2"), ("beam", "3")], image),
        422,
        "the form has two fields named 'beam'",
        MULTIPART,
    ),
    "form field not UTF-8": Bad(
        "/caption",
        lambda image: form({"n_best": b"\xff1"}, image),
        422,
        "form field 'n_best' is not UTF-8 text (byte 0)",
        MULTIPART,
    ),
    "form cut short": Bad(
        "/caption",
        lambda image: form({}, image)[: -len("--B0und--\r\n")],
        422,
        "the form does not end with its closing line --B0und-- (cut short?)",
        MULTIPART,
    ),
    "form of many fields": Bad(
        "/caption",
        lambda image: form({f"f{i}": "1" for i in range(3000)}, image),
        422,
        "the form has 3001 parts",
        MULTIPART,
    ),
    "damaged PNG": Bad("/caption", damaged, 422, "cannot read the image", "image/png"),
    "decompression bomb": Bad(
        "/caption",
        lambda image: bomb(),
        413,
        "the image has 400,000,000 pixels; this server takes at most 50,000,000",
        "image/png",
    ),
}


def body_of(bad: Bad, image: bytes) -> object:
    return bad.body(image) if callable(bad.body) else bad.body


@pytest.mark.slow
@pytest.mark.parametrize("case", IMAGE_REQUESTS, ids=str)
def test_bad_uploads_get_a_4xx_that_says_why_and_the_server_goes_on(case, server, image):
    bad = IMAGE_REQUESTS[case]
    got, answer = server.post("/caption", body_of(bad, image), bad.content_type)
    assert got == bad.status, answer
    assert bad.message in detail_text(answer)
    assert server.post("/caption", image, "image/png")[0] == 200


# ---- good requests beside bad ones --------------------------------------------------------------
@pytest.fixture(scope="module")
def good_requests(translator, parser, captioner, image) -> dict[str, tuple]:
    """A good request of each endpoint: (body, content type, a check of its answer)."""
    sentences = SENTENCES[:3]
    translations = expected(translator.translate(sentences, beam=2))
    words = ["The dog barked .", ["He", "left", "(", "quietly", ")"]]
    parses = parser.parse(words, beam=2)
    (caption,) = captioner.caption([image])

    def translated(answer: dict) -> None:
        assert_same(answer["results"], translations)

    def parsed(answer: dict) -> None:
        assert_same(answer["results"], expected(parses))

    def captioned(answer: dict) -> None:
        assert_same(answer["results"], expected([caption]))

    return {
        "/translate": ({"sentences": sentences, "beam": 2}, "application/json", translated),
        "/parse": ({"sentences": words, "beam": 2}, "application/json", parsed),
        "/caption": (image, "image/png", captioned),
    }


def send_together(server: Server, requests: list[tuple[str, object, str | None]]) -> list:
    """(status, answer) of each request, all sent at once (so LitServe batches them together)."""
    with ThreadPoolExecutor(len(requests)) as pool:
        return list(pool.map(lambda r: server.post(*r), requests))


def check_good(good_requests: dict, path: str, status: int, answer: object, why: str) -> None:
    assert status == 200, f"{why}: {answer}"
    good_requests[path][2](answer)


ALL_BAD = {**BAD_REQUESTS, **IMAGE_REQUESTS}


@pytest.mark.slow
@pytest.mark.parametrize("case", ALL_BAD, ids=str)
def test_bad_requests_batched_with_good_ones_fail_alone(case, server, good_requests, image):
    """Each bad request sent amid good ones of its endpoint, all at once: it gets its 4xx, and
    every good one its right answer, however LitServe batched them."""
    bad = ALL_BAD[case]
    path = bad.path if bad.path in good_requests else "/translate"
    body, content_type, _ = good_requests[path]
    good = (path, body, content_type)
    answers = send_together(
        server, [good, good, (bad.path, body_of(bad, image), bad.content_type), good, good]
    )
    status, answer = answers.pop(2)
    for good_status, good_answer in answers:
        check_good(good_requests, path, good_status, good_answer, f"beside {case!r}")
    assert status == bad.status and bad.message in detail_text(answer), answer


@pytest.mark.slow
def test_fuzzed_requests_never_get_a_5xx_nor_fail_good_ones(server, good_requests):
    """400 hostile requests (tests/serving/test_serve_fuzz.py) with 101 good ones among them, 16
    at a time: none gets a 5xx, every good one its right answer, and the server stays up."""
    seed = fuzz_seed()
    rng = random.Random(seed)
    requests = fuzz_requests(rng, 400)
    for position in range(0, len(requests) + 1, 4):
        path = rng.choice(sorted(good_requests))
        requests.insert(position, (path, *good_requests[path][:2]))
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda r: server.post(*r), requests))
    for number, ((path, body, content_type), (status, answer)) in enumerate(zip(requests, answers)):
        why = f"SERVE_FUZZ_SEED={seed}, request {number}: {path} {content_type} {body!r:.300}"
        if path in good_requests and body is good_requests[path][0]:
            check_good(good_requests, path, status, answer, why)
        else:
            assert status < 500, f"{why}: {status} {answer}"
            assert isinstance(answer, dict), f"{why}: {answer}"  # a 4xx with a detail, or a 200
            assert status == 200 or answer.get("detail"), f"{why}: {answer}"
    assert server.process.poll() is None and server.get("/health") == (200, "ok\n")


@pytest.mark.slow
def test_a_worker_that_cannot_set_up_ends_the_server_with_its_reason(checkpoints, tmp_path):
    """The translator's worker refuses a --max-length over its positional table (1024); the
    parser's comes up: the server must not serve /parse alone, nor wait for ever, but stop
    every process and end with the reason."""
    models = [str(checkpoints["translation"]), str(checkpoints["parsing"])]
    started = Server([*models, "--max-length", "5000"], tmp_path)
    try:
        status = started.process.wait(240)
    except subprocess.TimeoutExpired:
        started.stop()
        pytest.fail(f"the server neither served nor ended: {started.output()}")
    output = started.output()
    assert status == 2, output
    assert (
        "error: /translate could not start on cpu: --max-length 5000 is more than this model "
        "reads: its encoder takes 1024 positions, at most 1023 subwords and the source's EOS; "
        "start the server with --max-length 1023 or less"
    ) in output
    assert "Traceback" not in output
    deadline = time.monotonic() + 15
    with pytest.raises(ProcessLookupError):  # its workers and manager have ended too
        while time.monotonic() < deadline:
            os.killpg(started.process.pid, 0)
            time.sleep(0.2)


READY = re.compile(r"^seqtasks serve: ready on (http://127\.0\.0\.1:\d+) \((.*)\)$", re.M)
BOUND = re.compile(r"Uvicorn running on (http://127\.0\.0\.1:\d+)")  # at once, before loading


@pytest.mark.slow
def test_serve_says_what_it_loads_and_once_it_answers_where_and_with_what(checkpoints, tmp_path):
    """With --port 0, an ensemble and a parser, behind a key: a line at once naming what its
    workers load, then exactly one ready line, written only once /health answers 200, with the
    address the server took and each task's models by name (no path)."""
    translation, parsing = checkpoints["translation"], checkpoints["parsing"]
    models = [str(translation), str(translation), str(parsing)]
    started = Server(models, tmp_path, KEY, port=0, log_level="info")
    looks: list[tuple[bool, int | None]] = []  # (ready line written, /health's status after)
    try:
        deadline = time.monotonic() + 240
        while not (looks and looks[-1][0]) and time.monotonic() < deadline:
            assert started.process.poll() is None, started.output()
            log = started.log.read_text(errors="replace")
            bound = BOUND.search(log)
            if bound:
                started.url = bound[1]
                try:
                    status = started.get("/health")[0]
                except (urllib.error.URLError, ConnectionError):
                    status = None
                looks.append((READY.search(log) is not None, status))
            time.sleep(0.1)
        assert looks and looks[-1][0], f"no ready line in 240 s: {started.output()}"
        started.wait_until_healthy()
        assert started.get("/health") == (200, "ok\n")
        log = started.log.read_text(errors="replace")
    finally:
        stopped = started.stop()
    assert stopped == 0, started.output()
    assert all(status == 200 for ready, status in looks if ready)  # the line, then /health
    assert any(status != 200 for ready, status in looks if not ready), looks
    ((url, served),) = READY.findall(log)  # one ready line
    name = f"{translation.stem} (translation)"
    assert url == started.url
    assert served == f"translation: {name} + {name}; parsing: {parsing.stem} (parsing)"
    ours = [line for line in log.splitlines() if line.startswith("seqtasks serve: ")]
    assert ours[0] == (
        f"seqtasks serve: loading translation ({name} + {name}), parsing ({parsing.stem} "
        "(parsing)) in 2 worker processes"
    )
    assert ours[-1].startswith("seqtasks serve: ready on") and str(tmp_path) not in "".join(ours)


def test_a_port_that_is_taken_is_refused_before_any_worker_starts(checkpoints, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main([str(checkpoints["parsing"]), "--port", str(port)]) == 2
    assert capsys.readouterr().err == (
        f"error: cannot listen on 127.0.0.1 port {port}: Address already in use (choose "
        "another --port, or --port 0 for a free one)\n"
    )


@pytest.mark.slow
def test_bench_serve_measures_every_client_count_and_matches_offline(
    server, checkpoints, tmp_path, monkeypatch
):
    source = tmp_path / "source.de"
    source.write_text("\n".join(SENTENCES * 2) + "\n", encoding="utf-8")
    bench = load_script("bench/serve.py")
    monkeypatch.setenv("LIT_SERVER_API_KEY", KEY)  # the client sends it
    result = bench.main(
        ["--checkpoint", str(checkpoints["translation"]), "--source", str(source)]
        + ["--clients", "1", "4", "--beam", "2", "--url", server.url]
    )
    assert [level["clients"] for level in result["levels"]] == [1, 4]
    for level in result["levels"]:
        assert level["failures"] == [] and level["same_as_offline"] == len(SENTENCES) * 2
        assert level["sentences_per_s"] > 0 and level["latency_p95_ms"] >= level["latency_p50_ms"]


# ---- the page (GET /) and the attention it draws -----------------------------------------------
class Controls(HTMLParser):
    """The ids of a page's inputs, selects and textareas, the `for` of its labels (in the task
    section's template: their data-id and data-for), and every address it names (src, href,
    action, url(...))."""

    def __init__(self):
        super().__init__()
        self.controls: list[str] = []
        self.labelled: set[str] = set()
        self.addresses: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if tag in ("input", "select", "textarea"):
            name = named.get("id") or named.get("data-id")
            self.controls.append(name or f"<{tag} without an id>")
        if tag == "label" and (named.get("for") or named.get("data-for")):
            self.labelled.add(named.get("for") or named["data-for"])
        self.addresses += [v for k, v in attrs if k in ("src", "href", "action") and v]


def test_the_page_names_no_task_labels_every_control_and_needs_no_internet():
    """The page is the same whatever is served and names no task, its endpoint or its answer's
    name (its script builds a section for each task /models names, behind the key); every
    control labelled; no address but its own icon, inline."""
    from seqtasks.registry import tasks

    html = render()
    page = Controls()
    page.feed(html)
    for name, entry in tasks().items():
        endpoint = entry.endpoint_class()
        if endpoint is None:  # a task not served (pre-training's)
            continue
        words = {name, endpoint.path, endpoint.title, endpoint.prompt}
        assert not [w for w in words if w.lower() in html.lower()], name
    assert page.controls and set(page.controls) <= page.labelled, page.controls
    assert [a[:26] for a in page.addresses] == ["data:image/svg+xml,<svg xm"]  # the icon
    named = html.replace("http://www.w3.org/2000/svg", "")  # SVG's namespace: a name
    assert not re.search(r"https?://|url\(|@import|//[a-z0-9.-]+\.[a-z]{2,}/", named)
    assert "</script>" not in html.split("<script>", 1)[1].rsplit("</script>", 1)[0]


def test_attention_asked_of_a_model_without_it_is_refused_naming_its_decoder():
    """A decoder without attention (`gives_attention` false: no-attention RNN, show-and-tell)
    cannot answer `"attention": true`: 422 naming it (`Model.require_attention`'s message), not
    a failure in the worker."""
    from types import SimpleNamespace

    from seqtasks.serving.endpoint import ModelEndpoint
    from seqtasks.tasks.model import Model
    from seqtasks.translation.endpoint import TranslateRequest

    class NoAttentionDecoder:
        pass

    class Stub:  # a Model's search settings and attention check, without a checkpoint
        require_attention = Model.require_attention

        def __init__(self, gives_attention: bool):
            self.gives_attention = gives_attention
            self.task = SimpleNamespace(decoder=NoAttentionDecoder())

        def search_settings(self, beam: int | None, n_best: int | None) -> SimpleNamespace:
            return SimpleNamespace(beam=beam or 5, n_best=n_best or 1)

    class Endpoint:  # the endpoint's own checks, over the stub
        job, search_settings = ModelEndpoint.job, ModelEndpoint.search_settings

        def __init__(self, model: Stub):
            self.model = model

    asked = TranslateRequest(sentences=["Ein Hund."], attention=True)
    with pytest.raises(RequestError) as refused:
        Endpoint(Stub(False)).job(["Ein Hund."], asked)
    assert refused.value.status == 422
    assert (
        refused.value.detail
        == "attention was asked for, but the model's NoAttentionDecoder has no attention"
    )
    job = Endpoint(Stub(True)).job(["Ein Hund."], asked)
    assert (job.settings.beam, job.settings.n_best, job.attention) == (5, 1, True)
    plain = TranslateRequest(sentences=["Ein Hund."], beam=2)
    job = Endpoint(Stub(False)).job(["Ein Hund."], plain)
    assert (job.settings.beam, job.settings.n_best, job.attention) == (2, 1, False)


@pytest.mark.slow
def test_the_server_serves_the_page_and_says_what_each_model_is(server, checkpoints):
    """GET / and its icon without the key; GET /models, with it, names each task's models and
    gives an example input of their training data and their own search settings."""
    status, html = call(server.url + "/")
    assert status == 200 and html == render()
    assert call(server.url + "/favicon.ico")[0] == 200
    status, models = server.get("/models")
    assert status == 200 and sorted(models) == ["captioning", "parsing", "translation"]
    translation = models["translation"]
    checkpoint = checkpoints["translation"]
    assert translation["models"] == [f"{checkpoint.stem} (translation)", "translation"]
    assert translation["search"]["beam"] == 2 and translation["search"]["n_best"] == 1
    recorded = torch.load(checkpoints["translation"], weights_only=True)["seqtasks_identity"]
    assert translation["example"] == recorded["data"]["example"] and translation["example"]
    assert models["parsing"]["example"] and models["captioning"]["example"] is None
    assert translation["attention"] == "all" and translation["limits"]["max_attention"] == 5000
    assert models["captioning"]["attention"] is True  # its weights over the grid alone
    assert models["parsing"]["attention"] is False  # its decoder has attention; /parse takes none
    forms = {task: (m["form"]["path"], m["form"]["reads"]) for task, m in models.items()}
    assert forms == {
        "translation": ("/translate", "text"),
        "parsing": ("/parse", "text"),
        "captioning": ("/caption", "image"),
    }


@pytest.mark.slow
def test_translate_gives_attention_when_asked(server, translator):
    sentence = SENTENCES[0]
    status, answer = server.post("/translate", {"sentences": [sentence, ""], "attention": True})
    assert status == 200, answer
    got, empty = (result["attention"] for result in answer["results"])
    (want,) = translator.translate([sentence], attention=True)
    assert got["rows"] == want.tokens
    assert got["columns"] == translator.source_pieces(sentence)
    assert len(got["weights"]) == len(want.tokens)  # a row per target piece
    assert {len(row) for row in got["weights"]} == {len(got["columns"])}  # source + EOS
    assert torch.tensor(got["weights"]) == pytest.approx(want.attention, abs=1e-3)
    assert empty["weights"] == [] and empty["rows"] == []
    status, answer = server.post("/translate", {"sentences": [sentence], "attention": 1})
    assert status == 422 and "valid boolean" in str(answer)


@pytest.mark.slow
def test_caption_gives_attention_over_the_grid_when_asked(server, captioner, image):
    status, answer = server.post("/caption", form({"attention": "true"}, image), MULTIPART)
    assert status == 200, answer
    (want,) = captioner.caption([image], attention=True)
    (got,) = (result["attention"] for result in answer["results"])
    assert got["rows"] == want.words and got["grid"] == list(want.grid)
    height, width = got["grid"]
    assert len(got["weights"]) == len(got["rows"])  # a row per word
    assert {len(row) for row in got["weights"]} == {height * width}
    status, plain = server.post("/caption", form({}, image), MULTIPART)
    assert status == 200 and "attention" not in plain["results"][0]
    status, answer = server.post("/caption", form({"attention": "yes"}, image), MULTIPART)
    assert status == 422 and "bad form field: attention" in answer["detail"]


@pytest.mark.slow
def test_parse_tells_the_repairs_and_takes_no_attention(server, parser):
    status, answer = server.post("/parse", {"sentences": ["The dog barked .", ""]})
    assert status == 200, answer
    want = parser.parse(["The dog barked .", ""])
    assert [r["repairs"] for r in answer["results"]] == [p.repairs for p in want]
    status, answer = server.post("/parse", {"sentences": ["a"], "attention": True})
    assert status == 422 and "Extra inputs" in str(answer)


def test_the_browser_tests_wait_for_the_chromium_that_ci_installs_beside_pip(tmp_path):
    """.ci/run installs Chromium in the background and writes apt's status when done (by a
    rename): the tests wait for it, and fail with apt's log if it failed or never ends."""
    import threading

    status = tmp_path / "status"

    def done() -> None:
        (tmp_path / "part").write_text("0\n")
        (tmp_path / "part").rename(status)

    threading.Timer(0.3, done).start()
    wait_for_install(status, timeout=10, poll=0.05)
    assert status.read_text() == "0\n"
    status.write_text("100\n")
    (tmp_path / "log").write_text("E: Unable to locate package chromium\n")
    with pytest.raises(pytest.fail.Exception, match=r"(?s)status 100.*Unable to locate package"):
        wait_for_install(status, timeout=10, poll=0.05)
    with pytest.raises(pytest.fail.Exception, match="did not end in 0 s"):
        wait_for_install(tmp_path / "never", timeout=0.2, poll=0.05)


# ---- the page in a browser ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser():
    executable = chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser, server, request):
    """The server's page in a fresh browser context; afterwards its screenshot is kept, no
    request may have left 127.0.0.1, and every control and image shown must have a name."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(30_000)
    addresses: list[str] = []
    errors: list[str] = []
    opened.on("request", lambda r: addresses.append(r.url))
    opened.on("pageerror", lambda error: errors.append(str(error)))
    opened.goto(server.url + "/")
    # The server needs its key: the page asks for it before it shows any model.
    opened.wait_for_selector("#status:has-text('needs its API key')")
    assert opened.locator("section:not([hidden])").count() == 0
    opened.fill("#api-key", KEY)
    opened.wait_for_selector("#translation:not([hidden])")
    yield opened
    screenshot(opened, request.node.name)
    nameless = unnamed(opened)  # in the state the test left: results and errors shown
    context.close()
    assert not errors, f"the page's script failed: {errors}"
    assert not nameless, f"controls or images without an accessible name: {nameless}"
    away = [a for a in addresses if not a.startswith(("blob:", "data:", server.url + "/"))]
    assert not away, f"requests left the server: {away}"


@pytest.mark.slow
@pytest.mark.browser
def test_the_page_translates_and_draws_the_attention(page, server, checkpoints):
    """The page starts from what /models says (the model's name, an example sentence of its
    data, its beam as the placeholder, nothing of its own sent), and draws the answer."""
    models = server.get("/models")[1]["translation"]
    named = " + ".join(models["models"]) + " (an ensemble)"
    assert page.text_content("#translation-models") == named
    assert page.input_value("#translation-text") == models["example"]
    assert page.get_attribute("#translation-beam", "placeholder") == "model's: 2"
    with page.expect_request("**/translate") as sent:
        page.click("#translation-form button")
    assert sent.value.headers["x-api-key"] == KEY
    assert json.loads(sent.value.post_data) == {
        "sentences": [models["example"]],
        "attention": "all",
    }  # the model's own search settings, not the page's
    page.wait_for_selector("#translation-result:not([hidden])")
    # every attention of the example is over this server's --max-attention: the page asked again
    # for the attention alone, and says so
    assert server.post("/translate", json.loads(sent.value.post_data))[0] == 413
    assert page.is_visible("#translation-picker-note")
    assert page.is_hidden("#translation-picker")
    assert page.locator("#translation-heatmap .tgt").count() > 0
    page.fill("#translation-text", SENTENCES[1])
    page.fill("#translation-beam", "2")
    page.fill("#translation-nbest", "2")
    with page.expect_response("**/translate"):  # (its text may be the first one's again)
        page.click("#translation-form button")
    page.wait_for_selector("#translation-nbest-list li")  # drawn from this answer: n-best 2
    status, answer = server.post(
        "/translate", {"sentences": [SENTENCES[1]], "beam": 2, "n_best": 2, "attention": "all"}
    )
    (want,) = answer["results"]
    assert page.text_content("#translation-output") == want["text"]
    attention = want["attentions"]  # drawn: the top cross-attention, its heads' mean, EOS row too
    assert attention["target"] == [*want["attention"]["rows"], "</s>"]
    want = {**want, "pieces": attention["target"], "source_pieces": attention["memory"]}
    assert page.locator("#translation-nbest-list li").count() == 1
    assert page.get_attribute("#translation-nbest-list", "start") == "2"  # the second is 2
    pieces = page.locator("#translation-heatmap .tgt").all_text_contents()
    assert pieces == [p.replace("\u2581", "\u2423") for p in want["pieces"]]  # ▁ shown as ␣
    assert page.locator("#translation-heatmap .src").count() == len(want["source_pieces"])
    canvas = "document.querySelector('#translation-heatmap canvas')"
    size = page.evaluate(f"[{canvas}.width, {canvas}.height]")
    cell = cell_size(page)
    assert size == [cell * len(want["source_pieces"]), cell * len(want["pieces"])]
    page.focus("#translation-heatmap .tgt")  # by keyboard: the first target lights its sources
    assert page.locator("#translation-heatmap .src.lit").count() == len(want["source_pieces"])


@pytest.mark.slow
@pytest.mark.browser
def test_the_pages_picker_shows_the_layer_and_head_chosen(page, server):
    """Kind, layer and head chosen over the heat map: each draws that map of the answer's
    `attentions` (the mean of heads computed by the page), its rows and columns the pieces that
    kind is over, quickly; the picker's default is the top cross-attention's mean of heads."""
    page.fill("#translation-text", SENTENCES[1])
    with page.expect_response("**/translate"):
        page.click("#translation-form button")
    page.wait_for_selector("#translation-picker:not([hidden])")
    status, answer = server.post("/translate", {"sentences": [SENTENCES[1]], "attention": "all"})
    maps = answer["results"][0]["attentions"]
    shown = lambda pieces: [p.replace("\u2581", "\u2423") for p in pieces]  # noqa: E731
    drawn = """() => { const c = document.querySelector('#translation-heatmap canvas');
        const x = c.getContext('2d'), cell = Number(c.closest('.heatmap').dataset.cell);
        const rows = c.height / cell, cols = c.width / cell, out = [];
        for (let i = 0; i < rows; i++) { const row = [];
          for (let j = 0; j < cols; j++) row.push(Array.from(
            x.getImageData(j * cell + cell / 2, i * cell + cell / 2, 1, 1).data.slice(0, 3)));
          out.push(row); }
        return out; }"""
    shade = """(w) => { const s = Math.sqrt(Math.min(Math.max(w, 0), 1)), L = [222, 235, 247],
        D = [8, 48, 107]; return w > 0 ? L.map((c, k) => Math.round(c + (D[k] - c) * s))
        : [255, 255, 255]; }"""

    def colours(weights):
        return [[page.evaluate(shade, w) for w in row] for row in weights]

    def close(a, b):
        return all(
            abs(x - y) <= 2
            for ra, rb in zip(a, b)
            for ca, cb in zip(ra, rb)
            for x, y in zip(ca, cb)
        )

    cross = torch.tensor(maps["cross"][0])  # (heads, target, memory)
    assert page.locator("#translation-heatmap .tgt").all_text_contents() == shown(maps["target"])
    assert close(page.evaluate(drawn), colours(cross.mean(0).tolist()))
    page.select_option("#translation-kind", "encoder")
    page.select_option("#translation-head", "1")
    assert page.locator("#translation-heatmap .tgt").all_text_contents() == shown(maps["source"])
    assert page.locator("#translation-heatmap .src").all_text_contents() == shown(maps["source"])
    assert close(page.evaluate(drawn), colours(maps["encoder"][0][1]))
    assert page.text_content("#translation-pieces-title").startswith("Encoder self-attention")
    page.select_option("#translation-kind", "decoder")
    assert page.locator("#translation-heatmap .src").all_text_contents() == shown(maps["inputs"])
    assert close(page.evaluate(drawn), colours(maps["decoder"][0][1]))  # the head kept
    started = time.monotonic()
    page.hover("#translation-heatmap .tgt >> nth=1")
    assert time.monotonic() - started < 1.0  # a hover stays quick
    assert page.locator("#translation-heatmap .src.lit").count() == len(maps["inputs"])


@pytest.mark.slow
@pytest.mark.browser
def test_the_page_captions_an_upload_with_one_overlay_per_word(page, server, checkpoints, image):
    page.set_input_files("#captioning-file", str(sorted(checkpoints["images"].glob("*.png"))[0]))
    page.click("#captioning-form button")
    page.wait_for_selector("#captioning-result:not([hidden])")
    status, answer = server.post("/caption", form({"attention": "true"}, image), MULTIPART)
    (result,) = answer["results"]
    words = result["attention"]["rows"]
    assert page.text_content("#captioning-output") == result["text"]
    assert page.locator("#captioning-strip figure canvas").count() == len(words)
    assert page.locator("#captioning-words button").count() == len(words)


@pytest.mark.slow
@pytest.mark.browser
def test_the_page_shows_the_servers_message_for_a_bad_upload(page):
    bad = {"name": "photo.png", "mimeType": "image/png", "buffer": b"not an image at all"}
    page.set_input_files("#captioning-file", files=[bad])
    page.click("#captioning-form button")
    page.wait_for_selector("#captioning-error:not([hidden])")
    message = page.text_content("#captioning-error")
    assert "422" in message and "cannot read the image (19 bytes)" in message


@pytest.mark.slow
@pytest.mark.browser
def test_the_page_draws_the_parse_as_a_tree(page):
    """The tree the server answered, its words as it read them: a word holding U+FEFF (which
    JavaScript counts as a space) is one leaf."""
    words = ["The", "dog\ufeffs", "barked", "loudly", "."]
    page.fill("#parsing-text", " ".join(words))
    page.fill("#parsing-beam", "3")
    page.click("#parsing-form button")
    page.wait_for_selector("#parsing-result:not([hidden])")
    leaves = page.locator("#parsing-tree text.leaf").all_text_contents()
    assert leaves == words
    assert page.text_content("#parsing-output").startswith("(TOP")


@pytest.mark.slow
@pytest.mark.browser
def test_the_page_works_from_the_keyboard_alone(page, server, checkpoints, image):
    """Tab and Enter only: translate, then walk the heat map's pieces (each one focused lights
    what it attends to, or what attends to it); choose an image from the drop area, caption it
    and focus a word, which lays its attention over the photo. Focus is drawn visibly."""
    sentence = SENTENCES[2]
    tab_to(page, "#translation-text")
    page.keyboard.press("Control+A")
    page.keyboard.type(sentence)
    tab_to(page, "#translation-form button")
    page.keyboard.press("Enter")
    page.wait_for_selector("#translation-result:not([hidden])")
    status, answer = server.post("/translate", {"sentences": [sentence], "attention": "all"})
    (want,) = answer["results"]
    assert page.text_content("#translation-output") == want["text"]
    attention = want["attentions"]
    want = {**want, "pieces": attention["target"], "source_pieces": attention["memory"]}
    tab_to(page, "#translation-head")  # the picker by keyboard: head 1 of the one layer
    page.keyboard.press("ArrowDown")
    assert page.input_value("#translation-head") == "0"
    assert "(layer 0, head 0)" in page.text_content("#translation-pieces-title")
    tab_to(page, "#translation-heatmap .src")  # the first source piece: the target pieces light up
    assert page.locator("#translation-heatmap .src.on").count() == 1
    assert page.locator("#translation-heatmap .tgt.lit").count() == len(want["pieces"])
    assert veiled(page) == (len(want["pieces"]) * (len(want["source_pieces"]) - 1))
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline not in ("", "none")
    tab_to(page, "#translation-heatmap .tgt")  # the first target piece: its source pieces light up
    assert page.locator("#translation-heatmap .src.lit").count() == len(want["source_pieces"])
    assert veiled(page) == (len(want["pieces"]) - 1) * len(want["source_pieces"])
    with page.expect_file_chooser() as chooser:
        tab_to(page, "#captioning-drop")
        page.keyboard.press("Enter")
    chooser.value.set_files(str(sorted(checkpoints["images"].glob("*.png"))[0]))
    tab_to(page, "#captioning-form button")
    page.keyboard.press("Enter")
    page.wait_for_selector("#captioning-result:not([hidden])")
    status, answer = server.post("/caption", form({"attention": "true"}, image), MULTIPART)
    (caption,) = answer["results"]
    caption["words"] = caption["attention"]["rows"]
    assert page.text_content("#captioning-output") == caption["text"]
    if len(caption["words"]) > 1:
        tab_to(page, "#captioning-words button:nth-child(2)")
        assert page.get_attribute("#captioning-words button:nth-child(2)", "aria-pressed") == "true"
        chosen = page.locator("#captioning-strip figure.on figcaption").text_content()
        assert chosen == caption["words"][1]


@pytest.mark.slow
@pytest.mark.browser
def test_the_page_captions_an_image_dropped_on_it(page, server, checkpoints):
    """A file dragged from the desktop and dropped on the drop area is captioned."""
    path = sorted(checkpoints["images"].glob("*.png"))[1]
    dropped = page.evaluate_handle(
        """(bytes) => { const files = new DataTransfer();
        files.items.add(new File([new Uint8Array(bytes)], 'dropped.png', {type: 'image/png'}));
        return files; }""",
        list(path.read_bytes()),
    )
    page.dispatch_event("#captioning-drop", "dragover", {"dataTransfer": dropped})
    assert "over" in page.get_attribute("#captioning-drop", "class")
    page.dispatch_event("#captioning-drop", "drop", {"dataTransfer": dropped})
    assert page.text_content("#captioning-drop") == "Chosen: dropped.png"
    page.click("#captioning-form button")
    page.wait_for_selector("#captioning-result:not([hidden])")
    status, answer = server.post("/caption", form({"attention": "true"}, path.read_bytes()),
                                 MULTIPART)  # fmt: skip
    (result,) = answer["results"]
    assert page.text_content("#captioning-output") == result["text"]
    assert page.locator("#captioning-strip figure").count() == len(result["attention"]["rows"])


MIN_CELL, MAX_CELL = 14, 32  # px: a heat map cell's side (views.js)


def cell_size(page) -> int:
    """The side of the translation heat map's cells, px, as the page drew them."""
    return int(page.get_attribute("#translation-heatmap", "data-cell"))


def veiled(page) -> int:
    """How many cells of the heat map the veils cover (their centres), as the page shows it."""
    return page.evaluate(
        """(cell) => {
        const map = document.querySelector('#translation-heatmap');
        const canvas = map.querySelector('canvas');
        const veils = [...map.querySelectorAll('.veil:not([hidden])')]
          .map((v) => v.getBoundingClientRect());
        const box = canvas.getBoundingClientRect();
        let covered = 0;
        for (let y = box.top + cell / 2; y < box.bottom; y += cell)
          for (let x = box.left + cell / 2; x < box.right; x += cell)
            covered += veils.some((v) => x > v.left && x < v.right && y > v.top && y < v.bottom);
        return covered;
    }""",
        cell_size(page),
    )


@pytest.mark.slow
@pytest.mark.browser
def test_the_largest_heat_map_an_answer_may_hold_is_quick_to_hover(page):
    """371 target × 241 source pieces (more than --max-length 250 lets a sentence have): the
    map is drawn once; lighting a row or a column then takes under 100 ms, style, layout and
    two frames included (it took 12-24 s when every cell was restyled)."""
    page.evaluate(
        """([rows, cols]) => {
        const w = Array.from({length: rows},
          (_, i) => Array.from({length: cols}, (_, j) => ((i * 7 + j * 13) % 100) / 100 / cols));
        $('translation-result').hidden = false; $('translation-pieces-view').hidden = false;
        const targets = w.map((_, i) => '\u2581p' + i), sources = w[0].map((_, j) => 's' + j);
        heatmap($('translation-heatmap'), targets, sources, w);
        }""",
        [371, 241],
    )
    frames = """(selector) => new Promise((done) => {
        const t0 = performance.now();
        document.querySelector(selector).dispatchEvent(new MouseEvent('mouseenter'));
        requestAnimationFrame(() => requestAnimationFrame(() => done(performance.now() - t0)));
    })"""
    page.evaluate(frames, "#translation-heatmap .tgt")  # the first frame rasterises the new map
    times = [
        page.evaluate(frames, f"#translation-heatmap .{axis}[data-{kind}='{n}']")
        for axis, kind, n in [("tgt", "row", 200), ("src", "col", 120), ("tgt", "row", 370)] * 2
    ]
    assert sorted(times)[len(times) // 2] < 100, times
    assert page.locator("#translation-heatmap .src.lit").count() == 241


DRAW_MAP = """([rows, columns, low]) => {
    // A character model's map, synthetic: each target character attends mostly to one source
    // character, and `low` to every other.
    const w = Array.from({length: rows}, (_, i) => Array.from({length: columns},
      (_, j) => (j === i % columns ? 1 - low * (columns - 1) : low)));
    $('translation-result').hidden = false; $('translation-pieces-view').hidden = false;
    const letters = (n, from) => Array.from({length: n}, (_, k) => from[k % from.length]);
    heatmap($('translation-heatmap'), letters(rows, 'abcdefghij'), letters(columns, 'klmnopq'), w);
}"""
GEOMETRY = """() => {
    const map = $('translation-heatmap'), scroll = map.parentNode;
    return {cell: Number(map.dataset.cell), width: map.querySelector('canvas').offsetWidth,
            right: map.getBoundingClientRect().right,
            window: document.documentElement.clientWidth,
            scrolls: scroll.scrollWidth > scroll.clientWidth};
}"""


@pytest.mark.slow
@pytest.mark.browser
def test_a_character_models_heat_map_is_sized_to_its_pieces_and_the_window(page):
    """A date of 20 characters gets cells of MAX_CELL px (a map of 16 px cells was a 320 px
    square); 60 source × 45 target characters fill the window's width, within it, without
    scrolling, and a narrower window redraws them narrower, still within it; 241 source pieces
    keep cells of MIN_CELL px, and scroll."""
    page.evaluate(DRAW_MAP, [20, 20, 0.01])
    short = page.evaluate(GEOMETRY)
    assert short["cell"] == MAX_CELL and short["width"] == 20 * MAX_CELL, short
    page.evaluate(DRAW_MAP, [45, 60, 0.01])
    wide = page.evaluate(GEOMETRY)
    assert wide["width"] == 60 * wide["cell"] and MIN_CELL <= wide["cell"] <= MAX_CELL
    assert wide["width"] > 0.8 * wide["window"] > 300, wide
    assert wide["right"] <= wide["window"] and not wide["scrolls"], wide
    page.set_viewport_size({"width": 1000, "height": 900})
    page.wait_for_function(f"Number($('translation-heatmap').dataset.cell) < {wide['cell']}")
    narrow = page.evaluate(GEOMETRY)
    assert narrow["cell"] >= MIN_CELL and narrow["width"] > 0.8 * narrow["window"], narrow
    assert narrow["right"] <= narrow["window"] and not narrow["scrolls"], narrow
    page.evaluate(DRAW_MAP, [10, 241, 0.001])
    long = page.evaluate(GEOMETRY)
    assert long["cell"] == MIN_CELL and long["scrolls"], long


@pytest.mark.slow
@pytest.mark.browser
def test_small_weights_show_on_the_heat_map_in_the_colours_of_its_legend(page):
    """A weight of 0.01 (a long source's share) is plainly not white, a larger one darker, 0
    white; the legend's swatches are the colours the cells are drawn in."""
    page.evaluate(DRAW_MAP, [45, 60, 0.01])
    colours = page.evaluate(
        """() => {
        const map = $('translation-heatmap'), cell = Number(map.dataset.cell);
        const context = map.querySelector('canvas').getContext('2d');
        const at = (i, j) => `rgb(${[...context.getImageData(
          j * cell + cell / 2, i * cell + cell / 2, 1, 1).data.slice(0, 3)].join(', ')})`;
        const legend = [...document.querySelectorAll('#translation-scale .swatch')].map(
          (swatch) => [swatch.textContent, getComputedStyle(swatch.firstChild).backgroundColor]);
        return {low: at(0, 1), high: at(0, 0), legend};
    }"""
    )
    low, high = (list(map(int, re.findall(r"\d+", colours[k]))) for k in ("low", "high"))
    assert min(low) <= 255 - 40, colours  # 0.01: a colour, not a white
    assert sum(high) < sum(low) - 200, colours  # 0.41: much darker
    legend = dict(colours["legend"])
    assert [weight for weight, _ in colours["legend"]] == "0 0.01 0.05 0.1 0.25 0.5 1".split()
    assert legend["0.01"] == colours["low"] and legend["0"] == "rgb(255, 255, 255)", colours


@pytest.mark.slow
@pytest.mark.browser
def test_the_key_is_applied_by_its_button_or_by_enter_from_the_keyboard(browser, server):
    """The key set in its field without typing (as a password manager fills it): applied by
    the button (clicked, or Enter on it after Tab) or by Enter in the field; a wrong one is
    said to be refused."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    page.goto(server.url + "/")
    page.wait_for_selector("#status:has-text('needs its API key')")
    fill = "(key) => { document.getElementById('api-key').value = key; }"
    page.evaluate(fill, "wrong")
    page.click("#key-apply")
    page.wait_for_selector("#status:has-text('refused this key')")
    page.evaluate(fill, KEY)
    page.focus("#api-key")
    tab_to(page, "#key-apply")  # the next stop after the field
    page.keyboard.press("Enter")
    page.wait_for_selector("#translation:not([hidden])")
    assert page.text_content("#status").startswith("This server holds")
    page.evaluate(fill, "wrong again")
    page.focus("#api-key")
    page.keyboard.press("Enter")
    page.wait_for_selector("#status:has-text('refused this key')")
    assert page.get_attribute("#key-apply", "type") == "submit" and not unnamed(page)
    screenshot(page, "key-applied")
    context.close()


# ---- the key, and the size of an attention answer ---------------------------------------------
@pytest.mark.slow
def test_the_key_guards_every_route_but_the_page(server):
    """Without X-API-Key, or with another key: 401 for every route but / and its icon, before a
    body is read (a body that is no JSON too) or anything is said of the models; with the key,
    FastAPI's generated pages, which load scripts from a CDN, are not there."""
    asked = [
        ("/translate", {"sentences": ["Ein Hund."]}),
        ("/translate", b"{not json"),
        ("/parse", {"sentences": ["a"]}),
        ("/caption", b"\x89PNG"),
        ("/models", None),
        ("/health", None),
        ("/info", None),
        ("/openapi.json", None),
        ("/docs", None),
        ("/redoc", None),
        ("/no-such-route", None),
    ]
    for path, body in asked:
        # a longer key, not KEY + " ": HTTP drops a header value's trailing white space (RFC
        # 9110 §5.5) before the app sees it, as uvicorn 0.55 with httptools does
        for key in (None, "wrong", KEY[:-1], KEY + "x"):
            status, answer = call(server.url + path, body, key=key)
            assert status == 401, (path, key, answer)
            assert "API key" in answer["detail"] or "X-API-Key" in answer["detail"]
    assert call(server.url + "/")[0] == 200 and call(server.url + "/favicon.ico")[0] == 200
    for path in ("/docs", "/redoc", "/openapi.json"):
        assert server.get(path)[0] == 404


def test_an_empty_key_refuses_to_start_unless_an_open_server_is_asked_for(
    tmp_path, capsys, monkeypatch
):
    missing = tmp_path / "empty.ckpt"  # there (the argument is taken), but no checkpoint
    missing.touch()
    missing = str(missing)
    for empty in ("", "  "):
        monkeypatch.setenv("LIT_SERVER_API_KEY", empty)
        assert main([missing]) == 2
        assert capsys.readouterr().err == (
            "error: LIT_SERVER_API_KEY is set but empty, which would serve without a key: set "
            "it to the key, unset it, or pass --open to serve without one\n"
        )
        assert main([missing, "--open"]) == 2  # past the key: the checkpoint is what is wrong
        assert f"error: {missing} is not a readable PyTorch checkpoint: the file is empty" in (
            capsys.readouterr().err
        )
    monkeypatch.setenv("LIT_SERVER_API_KEY", "k")
    assert main([missing, "--open"]) == 2
    assert "--open serves without a key, but LIT_SERVER_API_KEY sets one" in (
        capsys.readouterr().err
    )


def test_the_key_is_compared_in_constant_time_before_the_body_is_read(monkeypatch):
    """`KeyCheck` compares with `hmac.compare_digest`, and a request it refuses never reaches
    the app nor reads its body."""
    import hmac

    from seqtasks.serving import access

    compared, reached, read = [], [], []
    constant_time = hmac.compare_digest

    def compare(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return constant_time(a, b)

    monkeypatch.setattr(access.hmac, "compare_digest", compare)

    async def app(scope, receive, send):
        reached.append(scope["path"])

    async def receive():
        read.append(1)
        return {"type": "http.request", "body": b"{}"}

    sent = []

    async def send(message):
        sent.append(message)

    def run(scope: dict) -> None:  # in a thread: Playwright may hold this thread's loop
        with ThreadPoolExecutor(1) as thread:
            thread.submit(
                asyncio.run, access.KeyCheck(app, "s3cret")(scope, receive, send)
            ).result()

    scope = {"type": "http", "method": "POST", "path": "/translate"}
    run({**scope, "headers": [(b"x-api-key", b"guess")]})
    assert sent[0]["status"] == 401 and reached == [] and read == []
    assert compared == [(b"guess", b"s3cret")]
    run({**scope, "headers": [(b"x-api-key", b"s3cret")]})
    run({"type": "http", "method": "GET", "path": "/", "headers": []})
    assert reached == ["/translate", "/"]


def test_translate_gives_every_attention_by_layer_and_head_when_asked(server, translator):
    """`"attention": "all"`: the best translation's `attentions` are the Python API's (an
    ensemble's members averaged), over the pieces they name; alternatives carry none."""
    sentence = SENTENCES[0]
    body = {"sentences": [sentence, ""], "attention": "all", "beam": 2, "n_best": 2}
    status, answer = server.post("/translate", body)
    assert status == 200, answer
    got, empty = answer["results"]
    (want,) = translator.translate([sentence], beam=2, n_best=2, attention="all")
    maps = want.attentions
    for name in ("source", "target", "inputs", "memory"):
        assert got["attentions"][name] == getattr(maps, name)
    for kind in ("encoder", "decoder", "cross"):
        layers = got["attentions"][kind]
        assert len(layers) == len(maps.layers(kind)) == 1
        assert torch.tensor(layers) == pytest.approx(torch.stack(maps.layers(kind)), abs=1e-3)
    assert got["attention"]["rows"] == want.tokens  # the matrix of attention=True, as before
    assert "attentions" not in got["alternatives"][0] and "attentions" not in empty
    status, answer = server.post("/translate", {"sentences": [sentence], "attention": "every"})
    assert status == 422, answer


@pytest.mark.slow
def test_an_attention_answer_over_the_servers_limit_is_refused_before_any_search(
    server, translator
):
    """The limit (--max-attention, 5000 here) bounds the weights an answer could carry, worked
    out here from each sentence's subwords and the model's length limit."""
    settings, tokenizer = translator.search_settings(), translator.task.src_tokenizer
    words, sentence = " ".join(SENTENCES).split(), []
    while len(tokenizer.encode(" ".join(sentence))) < 20:  # 20-30 subwords: under --max-length
        sentence.append(words[len(sentence) % len(words)])
    size = len(tokenizer.encode(" ".join(sentence)))
    assert 20 <= size <= 30
    over = [" ".join(sentence)] * 8
    sizes = [size] * 8

    def weights(lengths):
        return sum(
            (n + 1) * (int(settings.max_length_ratio * (n + 1)) + settings.max_length_offset + 1)
            for n in lengths
        )

    assert weights(sizes) > 5000 >= weights(sizes[:1])
    status, answer = server.post("/translate", {"sentences": over, "attention": True})
    assert status == 413, answer
    assert answer["detail"] == (
        f"with attention, these {len(over)} sentences could answer up to {weights(sizes):,} "
        "weights (source × output pieces); this server answers at most 5,000 a request: send "
        "fewer or shorter sentences, or ask without attention"
    )
    assert server.post("/translate", {"sentences": over})[0] == 200
    assert server.post("/translate", {"sentences": over[:1], "attention": True})[0] == 200
    # every attention: the served Transformer's 1 layer of 2 heads in each of the three kinds
    s, t = size + 1, int(settings.max_length_ratio * (size + 1)) + settings.max_length_offset + 1
    every = weights(sizes[:1]) + 2 * s * s + 2 * t * t + 2 * t * s
    assert every > 5000
    status, answer = server.post("/translate", {"sentences": over[:1], "attention": "all"})
    assert status == 413, answer
    assert answer["detail"] == (
        f"with every attention, these 1 sentences could answer up to {every:,} weights (every "
        "map, by layer and head); this server answers at most 5,000 a request: send fewer or "
        'shorter sentences, or ask for "attention": true'
    )
