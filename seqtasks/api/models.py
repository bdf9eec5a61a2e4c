"""What `seqtasks.load` returns: a trained model for one task, called from Python.

    model = seqtasks.load("best.ckpt")
    model.translate(["Ein Hund rennt."], beam=5)     # Translator
    model.parse(["Pierre Vinken will join the board."])  # Parser
    model.caption(["photo.jpg"])                      # Captioner

Each takes any number of inputs and batches them itself (length-sorted batches of a token
budget, or of a number of images), and returns one typed result per input, in input order:
`Translation`, `Parse` or `Caption`, each with its text, tokens, score, attention when asked
for, and the rest of its n-best list in `alternatives`. The apps are thin callers of these.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import torch
from torch import Tensor

from seqtasks.data.captions import ImageSource, load_image
from seqtasks.data.text import check_text
from seqtasks.parsing.ptb_text import PTBTokenizer, check_tokens, escape_brackets
from seqtasks.search import check_stop
from seqtasks.search.budget import TokenBudget, batch_tokens, check_max_tokens
from seqtasks.tasks import CaptioningTask, EncoderDecoderTask, ParsingTask, TranslationTask
from seqtasks.tasks.captioning import Caption
from seqtasks.tasks.parsing import Parse
from seqtasks.tasks.translation import Translation

__all__ = ["Caption", "Captioner", "Model", "Parse", "Parser", "Translation", "Translator"]


def _check(
    beam: int, n_best: int, stop: str | None, max_tokens: TokenBudget = "auto", **sizes: int
) -> None:
    """Refuse search settings that cannot work, naming them, before any input is read."""
    check_max_tokens(max_tokens)
    for name, value in {"beam": beam, "n_best": n_best, **sizes}.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if n_best > beam:
        raise ValueError(f"n_best={n_best} cannot exceed beam={beam}")
    if stop is not None:
        check_stop(stop)


def _inputs(items: Sequence, what: str) -> list:
    """`items` as a list, refusing a lone string (a sequence of characters, not of inputs)."""
    if isinstance(items, (str, bytes)):
        raise TypeError(f"pass a list of {what}, not a single string: [{items[:30]!r}]")
    return list(items)


def _sentences(items: Sequence) -> list[str]:
    """`items` as a list of strings that a tokeniser can read.

    Raises:
        TypeError: for a lone string, or an item that is not a string (naming its position).
        ValueError: for a string that is not valid Unicode (`check_text`), naming its position.
    """
    sentences = _inputs(items, "sentences")
    for i, sentence in enumerate(sentences):
        if not isinstance(sentence, str):
            raise TypeError(f"sentence {i} is a {type(sentence).__name__}, not a string")
        check_text(sentence, f"sentence {i}")
    return sentences


class Model:
    """A trained task in eval mode (`task`, a LightningModule), loaded from `checkpoints`
    (several: an ensemble)."""

    def __init__(self, task: EncoderDecoderTask, checkpoints: Sequence[Path]):
        self.task = task
        self.checkpoints = list(checkpoints)

    @property
    def device(self) -> torch.device:
        return self.task.device

    def batch_tokens(
        self, max_tokens: TokenBudget, beam: int, attention_sources: int | None = None
    ) -> int:
        """Source tokens per batch: `max_tokens`, or for "auto" what suits the model's device
        (`seqtasks.search.budget.batch_tokens`: 2,000 on a CPU, by free memory on a GPU)."""
        task = self.task
        encoders = getattr(task.encoder, "members", [task.encoder])  # an ensemble's, each
        return batch_tokens(
            max_tokens,
            self.device,
            task.decoder,
            sum(encoder.out_dim for encoder in encoders),
            beam,
            task.max_length_ratio,
            task.max_length_offset,
            attention_sources,
        )

    def require_attention(self) -> None:
        """Raise a ValueError naming the decoder if results cannot carry attention."""
        if not self.gives_attention:
            name = type(self.task.decoder).__name__
            raise ValueError(f"attention was asked for, but the model's {name} has no attention")

    def to(self, device: str | torch.device) -> Model:
        """Move the model to `device`; returns itself."""
        self.task.to(device)
        return self

    @property
    def gives_attention(self) -> bool:
        """Whether results can carry attention weights (the decoder has attention)."""
        return self.task.decoder.gives_attention

    def __repr__(self) -> str:
        names = ", ".join(str(path) for path in self.checkpoints)
        return f"{type(self).__name__}({names}, device={self.device})"


class Translator(Model):
    """A translation model and its sentencepiece models."""

    task: TranslationTask

    def translate(
        self,
        sentences: Sequence[str],
        beam: int = 5,
        n_best: int = 1,
        attention: bool = False,
        max_length: int = 250,
        max_tokens: TokenBudget = "auto",
        stop: str | None = None,
    ) -> list[Translation]:
        """One `Translation` per sentence (raw text), in order; an empty sentence gives an
        empty translation, a source over `max_length` subwords is cut (with a warning).
        Batches hold about `max_tokens` source subwords ("auto": by device, `batch_tokens`).
        `attention` keeps each translation's attention matrix (its pieces × the source's,
        `source_pieces`). `stop`: when beam search ends ("exact" or "heuristic",
        `seqtasks.search.beam_search`); by default the model's own (`beam_stop`, "exact" unless
        trained otherwise)."""
        _check(beam, n_best, stop, max_tokens, max_length=max_length)
        sentences = _sentences(sentences)
        if attention:
            self.require_attention()
        limit = self.source_limit(max_length)
        results = self.task.translate(
            sentences,
            beam_size=beam,
            n_best=n_best,
            max_tokens=self.batch_tokens(max_tokens, beam, limit + 1 if attention else None),
            max_length=limit,
            return_attention=attention,
            stop=stop,
        )
        return [replace(nbest[0], alternatives=list(nbest[1:])) for nbest in results]

    def source_pieces(self, sentence: str, max_length: int = 250) -> list[str]:
        """The subwords the model reads for `sentence`, plus EOS: the columns of its attention."""
        return self.task.source_pieces(sentence, self.source_limit(max_length))

    def source_limit(self, max_length: int) -> int:
        """`max_length`, or fewer subwords if the encoder reads fewer positions (the source's
        EOS takes one): longer sources are then cut there, with the same warning."""
        positions = self.task.encoder.max_positions
        return max_length if positions is None else min(max_length, positions - 1)


class Parser(Model):
    """A parser and its vocabularies: sentences in, constituency trees out."""

    task: ParsingTask

    def __init__(self, task: ParsingTask, checkpoints: Sequence[Path]):
        super().__init__(task, checkpoints)
        self._ptb = PTBTokenizer(task.vocabulary.words)

    def parse(
        self,
        sentences: Sequence[str | Sequence[str]],
        beam: int = 10,
        n_best: int = 1,
        tags: Sequence[Sequence[str]] | None = None,
        max_tokens: TokenBudget = "auto",
        stop: str | None = None,
    ) -> list[Parse]:
        """One `Parse` per sentence, in order. A sentence is a string, split into PTB tokens
        (round brackets become -LRB- -RRB-, quotes `` ''), or a list of tokens, taken as they
        are. With `tags` the preterminals carry them instead of what the model writes. An
        empty sentence gives the empty tree `(TOP )`. `stop` and `max_tokens` (in words) as for
        `Translator.translate`; on a GPU an "auto" budget also bounds the search rows (words ×
        beam), which the task otherwise caps at a CPU's `max_rows`."""
        _check(beam, n_best, stop, max_tokens)
        sentences = _inputs(sentences, "sentences")
        words = [self.tokens(sentence, i) for i, sentence in enumerate(sentences)]
        for i, tokens in enumerate(words):
            if self.max_words is not None and len(tokens) > self.max_words:
                raise ValueError(
                    f"sentence {i} has {len(tokens)} tokens; this parser reads at most "
                    f"{self.max_words} (its encoder's max_positions, less one for the EOS)"
                )
        if tags is not None and [len(t) for t in tags] != [len(w) for w in words]:
            raise ValueError("tags must give one tag per token of every sentence")
        tokens = self.batch_tokens(max_tokens, beam)
        on_gpu = max_tokens == "auto" and self.device.type == "cuda"
        rows = {"max_rows": tokens * beam} if on_gpu else {}
        return self.task.parse(
            words, beam_size=beam, tags=tags, max_tokens=tokens, n_best=n_best, stop=stop, **rows
        )

    @property
    def max_words(self) -> int | None:
        """The most tokens a sentence may have (None: any): a Transformer encoder reads its
        `max_positions`, one of them the EOS; a tree cannot cover a sentence cut short."""
        positions = self.task.encoder.max_positions
        return None if positions is None else positions - 1

    def tokens(self, sentence: str | Sequence[str], index: int = 0) -> list[str]:
        """The PTB tokens the parser reads for `sentence` (number `index`, for messages).

        Raises:
            TypeError: for a sentence that is neither a string nor a list of strings.
            ValueError: for text that is not valid Unicode, or a token that cannot be a leaf
                (empty, or holding white space: `check_tokens`).
        """
        what = f"sentence {index}"
        if isinstance(sentence, str):
            check_text(sentence, what)
            return self._ptb.tokenize(sentence)
        if not isinstance(sentence, Sequence) or not all(isinstance(t, str) for t in sentence):
            raise TypeError(f"{what} must be a string or a list of string tokens")
        for token in sentence:
            check_text(token, what)
        check_tokens(sentence, what)
        return escape_brackets(sentence)


