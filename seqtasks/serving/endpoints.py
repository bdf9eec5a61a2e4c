"""The three endpoints: POST /translate, /parse and /caption, each a LitServe API around the
`seqtasks.load` model of its task (one checkpoint, or several as an ensemble).

Each runs in its own worker process (one per device × `workers_per_device`): `setup` loads the
model there; `check` refuses, with a message, what the model should not be given (too many
sentences, a sentence over the limits, an image that does not decode), before the batch forms.

No `from __future__ import annotations` here: LitServe hands `decode_request`'s annotation to
FastAPI as the request body's type, which must be a class, not a string.
"""

from dataclasses import dataclass
from typing import Annotated, Any

import torch
from fastapi import Body
from pydantic import ValidationError

from seqtasks.serving.batching import BatchedEndpoint, Job, RequestError
from seqtasks.serving.requests import CaptionSettings, ParseRequest, TranslateRequest
from seqtasks.serving.uploads import UploadError, read_upload

ImageBody = Annotated[bytes, Body(media_type="application/octet-stream")]


@dataclass(frozen=True)
class Limits:
    """What one request may ask: sentences per request, characters per sentence, and source
    tokens per sentence (subwords for /translate, words for /parse)."""

    max_sentences: int = 64
    max_chars: int = 2000
    max_length: int = 250


class ModelEndpoint(BatchedEndpoint):
    """A task's endpoint: the checkpoints to load in each worker, the request limits, torch's
    threads in a CPU worker (None: torch's default), and LitServe's batching settings (their
    defaults are `ServerSettings`')."""

    path = "/predict"

    def __init__(
        self,
        checkpoints: list[str],
        limits: Limits,
        threads: int | None,
        max_batch_size: int,
        batch_timeout: float,
    ):
        super().__init__(
            max_batch_size=max_batch_size, batch_timeout=batch_timeout, api_path=self.path
        )
        self.checkpoints = list(checkpoints)
        self.limits = limits
        self.threads = threads

    def setup(self, device: str) -> None:
        """Load the model in this worker (on `device`, "cpu" or "cuda:N")."""
        import seqtasks

        if device == "cpu" and self.threads:
            torch.set_num_threads(self.threads)
        self.model = seqtasks.load(self.checkpoints, device=device)

    def check_count(self, sentences: list[Any]) -> None:
        """Refuse (413) more sentences than one request may hold."""
        if len(sentences) > self.limits.max_sentences:
            raise RequestError(
                413,
                f"{len(sentences)} sentences in one request; this server takes at most "
                f"{self.limits.max_sentences} (send the rest in other requests)",
            )

    def check_chars(self, index: int, sentence: str | list[str]) -> None:
        """Refuse (413) a sentence of more characters than the limit (before tokenising it)."""
        chars = len(sentence) if isinstance(sentence, str) else sum(map(len, sentence))
        if chars > self.limits.max_chars:
            raise RequestError(
                413,
                f"sentence {index} has {chars} characters; this server takes at most "
                f"{self.limits.max_chars}",
            )

    def check_length(self, index: int, length: int, unit: str) -> None:
        """Refuse (413) a sentence of more source tokens (`unit`) than the limit."""
        if length > self.limits.max_length:
            raise RequestError(
                413,
                f"sentence {index} has {length} {unit}; this server takes at most "
                f"{self.limits.max_length}",
            )


class TranslateEndpoint(ModelEndpoint):
    """POST /translate `{"sentences": [...], "beam": 5, "n_best": 1}` ->
    `{"translations": [{"text": ..., "score": ...}, ...]}`, one per sentence, in order."""

    path = "/translate"

    def decode_request(self, request: TranslateRequest) -> Job | RequestError:
        return super().decode_request(request)

    def check(self, request: TranslateRequest) -> Job:
        self.check_count(request.sentences)
        for i, sentence in enumerate(request.sentences):
            self.check_chars(i, sentence)
            subwords = self.model.task.src_tokenizer.encode(sentence.strip())
            self.check_length(i, len(subwords), "subwords")
        return Job(request.sentences, request.beam, request.n_best)

    def run(self, inputs: list[str], beam: int, n_best: int) -> list[Any]:
        return self.model.translate(
            inputs, beam=beam, n_best=n_best, max_length=self.limits.max_length
        )

    def respond(self, results: list[Any]) -> dict[str, Any]:
        return {"translations": [_result(t, "text", t.text) for t in results]}


