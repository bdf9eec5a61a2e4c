"""Padded batches of token ids: what every DataModule hands its task, and how it pads."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import torch
from torch import Tensor
from torch.utils.data import Dataset

from seqtasks.data.tokenizer import BOS_ID, EOS_ID, PAD_ID


@dataclass
class Batch:
    """A padded batch. Token tensors are (B, S) or (B, T); masks are true on real tokens.

    `tgt_in` is BOS y_1 … y_n and `tgt_out` is y_1 … y_n EOS; `index` numbers the examples in
    their split, so results gathered from several processes can be put back in order.
    """

    src: Tensor
    src_mask: Tensor
    tgt_in: Tensor
    tgt_out: Tensor
    index: Tensor
    src_text: list[str]
    tgt_text: list[str]

    def __len__(self) -> int:
        return self.src.size(0)

    def pin_memory(self) -> Batch:
        return pinned(self)


AnyBatch = TypeVar("AnyBatch")


def pinned(batch: AnyBatch) -> AnyBatch:
    """A copy of a dataclass batch with its tensors in page-locked memory, which
    `DataLoader(pin_memory=True)` asks for (through the batch's `pin_memory()`), so that copying
    it to a GPU (Lightning copies with `non_blocking=True`) overlaps with the work there."""
    tensors = {
        f.name: value.pin_memory()
        for f in dataclasses.fields(batch)
        if isinstance(value := getattr(batch, f.name), Tensor)
    }
    return dataclasses.replace(batch, **tensors)


def pin_for(trainer: Any) -> bool:
    """Whether batches for `trainer` (None: not training) should be pinned: when it runs on a
    CUDA device."""
    return trainer is not None and trainer.strategy.root_device.type == "cuda"


class Pair(Protocol):
    """An example with a token-id source and target, as `ParallelDataset` holds them."""

    src: list[int]
    tgt: list[int]


class ParallelDataset(Dataset):
    """Tokenised (source, target) examples, held in memory: sentence pairs here, sentences and
    their linearised trees in parsing."""

    def __init__(self, examples: Sequence[Pair]):
        self.examples = examples

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, i: int) -> tuple[int, Pair]:
        return i, self.examples[i]

    def lengths(self) -> list[int]:
        """Per example, the longer side in tokens including BOS/EOS (what padding costs)."""
        return [max(len(e.src), len(e.tgt)) + 1 for e in self.examples]


def pad(sequences: list[list[int]]) -> Tensor:
    """Right-pad id lists with PAD_ID -> (B, max length)."""
    out = torch.full((len(sequences), max(map(len, sequences))), PAD_ID, dtype=torch.long)
    for row, ids in enumerate(sequences):
        out[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    return out


def teacher_forcing(targets: Sequence[list[int]]) -> tuple[Tensor, Tensor]:
    """Target ids -> the decoder's inputs BOS y_1 … y_n and outputs y_1 … y_n EOS, padded:
    (B, T) each."""
    return pad([[BOS_ID, *t] for t in targets]), pad([[*t, EOS_ID] for t in targets])
