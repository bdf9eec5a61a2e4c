"""What every task's endpoint shares (`ModelEndpoint`): a LitServe API around the `seqtasks.load`
model of its task (one checkpoint, or several as an ensemble), at the path the task gives it
(POST /translate, /parse, /caption: each task's `endpoint.py`).

Each runs in its own worker process (one per device × `workers_per_device`): `setup` loads the
model there and refuses a `--max-length` over what its encoder reads; `check` refuses, with a
message, what the model should not be given (too many sentences, a sentence over the limits, an
image too large or that does not decode, a bad form field), before the batch forms.

No `from __future__ import annotations` here: LitServe hands `decode_request`'s annotation to
FastAPI as the request body's type, which must be a class, not a string.
"""

import functools
from dataclasses import dataclass
from typing import Any

import torch

from seqtasks.data.tokenizer import EOS_ID
from seqtasks.search.settings import MAX_SOURCE_LENGTH, SearchSettings
from seqtasks.serving.batching import BatchedEndpoint, Job, RequestError
from seqtasks.serving.requests import SearchRequest
from seqtasks.serving.workers import report_setup_failure


@dataclass(frozen=True)
class Limits:
    """What one request may ask: sentences per request, characters per sentence, source
    tokens per sentence (subwords for /translate, words for /parse), an image's pixels, and
    the attention weights an answer may carry (source × output pieces, summed over its
    sentences: ~6 bytes of JSON each)."""

    max_sentences: int = 64
    max_chars: int = 2000
    max_length: int = MAX_SOURCE_LENGTH
    max_pixels: int = 50_000_000
    max_attention: int = 1_000_000