class Captioner(Model):
    """A captioning model, its word vocabulary and the image size it was trained on."""

    task: CaptioningTask

    @property
    def image_size(self) -> int:
        return self.task.image_size

    def caption(
        self,
        images: Sequence[ImageSource] | Tensor,
        beam: int = 3,
        n_best: int = 1,
        attention: bool = False,
        batch_size: int = 16,
        stop: str | None = None,
    ) -> list[Caption]:
        """One `Caption` per image, in order. An image is a file path, the bytes of an encoded
        image (an upload), a PIL image, or a row of a (B, 3, S, S) tensor of RGB in [0, 1] at
        S = `image_size`. `attention` keeps each word's attention over the image grid. `stop`
        as for `Translator.translate`.

        Raises:
            OSError: naming the first image that cannot be read (`read` it first to caption
                the readable ones of a mixed list).
        """
        _check(beam, n_best, stop, batch_size=batch_size)
        if attention:
            self.require_attention()
        if not isinstance(images, Tensor):
            images = self.read(_inputs(images, "images"))
        captions: list[Caption] = []
        for first in range(0, len(images), batch_size):
            batch = images[first : first + batch_size]
            captions += self.task.caption(
                batch, beam, return_attention=attention, n_best=n_best, stop=stop
            )
        return captions

    def read(self, images: Sequence[ImageSource]) -> Tensor:
        """(B, 3, S, S) the images' pixels at the model's size.

        Raises:
            OSError: naming the first image that cannot be read (by its path or position).
        """
        if not images:
            return torch.empty(0, 3, self.image_size, self.image_size)
        return torch.stack(
            [load_image(image, self.image_size, _name(image, i)) for i, image in enumerate(images)]
        )


def _name(image: ImageSource, position: int) -> str:
    """How an error names an image: its path, or its position in the list."""
    if isinstance(image, (str, Path)):
        return str(image)
    return f"#{position}" + (f" ({len(image)} bytes)" if isinstance(image, bytes) else "")
