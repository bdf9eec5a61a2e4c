"""`seqtasks serve`'s handling of one request, without a server: the 422 answer to bodies
FastAPI refuses (it must be short, JSON-safe and unable to fail), the request models' checks,
`decode_request` / `encode_response` never raising for one request, uploads and images, and
the start-up checks (device, workers, `--max-length`)."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
from types import SimpleNamespace

import pytest
import torch
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from test_serve_fuzz import IMAGE, Captioner, bomb, png

from seqtasks.captioning.endpoint import CaptionSettings, form_settings
from seqtasks.captioning.uploads import UploadError, read_image, read_upload
from seqtasks.cli.serve import main
from seqtasks.devices import DeviceError
from seqtasks.parsing.endpoint import ParseRequest
from seqtasks.serving.batching import BatchedEndpoint, Job, RequestError
from seqtasks.serving.endpoint import Limits, ModelEndpoint
from seqtasks.serving.server import accelerator
from seqtasks.serving.validation import (
    FALLBACK,
    MAX_PROBLEMS,
    http_error_answer,
    validation_error_answer,
)
from seqtasks.serving.workers import WorkerSetupError, report_setup_failure, wait_for_workers
from seqtasks.translation.endpoint import TranslateRequest

NO_GPU = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")


def refusal(model: type, data: object) -> list[dict]:
    """The 422 answer's problems for `data`, checked to be strict JSON of a sane size."""
    with pytest.raises(ValidationError) as refused:
        model.model_validate(data)
    error = RequestValidationError(
        [{**e, "loc": ("body", *e["loc"])} for e in refused.value.errors()]
    )
    response = asyncio.run(validation_error_answer(None, error))
    assert response.status_code == 422 and len(response.body) < 5000
    return json.loads(response.body)["detail"]


# ---- the 422 answer -----------------------------------------------------------------------------
def test_a_refused_body_is_answered_with_short_json_safe_problems():
    (nan,) = refusal(TranslateRequest, {"sentences": ["a"], "beam": float("nan")})
    assert nan == {
        "type": "int_type",
        "loc": ["body", "beam"],
        "msg": "Input should be a valid integer",
        "input": "nan",
    }
    (long,) = refusal(TranslateRequest, {"sentences": "x" * 100_000})
    assert long["msg"] == "Input should be a valid list" and len(long["input"]) <= 101
    deep: list = []
    for _ in range(950):
        deep = [deep]
    (nested,) = refusal(TranslateRequest, deep)
    assert nested["input"] == "[[[[...]]]]"
    (key,) = refusal(TranslateRequest, {"sentences": ["a"], "\udcff": 1})
    assert "\\udcff" in json.dumps(key)
    many = refusal(TranslateRequest, {"sentences": list(range(1000))})
    assert len(many) == MAX_PROBLEMS + 1 and many[-1]["msg"] == "and 980 more"
    (curl,) = refusal(TranslateRequest, b'{"sentences": ["\xff\xfe hallo"]}')
    assert curl["msg"] == (
        "Value error, the body is not valid UTF-8 (byte 16): send a JSON object, with "
        "Content-Type: application/json"
    )
    assert curl["input"].startswith("27 bytes: b'")


def test_the_422_answer_cannot_fail():
    class Unwritable:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    error = RequestValidationError(
        [{"type": "x", "loc": ("body",), "msg": "m", "input": Unwritable()}]
    )
    answer = json.loads(asyncio.run(validation_error_answer(None, error)).body)["detail"]
    assert answer[0]["input"].startswith("<Unwritable instance at")
    broken = RequestValidationError([{"loc": 5}])  # not even a list of places
    response = asyncio.run(validation_error_answer(None, broken))
    assert response.status_code == 422 and json.loads(response.body)["detail"] == FALLBACK


def request_to(path: str) -> Request:
    return Request(
        {"type": "http", "method": "POST", "path": path, "headers": [], "query_string": b""}
    )


def parse_error(body: bytes) -> HTTPException:
    """FastAPI's HTTPException for a JSON body its reader cannot read."""
    try:
        json.loads(body)
    except (ValueError, RecursionError) as cause:
        error = HTTPException(400, "There was an error parsing the body")
        error.__cause__ = cause
        return error
    raise AssertionError("the body was read")


