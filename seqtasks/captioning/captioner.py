"""`Captioner`: images in, `Caption`s out.

model = seqtasks.load("captioner.ckpt")
model.caption(["photo.jpg"])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor

from seqtasks.captioning.captions import ImageSource, load_image
from seqtasks.captioning.task import CaptioningTask
from seqtasks.data.tokenizer import EOS_ID
from seqtasks.search import Hypothesis, SearchSettings, search
from seqtasks.search.settings import check_positive
from seqtasks.tasks.attentions import (
    AttentionRequest,
    Attentions,
    recorded_maps,
    wants_every_attention,
)
from seqtasks.tasks.model import Model, as_list, decoded, read_outputs, with_alternatives

__all__ = ["Caption", "Captioner"]


@dataclass
class Caption:
    """One caption: its text, its words, its score, the attention behind each word over the
    image's (H, W) grid when asked for (and with attention="all" every attention by layer and
    head, its memory the grid's cells `row,column`), and the rest of an n-best list in
    `alternatives`."""

    text: str
    words: list[str]  # one per row of `attention`
    score: float
    attention: Tensor | None = field(default=None, repr=False)  # (len(words), L), L = H·W
    grid: tuple[int, int] | None = None  # (H, W)
    attentions: Attentions | None = field(default=None, repr=False)  # attention="all"
    alternatives: list[Caption] = field(default_factory=list)


class Captioner(Model):
    """A captioning model, its word vocabulary and the image size it was trained on."""

    task: CaptioningTask

    @property
    def image_size(self) -> int:
        return self.task.image_size

    def caption(
        self,
        images: Sequence[ImageSource] | Tensor,
        beam: int | None = None,
        n_best: int | None = None,
        attention: AttentionRequest = False,
        batch_size: int = 16,
        stop: str | None = None,
        settings: SearchSettings | None = None,
    ) -> list[Caption]:
        """One `Caption` per image, in order. An image is a file path, the bytes of an encoded
        image (an upload), a PIL image, or a row of a (B, 3, S, S) tensor of RGB in [0, 1] at
        S = `image_size`. `attention` keeps each word's attention over the image grid; "all"
        also every attention behind each caption, by layer and head (`Caption.attentions`),
        read by one teacher-forced pass over it. `beam`, `n_best`, `stop` and `settings` as for
        `Translator.translate`.

        Raises:
            OSError: naming the first image that cannot be read (`read` it first to caption
                the readable ones of a mixed list).
        """
        settings = self.search_settings(beam, n_best, stop, settings=settings)
        check_positive("batch_size", batch_size)
        wants_every_attention(attention)
        if attention:
            self.require_attention()
        if not isinstance(images, Tensor):
            images = self.read(as_list(images, "images"))
        captions: list[Caption] = []
        for first in range(0, len(images), batch_size):
            captions += self.caption_batch(images[first : first + batch_size], settings, attention)
        return captions

    @torch.no_grad()
    def caption_batch(
        self, images: Tensor, settings: SearchSettings, attention: AttentionRequest = False
    ) -> list[Caption]:
        """(B, 3, S, S) pixels -> a caption per image, searched together."""
        task, pixels = self.task, images.to(self.device)
        memory = task.encoder(pixels)
        constraint = task.search_constraint(memory)
        found = search(task.decoder, memory, settings, constraint, bool(attention))
        captions = [
            with_alternatives([self.caption_of(h, memory.grid) for h in nbest]) for nbest in found
        ]
        if wants_every_attention(attention):
            self.attach_caption_attentions(pixels, found, captions, memory.grid)
        return captions

    def attach_caption_attentions(
        self,
        pixels: Tensor,
        nbests: Sequence[list[Hypothesis]],
        captions: Sequence[Caption],
        grid: tuple[int, int],
    ) -> None:
        """Fill `attentions` of every caption and alternative: the images read again, one row
        per caption, under `recorded_maps`."""
        outputs = read_outputs(nbests, captions)
        rows, targets = [i for i, _, _ in outputs], [t for _, t, _ in outputs]
        self.check_forced(targets)
        cells = [f"{r},{c}" for r in range(grid[0]) for c in range(grid[1])]
        again = pixels.index_select(0, torch.tensor(rows, device=pixels.device))
        task = self.task
        every = recorded_maps(task, lambda: task.encoder(again), targets, [len(cells)] * len(rows))
        tokenizer = task.tokenizer
        for (_, tokens, found), maps in zip(outputs, every, strict=True):
            found.attentions = Attentions(cells, cells, tokenizer.pieces([*tokens, EOS_ID]), **maps)

    def caption_of(self, hypothesis: Hypothesis, grid: tuple[int, int]) -> Caption:
        """A hypothesis as text, words, score and attention over the image's `grid`."""
        return Caption(*decoded(hypothesis, self.task.tokenizer), grid=grid)

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
