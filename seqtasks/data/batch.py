"""Padded batches of token ids: what every DataModule hands its task, and how it pads."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, Self, TypeVar

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import Dataset

from seqtasks.data.tokenizer import BOS_ID, EOS_ID, PAD_ID


class Travels:
    """What a dataclass batch needs to go to a device: `DataLoader(pin_memory=True)` pins it
    and Lightning moves it through these, tensor by tensor, its other fields (texts,
    references, scenes) shared (`pinned`, `moved`)."""

    def pin_memory(self) -> Self:
        return pinned(self)

    def to(self, device: torch.device | str) -> Self:
        return moved(self, device)


@dataclass
class Batch(Travels):
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


AnyBatch = TypeVar("AnyBatch")


def pinned(batch: AnyBatch) -> AnyBatch:
    """A copy of a dataclass batch with its tensors in page-locked memory, which
    `DataLoader(pin_memory=True)` asks for (through the batch's `pin_memory()`), so that copying
    it to a GPU (`moved`, without blocking) overlaps with the work there."""
    return with_tensors(batch, lambda tensor: tensor.pin_memory())


def moved(batch: AnyBatch, device: torch.device | str) -> AnyBatch:
    """A copy of a dataclass batch with its tensors on `device` and its other fields (texts,
    references, scenes) shared, not copied. Lightning moves a batch with a `to()` by calling it
    (the batches' `to` calls this), and otherwise walks every list and dataclass inside it: 4.5
    ms for a 24,576-token translation batch (its texts) and 64 ms for a 512-image captioning
    batch (its references and scenes) on the 2-core dev machine, host time in every step. To a
    GPU the copies do not block (from pinned memory they overlap the work there)."""
    device = torch.device(device)
    return with_tensors(batch, lambda tensor: tensor.to(device, non_blocking=device.type == "cuda"))


def with_tensors(batch: AnyBatch, change: Callable[[Tensor], Tensor]) -> AnyBatch:
    """A copy of a dataclass batch with `change` applied to each of its tensor fields, the
    other fields shared."""
    tensors = {
        f.name: change(value)
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


@dataclass(frozen=True)
class Padding:
    """How long a batch's padded sequences are: the longest one's length rounded up.

    On a CPU every batch is as long as its longest sequence (the default): padding would only
    add work. On a GPU, `torch.compile` without dynamic shapes and CUDA graphs want a few batch
    shapes, not one per batch. The token-bucket sampler's batches are fixed for the whole run
    (only their order changes), and their rows follow from their length and the token budget,
    so a few lengths give a few (rows, length) shapes: on Multi30k at 24,576 tokens, 21 batches
    have 19 shapes unpadded and 6 with `multiple` 8, for 16 % fewer real tokens a batch.
    Padding changes no loss and no output: padded keys are masked, padded targets ignored, and
    the causal mask hides padded target positions from real ones.

    Attributes:
        multiple: lengths are rounded up to a multiple of this (1: not rounded).
        buckets: ascending lengths to round up to, the first that holds the sequence; one
            longer than the last is rounded to `multiple`. They bound the shapes of a corpus
            with a long tail of lengths.
    """

    multiple: int = 1
    buckets: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.multiple < 1:
            raise ValueError(f"pad_to_multiple must be at least 1, got {self.multiple}")
        if list(self.buckets) != sorted(set(self.buckets)) or min(self.buckets, default=1) < 1:
            raise ValueError(f"length_buckets must be positive and ascending, got {self.buckets}")

    @property
    def pads(self) -> bool:
        """Whether any length changes (the default padding changes none)."""
        return self.multiple > 1 or bool(self.buckets)

    def lengths(self, lengths: np.ndarray) -> np.ndarray:
        """(N,) lengths -> (N,) their padded lengths."""
        rounded = -(-lengths // self.multiple) * self.multiple
        if not self.buckets:
            return rounded
        buckets = np.asarray(self.buckets)
        slot = np.searchsorted(buckets, lengths)  # the first bucket >= the length
        return np.where(slot < len(buckets), buckets[np.minimum(slot, len(buckets) - 1)], rounded)

    def length(self, length: int) -> int:
        """The padded length of a sequence of `length` positions."""
        return int(self.lengths(np.asarray([length]))[0])


UNPADDED = Padding()  # to the longest sequence only


def pad(
    sequences: Sequence[Sequence[int]], padding: Padding = UNPADDED, end: int | None = None
) -> Tensor:
    """Right-pad id lists, each followed by `end` if given, with PAD_ID -> (B, the longest's
    length padded by `padding`)."""
    lengths = np.fromiter(map(len, sequences), np.int64, len(sequences))  # (B,)
    out = _padded(len(sequences), padding.length(int(lengths.max()) + (end is not None)))
    _place(out, sequences, lengths, 0)
    if end is not None:
        out[np.arange(len(sequences)), lengths] = end
    return torch.from_numpy(out)


def teacher_forcing(
    targets: Sequence[Sequence[int]], padding: Padding = UNPADDED
) -> tuple[Tensor, Tensor]:
    """Target ids -> the decoder's inputs BOS y_1 … y_n and outputs y_1 … y_n EOS, padded:
    (B, T) each."""
    tgt_out = pad(targets, padding, end=EOS_ID)
    tgt_in = _padded(*tgt_out.shape)
    tgt_in[:, 0] = BOS_ID
    _place(tgt_in, targets, np.fromiter(map(len, targets), np.int64, len(targets)), 1)
    return torch.from_numpy(tgt_in), tgt_out


def padded_batch(
    index: Sequence[int],
    sources: Sequence[Sequence[int]],
    targets: Sequence[Sequence[int]],
    src_text: list[str],
    tgt_text: list[str],
    padding: Padding = UNPADDED,
) -> Batch:
    """The `Batch` of examples `index` of a split: source + EOS, BOS + target, target + EOS,
    each side's length padded by `padding`."""
    src = pad(sources, padding, end=EOS_ID)
    tgt_in, tgt_out = teacher_forcing(targets, padding)
    return Batch(src, src != PAD_ID, tgt_in, tgt_out, torch.tensor(index), src_text, tgt_text)


def _padded(rows: int, length: int) -> np.ndarray:
    """(rows, length) of PAD_ID."""
    return np.full((rows, length), PAD_ID, dtype=np.int64)


def _place(
    out: np.ndarray, sequences: Sequence[Sequence[int]], lengths: np.ndarray, at: int
) -> None:
    """Write sequence b into row b of `out` from column `at` on, all rows in one assignment."""
    columns = np.arange(out.shape[1]) - at  # (L,)
    ids = np.fromiter(itertools.chain.from_iterable(sequences), np.int64, lengths.sum())
    out[(columns >= 0) & (columns < lengths[:, None])] = ids