@pytest.mark.parametrize(
    "body, message",
    [
        (b'{"a": "\xff"}', "the body is not valid UTF-8 (byte 7): send a JSON object"),
        (b"[" * 100_000, "the body nests arrays or objects too deeply to be read: send a JSON"),
        (b'{"beam": ' + b"9" * 5000 + b"}", "(Exceeds the limit (4300 digits) for integer string"),
    ],
    ids=["invalid UTF-8", "deep nesting", "5000 digits"],
)
def test_a_json_body_that_cannot_be_read_gets_400_saying_what_to_send(body, message):
    response = asyncio.run(http_error_answer(request_to("/translate"), parse_error(body)))
    assert response.status_code == 400 and message in json.loads(response.body)["detail"]
    response = asyncio.run(http_error_answer(request_to("/caption"), parse_error(body)))
    assert "send an image with its own Content-Type" in json.loads(response.body)["detail"]
    other = asyncio.run(http_error_answer(request_to("/x"), HTTPException(404, "Not Found")))
    assert other.status_code == 404 and json.loads(other.body) == {"detail": "Not Found"}


# ---- the request models -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "model, sentences, message",
    [
        (
            TranslateRequest,
            ["a", "\ud800 hallo"],
            "sentence 1 is not valid Unicode text: it holds "
            "an unpaired surrogate U+D800 at character 0",
        ),
        (ParseRequest, ["a", "b \udfff"], "sentence 1 is not valid Unicode text"),
        (ParseRequest, [["a", "\ud800"]], "sentence 0, token 1 is not valid Unicode text"),
        (ParseRequest, ["a", ["", "a"]], "sentence 1: token 0 is empty"),
        (ParseRequest, [["a b", "c"]], "sentence 0: token 0 ('a b') holds white space"),
        (ParseRequest, [["x", "a\u00a0b"]], "sentence 0: token 1 ('a\\xa0b') holds white space"),
    ],
    ids=["surrogate", "parse surrogate", "surrogate token", "empty token", "space", "nbsp"],
)
def test_text_no_model_can_read_is_refused_naming_the_sentence_and_token(model, sentences, message):
    (problem,) = refusal(model, {"sentences": sentences})
    assert problem["loc"] == ["body", "sentences"] and message in problem["msg"]


def test_a_json_body_sent_as_curl_d_sends_it_is_read_or_refused_saying_why():
    assert TranslateRequest.model_validate(b'{"sentences": ["a"]}').sentences == ["a"]
    for body, message in [
        (b"[" * 5000, "the body nests arrays or objects too deeply"),
        (b"sentences=a", "the body is not a JSON object (Expecting value): send a JSON object"),
    ]:
        (problem,) = refusal(TranslateRequest, body)
        assert message in problem["msg"]


# ---- decode_request, predict and encode_response ------------------------------------------------
class Fragile(BatchedEndpoint):
    """An endpoint whose check, model and answer each fail on inputs chosen to make them."""

    def __init__(self):
        super().__init__(max_batch_size=8)

    def check(self, request: dict) -> Job:
        if "raise" in request:
            raise request["raise"]
        return Job(request["x"], 1, 1)

    def run(
        self, inputs: list[float], beam: int, n_best: int, attention: bool = False
    ) -> list[float]:
        if -1 in inputs:
            return inputs[:-1]  # a result short
        return [2 * x for x in inputs]

    def respond(self, results: list[float]) -> dict:
        if 7 in results:
            raise KeyError("seven")
        return {"y": results}