class ModelEndpoint(BatchedEndpoint):
    """A task's endpoint: the checkpoints to load in each worker, the request limits, torch's
    threads in a CPU worker (None: torch's default), and LitServe's batching settings (their
    defaults are `ServerSettings`')."""

    path = "/predict"
    unit: str | None = None  # what --max-length counts, for a model that reads tokens
    # What the page's form for this endpoint sends ("text": `{"sentences": [...]}` as JSON;
    # "image": an upload), its heading, the label of its input and of its button.
    reads = "text"
    title, prompt, action = "Model", "Input", "Send"
    takes_attention = True  # whether a request may ask for the attention (`"attention": true`)

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
        """Load the model in this worker (on `device`, "cpu" or "cuda:N"); if it cannot be,
        the server is told why before the worker ends (`workers`)."""
        import seqtasks

        try:
            if device == "cpu" and self.threads:
                torch.set_num_threads(self.threads)
            self.model = seqtasks.load(self.checkpoints, device=device)
            self.check_positions()
        except Exception as error:
            report_setup_failure(self, device, error)
            raise

    def check_positions(self) -> None:
        """Refuse (ValueError) a `--max-length` over what the model's encoder reads (a
        Transformer's positional table, less one for the source's EOS), which the model would
        otherwise cut silently."""
        positions = self.model.task.encoder.max_positions if self.unit else None
        if positions is not None and self.limits.max_length > positions - 1:
            raise ValueError(
                f"--max-length {self.limits.max_length} is more than this model reads: its "
                f"encoder takes {positions} positions, at most {positions - 1} {self.unit} and "
                f"the source's EOS; start the server with --max-length {positions - 1} or less"
            )

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

    def check_length(self, index: int, length: int) -> None:
        """Refuse (413) a sentence of more source tokens (`unit`) than the limit."""
        if length > self.limits.max_length:
            raise RequestError(
                413,
                f"sentence {index} has {length} {self.unit}; this server takes at most "
                f"{self.limits.max_length}",
            )

    def job(self, inputs: list[Any], request: SearchRequest) -> Job:
        """The request's inputs with the search settings it asks for, the model's where it
        gives none (`search_settings`); 422 for settings that cannot work together."""
        attention = getattr(request, "attention", False)
        try:
            settings = self.search_settings(request)
            if attention:
                self.model.require_attention()
        except ValueError as error:  # an n_best over the beam; a decoder without attention
            raise RequestError(422, str(error)) from None
        return Job(inputs, settings, attention)

    def search_settings(self, request: SearchRequest) -> SearchSettings:
        """What the request's results are searched with: the model's settings, with the beam
        and n_best it gives (`Model.search_settings`, which checks them)."""
        return self.model.search_settings(request.beam, request.n_best)

    def check_attention(self, request: SearchRequest, lengths: list[int]) -> None:
        """Refuse (413), before any search, an answer whose attention could hold more weights
        than the limit: per sentence, its source pieces (with EOS) S × the most output pieces
        the search may write for it T (`max_length_ratio` · S + `max_length_offset` + 1); with
        "all" also every map's: S × S for each head of the encoder's (`layout`), T × T of the
        decoder's, T × S of the cross-attention's."""
        asked = getattr(request, "attention", False)
        if not asked:
            return
        settings = self.model.search_settings()
        ratio, offset = settings.max_length_ratio, settings.max_length_offset
        sizes = [(n + 1, int(ratio * (n + 1)) + offset + 1) for n in lengths]  # (S, T) at most
        weights = sum(s * t for s, t in sizes)
        if asked == "all":  # every map: the encoder's S × S, the decoder's T × T, cross T × S
            heads = self.layout
            weights += sum(
                sum(heads["encoder"]) * s * s
                + sum(heads["decoder"]) * t * t
                + sum(heads["cross"]) * t * s
                for s, t in sizes
            )
        if weights > self.limits.max_attention:
            raise RequestError(
                413,
                f"with {'every ' if asked == 'all' else ''}attention, these {len(lengths)} "
                f"sentences could answer up to {weights:,} weights ("
                + ("every map, by layer and head" if asked == "all" else "source × output pieces")
                + f"); this server answers at most {self.limits.max_attention:,} a request: send "
                "fewer or shorter sentences, or ask "
                + ('for "attention": true' if asked == "all" else "without attention"),
            )

    @functools.cached_property
    def layout(self) -> dict[str, list[int]]:
        """The heads of every map `attention="all"` gives, by kind, layer by layer (a Universal
        Transformer's one layer once per depth step), read from one pass over a one-piece
        source and target."""
        piece = [EOS_ID + 1]
        (maps,) = self.model.every_attention([piece], [piece])
        return {kind: [m.size(0) for m in layers] for kind, layers in maps.items()}

    def check(self, request: Any) -> Job:
        """Refuse (413) too many sentences (`request.sentences`), one over the limits, or an
        attention answer over its limit; the model's inputs (`read`) as a job (an endpoint of
        other inputs overrides this)."""
        self.check_count(request.sentences)
        inputs, lengths = [], []
        for i, sentence in enumerate(request.sentences):
            self.check_chars(i, sentence)
            source, length = self.read(i, sentence)
            self.check_length(i, length)
            inputs.append(source)
            lengths.append(length)
        self.check_attention(request, lengths)
        return self.job(inputs, request)

    def read(self, index: int, sentence: Any) -> tuple[Any, int]:
        """What the model is given for sentence `index`, and its length in `unit`."""
        raise NotImplementedError

    def respond(self, results: list[Any]) -> dict[str, Any]:
        """`{"results": [...]}`, each result as the task's endpoint answers it (`answers`)."""
        return {"results": [self.answer(found) for found in results]}

    def answer(self, found: Any) -> dict[str, Any]:
        """One result's answer (`answers.result`, with what the task adds)."""
        raise NotImplementedError

    @classmethod
    def form(cls) -> dict[str, str]:
        """What the page needs to draw this endpoint's form (`page.describe`)."""
        return {
            "path": cls.path,
            "reads": cls.reads,
            "title": cls.title,
            "prompt": cls.prompt,
            "action": cls.action,
            "attention": cls.takes_attention,
        }


def default_threads(workers_per_device: int) -> int:
    """Torch threads for each CPU worker: torch's default (the cores, or OMP_NUM_THREADS),
    shared out among the workers of a device."""
    return max(1, torch.get_num_threads() // workers_per_device)