class ParseEndpoint(ModelEndpoint):
    """POST /parse `{"sentences": [...], "beam": 10}` -> `{"trees": ["(TOP (S ...))", ...],
    "scores": [...]}`, one per sentence, in order."""

    path = "/parse"

    def decode_request(self, request: ParseRequest) -> Job | RequestError:
        return super().decode_request(request)

    def check(self, request: ParseRequest) -> Job:
        self.check_count(request.sentences)
        words = []
        for i, sentence in enumerate(request.sentences):
            self.check_chars(i, sentence)
            words.append(self.model.tokens(sentence))
            self.check_length(i, len(words[-1]), "words")
        return Job(words, request.beam, request.n_best)

    def run(self, inputs: list[list[str]], beam: int, n_best: int) -> list[Any]:
        return self.model.parse(inputs, beam=beam, n_best=n_best)

    def respond(self, results: list[Any]) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "trees": [p.text for p in results],
            "scores": [float(p.score) for p in results],
        }
        if any(p.alternatives for p in results):
            answer["alternatives"] = [
                [{"tree": a.text, "score": float(a.score)} for a in p.alternatives] for p in results
            ]
        return answer


class CaptionEndpoint(ModelEndpoint):
    """POST /caption with an image as the body, or a multipart form with an `image` file and
    optional `beam`, `n_best` fields -> `{"caption": ..., "score": ...}`."""

    path = "/caption"

    def decode_request(self, request: ImageBody) -> Job | RequestError:
        return super().decode_request(request)

    def check(self, request: bytes) -> Job:
        try:
            upload = read_upload(request)
            fields = {k: int(v) if v.isdigit() else v for k, v in upload.fields.items()}
            settings = CaptionSettings.model_validate(fields)
        except UploadError as error:
            raise RequestError(422, str(error)) from None
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors()
            )
            raise RequestError(422, f"bad form field: {problems}") from None
        try:
            pixels = self.model.read([upload.image])[0]  # (3, S, S)
        except OSError as error:  # "cannot read image #0 (N bytes): <PIL's reason>"
            reason = str(error).partition(": ")[2]
            raise RequestError(
                422, f"cannot read the image ({len(upload.image)} bytes): {reason}"
            ) from None
        return Job([pixels], settings.beam, settings.n_best)

    def run(self, inputs: list[torch.Tensor], beam: int, n_best: int) -> list[Any]:
        return self.model.caption(torch.stack(inputs), beam=beam, n_best=n_best)

    def respond(self, results: list[Any]) -> dict[str, Any]:
        (caption,) = results
        return _result(caption, "caption", caption.text)


def _result(result: Any, key: str, text: str) -> dict[str, Any]:
    """`{key: text, "score": ...}` and, for an n-best list, its `alternatives` alike."""
    answer = {key: text, "score": float(result.score)}
    if result.alternatives:
        answer["alternatives"] = [
            {key: a.text, "score": float(a.score)} for a in result.alternatives
        ]
    return answer


def default_threads(workers_per_device: int) -> int:
    """Torch threads for each CPU worker: torch's default (the cores, or OMP_NUM_THREADS),
    shared out among the workers of a device."""
    return max(1, torch.get_num_threads() // workers_per_device)


ENDPOINTS: dict[str, type[ModelEndpoint]] = {
    "translation": TranslateEndpoint,
    "parsing": ParseEndpoint,
    "captioning": CaptionEndpoint,
}