def test_no_request_fails_the_others_whatever_it_makes_fail():
    api = Fragile()
    requests = [
        {"x": [1]},
        {"raise": RuntimeError("Unable to cast Python instance")},  # as sentencepiece does
        {"raise": RecursionError()},
        {"raise": RequestError(413, "too big")},
        {"x": [float("nan"), float("inf")]},
        {"x": [3.5]},  # answered 7.0: its answer cannot be written
        {"x": [-1]},  # its model call gives no result
        {"x": [2, 3]},
    ]
    items = api.batch([api.decode_request(r) for r in requests])
    answers = [api.encode_response(y) for y in api.unbatch(api.predict(items))]
    got = [(a.status_code, json.loads(a.body)) for a in answers]
    assert got[0] == (200, {"y": [2]}) and got[7] == (200, {"y": [4, 6]})
    assert got[1] == (
        422,
        {"detail": "cannot read this request (RuntimeError: Unable to cast Python instance)"},
    )
    assert got[2] == (422, {"detail": "cannot read this request (RecursionError: no details)"})
    assert got[3] == (413, {"detail": "too big"})
    assert got[4] == (200, {"y": [None, None]})  # JSON has no NaN or Infinity
    assert got[5][0] == 500 and "failed to write the answer" in got[5][1]["detail"]
    assert got[6][0] == 500 and "the model failed on this request" in got[6][1]["detail"]


# ---- uploads and images -------------------------------------------------------------------------
def multipart(*parts: bytes, end: bytes = b"--B--\r\n") -> bytes:
    return b"".join(b"--B\r\n" + part + b"\r\n" for part in parts) + end


FIELD = b'Content-Disposition: form-data; name="%s"\r\n\r\n%s'
FILE = b'Content-Disposition: form-data; name="image"; filename="a.png"\r\n\r\n' + IMAGE


@pytest.mark.parametrize(
    "body, message",
    [
        (
            multipart(FIELD % (b"beam", b"2"), FIELD % (b"beam", b"3"), FILE),
            "two fields named 'beam'",
        ),
        (multipart(FILE, FILE), "two fields named 'image'"),
        (
            multipart(FIELD % (b"beam", b"\xff"), FILE),
            "form field 'beam' is not UTF-8 text (byte 0)",
        ),
        (multipart(FILE, end=b""), "does not end with its closing line --B-- (cut short?)"),
        (multipart(*[FIELD % (b"f%d" % i, b"1") for i in range(9)], FILE), "the form has 10 parts"),
        (multipart(b"Content-Type: text/plain\r\n\r\n2", FILE), "part 0 of the form has no name"),
    ],
    ids=["field twice", "image twice", "not UTF-8", "cut short", "too many parts", "no name"],
)
def test_forms_the_mime_parser_reads_loosely_are_refused_saying_why(body, message):
    with pytest.raises(
        UploadError, match=message.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")
    ):
        read_upload(body)


def test_whatever_the_mime_parser_raises_is_the_forms_422(monkeypatch):
    def fails(self, data: bytes) -> None:
        raise IndexError("list index out of range")

    monkeypatch.setattr("email.parser.BytesParser.parsebytes", fails)
    with pytest.raises(UploadError, match=r"cannot read the form \(IndexError\)"):
        read_upload(multipart(FILE))


@pytest.mark.parametrize("digits", ["²", "١", "５", "9" * 7, "-1"])
def test_form_numbers_must_be_ascii_digits(digits):
    with pytest.raises(RequestError) as refused:
        form_settings({"beam": digits})
    assert refused.value.status == 422
    assert (
        refused.value.detail
        == f"bad form field: beam: Input should be a valid integer (got {digits!r})"
    )
    assert form_settings({"beam": "12", "n_best": "2"}) == CaptionSettings(beam=12, n_best=2)


def damaged_png() -> bytes:
    """A PNG whose first chunk after the header is renamed: Pillow raises SyntaxError."""
    data = bytearray(IMAGE)
    data[37:41] = b"IDxT"
    return bytes(data)


def test_images_are_refused_by_size_before_decoding_and_by_reason_after():
    model = Captioner()
    with pytest.raises(RequestError) as huge:
        read_image(model, bomb(), max_pixels=50_000_000)
    assert huge.value.status == 413
    assert huge.value.detail.startswith(
        "the image has 400,000,000 pixels; this server takes at most"
    )
    with pytest.raises(RequestError) as large:
        read_image(model, png(200, 100), max_pixels=10_000)
    assert large.value.status == 413 and "20,000 pixels" in large.value.detail
    for data in (damaged_png(), IMAGE[:50], b"GIF89a"):
        with pytest.raises(RequestError) as unreadable:
            read_image(model, data, max_pixels=10_000)
        assert unreadable.value.status == 422
        assert unreadable.value.detail.startswith(f"cannot read the image ({len(data)} bytes): ")
    assert read_image(model, IMAGE, max_pixels=1200).shape == (3, 16, 16)


