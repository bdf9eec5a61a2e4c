"""`MaskFiller`: what a pre-trained encoder has learnt, asked directly.

model = seqtasks.load("runs/pretraining/mlm/…/best.ckpt")
model.fill(["The [MASK] said Friday an investigation produced no evidence ."])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from seqtasks.data.batch import pad
from seqtasks.data.tokenizer import EOS_ID, PAD_ID
from seqtasks.pretraining.masking import FIRST_PIECE, MASK_ID
from seqtasks.pretraining.task import MaskedLMTask
from seqtasks.tasks.model import as_list

__all__ = ["Filled", "MaskFiller"]
MASK = "[MASK]"


@dataclass
class Filled:
    """One input with each `[MASK]` filled: its text with the best piece in each, and per
    `[MASK]` the `top_k` likeliest pieces with their probabilities, likeliest first."""

    text: str
    choices: list[list[tuple[str, float]]]


class MaskFiller:
    """A masked language model and its tokeniser (`seqtasks.load` of a pre-training model)."""

    def __init__(self, task: MaskedLMTask, checkpoints: Sequence[str | Path]):
        if task.stored() is None:
            raise ValueError("the model has no tokeniser: load it from a checkpoint")
        self.task = task.eval()
        self.checkpoints = list(checkpoints)

    def ids(self, text: str) -> list[int]:
        """`text`'s pieces, each `[MASK]` read as the mask (`MASK_ID`)."""
        if not isinstance(text, str):
            raise TypeError(f"an input is a {type(text).__name__}, not a string")
        if MASK not in text:
            raise ValueError(f"no {MASK} in {text[:60]!r}: mark the pieces to fill")
        tokenizer = self.task.src_tokenizer
        parts = [tokenizer.encode(part) if part.strip() else [] for part in text.split(MASK)]
        ids = parts[0]
        for part in parts[1:]:
            ids = [*ids, MASK_ID, *part]
        return ids

    @torch.no_grad()
    def fill(self, texts: Sequence[str], top_k: int = 5, batch_size: int = 64) -> list[Filled]:
        """Each text's `[MASK]`s filled by the encoder's head, all at once (as BERT predicts
        them: each from the others left masked); special pieces are never proposed."""
        texts = as_list(texts, "texts")
        if top_k < 1:
            raise ValueError(f"top_k must be at least 1, got {top_k}")
        encoded = [self.ids(text) for text in texts]
        tokenizer, results = self.task.src_tokenizer, []
        for start in range(0, len(encoded), batch_size):
            rows = encoded[start : start + batch_size]
            src = pad(rows, end=EOS_ID).to(self.device)
            logits, _ = self.task(src, src != PAD_ID)
            logits[..., :FIRST_PIECE] = float("-inf")
            probabilities = logits.float().softmax(-1)
            for row, ids in enumerate(rows):
                at = [i for i, piece in enumerate(ids) if piece == MASK_ID]
                top = probabilities[row, at].topk(min(top_k, tokenizer.vocab_size - FIRST_PIECE))
                best = dict(zip(at, top.indices[:, 0].tolist()))
                choices = [
                    list(zip(tokenizer.pieces(ids_), ps))
                    for ids_, ps in zip(top.indices.tolist(), top.values.tolist())
                ]
                text = tokenizer.decode([best.get(i, piece) for i, piece in enumerate(ids)])
                results.append(Filled(text, choices))
        return results

    @property
    def device(self) -> torch.device:
        return self.task.device

    def to(self, device: str | torch.device) -> MaskFiller:
        """Move the model to `device`; returns itself."""
        self.task.to(device)
        return self

    def __repr__(self) -> str:
        names = ", ".join(str(path) for path in self.checkpoints)
        return f"{type(self).__name__}({names}, device={self.device})"
