"""Fuzzed requests for `seqtasks serve`: a seeded generator of hostile bodies (random bytes,
JSON of odd shapes and numbers, deep nesting, lone surrogates, unusual digits, broken multipart
forms, image bombs), and the server's request handling run on thousands of them in this process,
without a server: every body must end as a refusal with a message (or a valid request), and
every answer must be writable as JSON. tests/serving/test_serve.py sends a few hundred of them to
a real server. Set SERVE_FUZZ_SEED to replay a run; each run prints the seed it used.
"""

from __future__ import annotations

import asyncio
import functools
import io
import json
import os
import random
import string

import pytest
import torch
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from PIL import Image
from pydantic import ValidationError

from seqtasks.captioning.captions import load_image
from seqtasks.captioning.endpoint import form_settings
from seqtasks.captioning.uploads import UploadError, read_image, read_upload
from seqtasks.parsing.endpoint import ParseRequest
from seqtasks.serving.batching import RequestError
from seqtasks.serving.validation import FALLBACK, validation_error_answer
from seqtasks.translation.endpoint import TranslateRequest

JSON = "application/json"
CURL_D = "application/x-www-form-urlencoded"
PATHS = ("/translate", "/parse", "/caption")
ODD_TEXT = [
    "\ud800",  # lone surrogates: JSON can write them as \ud800, UTF-8 cannot
    "\udfff",
    "\x00",
    "\u00a0",
    "\u2028",
    "\ufeff",
    "\u200b",
    "\u0301",
    "²",
    "١",
    "５",
    "Ⅻ",
    "😀",
    "ß",
    "漢",
    " ",
    "\t",
    "\n",
    "(",
    ")",
]
ODD_NUMBERS = ["NaN", "Infinity", "-Infinity", "1e400", "-0", "1.5", "9" * 30, "1e-400", "5.0"]


def fuzz_seed() -> int:
    """SERVE_FUZZ_SEED if set, else a fresh seed; printed so that a failure can be replayed."""
    seed = int(os.environ.get("SERVE_FUZZ_SEED", random.randrange(2**32)))
    print(f"SERVE_FUZZ_SEED={seed}")
    return seed


def png(width: int, height: int, mode: str = "1") -> bytes:
    """A PNG of one colour: a few hundred bytes even for a gigapixel (a decompression bomb)."""
    out = io.BytesIO()
    Image.new(mode, (width, height)).save(out, "PNG")
    return out.getvalue()


IMAGE = png(40, 30, "RGB")


def text(rng: random.Random, size: int = 12) -> str:
    """A string of ASCII letters, odd characters and lone surrogates."""
    pool = string.ascii_letters + string.digits + " .,"
    return "".join(
        rng.choice(ODD_TEXT) if rng.random() < 0.25 else rng.choice(pool)
        for _ in range(rng.randint(0, size))
    )