def test_an_image_pillow_fails_on_in_an_unexpected_way_is_still_that_requests_422():
    class Fails(Captioner):
        def read(self, images: list[bytes]) -> torch.Tensor:
            raise ValueError("tile cannot extend outside image")

    with pytest.raises(RequestError) as refused:
        read_image(Fails(), IMAGE, max_pixels=10_000)
    assert (
        refused.value.status == 422 and "tile cannot extend outside image" in refused.value.detail
    )


# ---- start-up ---------------------------------------------------------------------------------
@NO_GPU
def test_a_gpu_that_is_not_here_is_refused_before_anything_starts(tmp_path, capsys):
    with pytest.raises(DeviceError, match="device 'cuda' is not here"):
        accelerator("cuda")
    (tmp_path / "empty.ckpt").touch()  # there: the device is what is refused
    assert main([str(tmp_path / "empty.ckpt"), "--device", "cuda"]) == 2
    assert capsys.readouterr().err.startswith("error: device 'cuda' is not here")


def test_an_unknown_device_is_refused(tmp_path, capsys):
    (tmp_path / "empty.ckpt").touch()  # there: the device is what is refused
    assert main([str(tmp_path / "empty.ckpt"), "--device", "tpu"]) == 2
    assert capsys.readouterr().err.startswith("error: unknown device 'tpu'")
    assert accelerator("cpu") == ("cpu", 1)


class Worker:
    def __init__(self, alive: bool, exitcode: int | None = None):
        self.alive, self.exitcode = alive, exitcode

    def is_alive(self) -> bool:
        return self.alive


def test_the_server_waits_for_every_worker_and_ends_with_a_failed_ones_reason():
    failures = multiprocessing.get_context("spawn").SimpleQueue()
    wait_for_workers({"translate_0": "ready", "parse_0": "ready"}, [Worker(True)] * 2, failures)
    endpoint = SimpleNamespace(api_path="/translate", setup_failures=failures)
    report_setup_failure(endpoint, "cpu", ValueError("--max-length 5000 is more\nthan it reads"))
    with pytest.raises(
        WorkerSetupError,
        match="^/translate could not start on cpu: --max-length 5000 is more than it reads$",
    ):
        wait_for_workers(
            {"translate_0": "error", "parse_0": "ready"}, [Worker(False, 0), Worker(True)], failures
        )
    with pytest.raises(WorkerSetupError, match=r"exit code -9, killed: out of memory\?"):
        wait_for_workers({"translate_0": "starting"}, [Worker(False, -9)], failures)
    with pytest.raises(WorkerSetupError, match="no worker was started"):
        wait_for_workers({}, [], failures)


@pytest.mark.parametrize("max_length, positions", [(250, 1024), (1023, 1024), (5000, None)])
def test_a_max_length_within_what_the_encoder_reads_is_taken(max_length, positions):
    endpoint = translate_endpoint(max_length, positions)
    endpoint.check_positions()


def translate_endpoint(max_length: int, positions: int | None) -> ModelEndpoint:
    from seqtasks.translation.endpoint import TranslateEndpoint

    endpoint = TranslateEndpoint(["x.ckpt"], Limits(max_length=max_length), None, 8, 0.01)
    endpoint.model = SimpleNamespace(
        task=SimpleNamespace(encoder=SimpleNamespace(max_positions=positions))
    )
    return endpoint


def test_a_max_length_over_what_the_encoder_reads_is_refused_naming_both():
    with pytest.raises(ValueError) as refused:
        translate_endpoint(1024, 1024).check_positions()
    assert str(refused.value) == (
        "--max-length 1024 is more than this model reads: its encoder takes 1024 positions, at "
        "most 1023 subwords and the source's EOS; start the server with --max-length 1023 or less"
    )