def value(rng: random.Random, depth: int = 0) -> object:
    """A random JSON value: scalars of every kind, lists and objects a few levels deep."""
    kind = rng.randrange(9 if depth < 3 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, 1, -1, 5, 16, 17, 2**63, -(2**70), 10**300])
    if kind == 3:
        return rng.choice([0.5, -1.0, 1e308, float("nan"), float("inf"), -float("inf")])
    if kind in (4, 5):
        return text(rng)
    if kind in (6, 7):
        return [value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {text(rng, 6): value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def near_request(rng: random.Random, path: str) -> dict:
    """A body shaped almost like a real request: sentences of odd text or tokens, odd beams."""
    if path == "/parse" and rng.random() < 0.5:
        sentences = [[text(rng, 5) for _ in range(rng.randint(0, 4))] for _ in range(2)]
    else:
        sentences = [text(rng, 30) for _ in range(rng.randint(0, 3))]
    body: dict = {"sentences": rng.choice([sentences, value(rng), [value(rng)]])}
    for key in ("beam", "n_best"):
        if rng.random() < 0.5:
            body[key] = rng.choice([1, 2, 3, 0, 17, -1, True, "2", 2.0, None, 10**40])
    if rng.random() < 0.1:
        body[text(rng, 4)] = value(rng)
    return body


def json_text(rng: random.Random, path: str) -> bytes:
    """JSON text, some of it invalid: odd number literals, deep nesting, duplicate keys."""
    shape = rng.randrange(6)
    if shape == 0:
        depth = rng.choice([50, 500, 950, 1100, 3000])
        opening, closing = rng.choice([("[", "]"), ('{"a":', "}")])
        return (opening * depth + "1" + closing * depth).encode()
    if shape == 1:
        return f'{{"sentences": ["a"], "beam": {rng.choice(ODD_NUMBERS)}}}'.encode()
    if shape == 2:
        return b'{"sentences": ["a"], "sentences": ["b"], "beam": 2, "beam": 3}'
    body = near_request(rng, path) if shape in (3, 4) else value(rng)
    return json.dumps(body, ensure_ascii=rng.random() < 0.7).encode("utf-8", "surrogatepass")


def form(rng: random.Random) -> tuple[bytes, str]:
    """A multipart form as /caption reads it, with random fields, files and defects."""
    boundary = rng.choice(["B0und", "----x", "a" * 70, "q'()+_,./:=?-"])
    parts = []
    for _ in range(rng.choice([0, 1, 2, 3, 12])):
        name = rng.choice(["beam", "n_best", "image", "file", "", text(rng, 5)])
        data = rng.choice(
            [b"2", "²".encode(), "١".encode(), "５".encode(), b"\xff\xfe", b"9" * 5000, b"0"]
        )
        if rng.random() < 0.4:
            name, data = rng.choice(["image", "file", "x"]), rng.choice([IMAGE, IMAGE[:40], b""])
            disposition = f'form-data; name="{name}"; filename="a.png"'
        else:
            disposition = f'form-data; name="{name}"'
        raw = disposition.encode("utf-8", "surrogatepass")
        if rng.random() < 0.1:
            raw = raw.replace(b"name=", b"name*=utf-8''%FF")
        parts.append(
            b"--%s\r\nContent-Disposition: %s\r\n\r\n%s\r\n" % (boundary.encode(), raw, data)
        )
    end = b"--%s--\r\n" % boundary.encode() if rng.random() < 0.8 else rng.choice([b"", b"--"])
    return b"".join(parts) + end, f"multipart/form-data; boundary={boundary}"


def image_body(rng: random.Random) -> bytes:
    """An image upload: a real one, one cut short or damaged, random bytes, or a bomb."""
    return rng.choice(
        [
            IMAGE,
            IMAGE[: rng.randint(0, len(IMAGE))],
            IMAGE[:60] + rng.randbytes(40) + IMAGE[100:],
            b"\x89PNG\r\n\x1a\n" + rng.randbytes(50),
            b"GIF89a" + rng.randbytes(30),
            bomb(),
        ]
    )


@functools.cache
def bomb() -> bytes:
    """A PNG of 400 megapixels in 48 kB (made once, when first asked for: it takes a second)."""
    return png(20000, 20000)


def fuzz_requests(rng: random.Random, count: int) -> list[tuple[str, bytes, str | None]]:
    """`count` (path, body, content type) requests of every hostile kind, from `rng`."""
    requests = []
    for _ in range(count):
        path = rng.choice(PATHS)
        kind = rng.randrange(5)
        content_type = rng.choice([JSON, JSON, CURL_D, None, "text/plain", "image/png"])
        if kind == 0:
            body = rng.randbytes(rng.randint(0, 200))
        elif kind == 1 or path != "/caption":
            body = json_text(rng, path)
        elif kind == 2:
            body, content_type = form(rng)
        else:
            body, content_type = image_body(rng), rng.choice(["image/png", "image/jpeg", None])
        requests.append((path, body, content_type))
    return requests


# ---- the server's request handling in this process ------------------------------------------
def answer_detail(response: JSONResponse) -> object:
    """The detail of a JSON answer, which must have been written as strict JSON."""
    return json.loads(response.body)["detail"]


def handle_json_body(path: str, body: bytes, content_type: str | None) -> None:
    """What FastAPI and the request models do with a /translate or /parse body: a refusal must
    come as a ValidationError (FastAPI's RequestValidationError) whose 422 answer can be
    written, or a failure FastAPI answers 400 (a body its JSON reader cannot read)."""
    model = TranslateRequest if path == "/translate" else ParseRequest
    if content_type == JSON:  # otherwise FastAPI hands the model the body's bytes
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            return  # FastAPI's 400, written by validation.http_error_answer
    else:
        data = body
    try:
        model.model_validate(data)
    except ValidationError as error:
        refused = RequestValidationError(error.errors())
        response = asyncio.run(validation_error_answer(None, refused))
        assert response.status_code == 422
        assert answer_detail(response) not in ([], FALLBACK), "its problems were not written"


class Captioner:
    """What read_image needs of a captioner: its image size and reader (the real load_image)."""

    image_size = 16

    def read(self, images: list[bytes]) -> torch.Tensor:
        return torch.stack([load_image(image, self.image_size) for image in images])


def handle_caption_body(body: bytes) -> None:
    """What the /caption endpoint's check does with a body: a Job's parts, or a RequestError."""
    try:
        upload = read_upload(body)
        form_settings(upload.fields)
        read_image(Captioner(), upload.image, max_pixels=10**6)
    except UploadError as error:
        assert str(error)
    except RequestError as error:
        assert 400 <= error.status < 500 and error.detail
        json.dumps(error.detail, ensure_ascii=False).encode("utf-8")


def test_fuzzed_bodies_are_refused_with_a_message_and_never_raise_anything_else():
    seed = fuzz_seed()
    rng = random.Random(seed)
    for number, (path, body, content_type) in enumerate(fuzz_requests(rng, 3000)):
        try:
            if path == "/caption":
                handle_caption_body(body)
            else:
                handle_json_body(path, body, content_type)
        except Exception as error:
            pytest.fail(
                f"SERVE_FUZZ_SEED={seed}, request {number} ({path}, {content_type}, "
                f"{body[:200]!r}): {type(error).__name__}: {error}"
            )


def test_the_fuzz_is_reproducible_and_holds_every_kind():
    first, again = fuzz_requests(random.Random(7), 400), fuzz_requests(random.Random(7), 400)
    assert first == again
    bodies = b"\n".join(body for _, body, _ in first)
    for piece in (
        b"NaN",
        b"Infinity",
        b"\\ud8",
        b"[" * 950,
        "\u00b2".encode(),
        b"\xff\xfe",
        bomb(),
    ):
        assert piece in bodies, piece
    assert any(t and t.startswith("multipart/form-data") for *_, t in first)
