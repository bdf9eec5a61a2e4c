"""The DataModule every task's data extends: a split per stage, tokenised on first use, served
in token-bucketed batches (DDP-sharded, resumable mid-epoch), under one length limit."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import lightning as L
import numpy as np
from torch.utils.data import DataLoader

from seqtasks.data.batch import Padding, pin_for
from seqtasks.data.batching import bucketed_loader

log = logging.getLogger(__name__)
NEEDED = {"fit": ("fit", "validate"), "validate": ("validate",), "test": ("test",)}


class SplitDataset(Protocol):
    """What `BucketedData.loader` needs of a split: its examples, and what padding each costs."""

    def __len__(self) -> int: ...

    def __getitem__(self, i: int) -> Any: ...

    def lengths(self) -> Sequence[int]: ...


class BucketedData(L.LightningDataModule):
    """Splits by stage (`fit`: the training split, `validate`, `test`, and `predict`, which
    reads the test split), tokenised when a stage first needs them, and batches of at most
    `max_tokens` padded tokens (`TokenBucketSampler`: similar lengths together, the order
    shuffled per epoch from `seed`, every DDP rank the same number of batches, resumable).

    The one length limit: a training example longer than `max_length` (in the task's tokens,
    either side) is skipped, and the module warns once with the counts of what it skipped and
    why (`report_skipped`); evaluation splits keep every example, so results stay aligned with
    their files. A task's module says how a split is read (`load_split`) and batched
    (`collate`, which pads as `self.padding` says; the budget counts the padded lengths).
    These settings are every task's module's, declared here once: a module declares again only
    those whose default differs, and takes the rest by keyword.

    Args:
        train_split: the name (file stem) of the training split.
        val_split: the name of the validation split.
        test_split: the name of the split `test` and `predict` read.
        max_tokens: padded tokens per training batch (evaluation uses twice as many).
        max_length: the longest training example kept.
        num_workers: DataLoader worker processes.
        seed: seed of the batch order.
        pad_to_multiple: each side of a batch is padded to a multiple of this, or to the first
            of `length_buckets` that holds it (`Padding`): few batch shapes, for torch.compile
            and CUDA graphs on a GPU. 1 and no buckets (the default): to the longest sequence.
        length_buckets: ascending lengths a batch's side is padded to (see `pad_to_multiple`).
        prefetch_factor: batches each worker prepares ahead (with `num_workers` > 0).
    """

    def __init__(
        self,
        train_split: str = "train",
        val_split: str = "val",
        test_split: str = "test",
        max_tokens: int = 4096,
        max_length: int = 100,
        num_workers: int = 0,
        seed: int = 0,
        pad_to_multiple: int = 1,
        length_buckets: tuple[int, ...] = (),
        prefetch_factor: int = 2,
    ):
        super().__init__()
        self.splits = {
            "fit": train_split,
            "validate": val_split,
            "test": test_split,
            "predict": test_split,
        }
        self.max_tokens, self.max_length = max_tokens, max_length
        self.num_workers, self.seed = num_workers, seed
        self.padding = Padding(pad_to_multiple, tuple(length_buckets))
        self.prefetch_factor = prefetch_factor
        self.datasets: dict[str, SplitDataset] = {}

    def load_split(self, split: str, train: bool) -> SplitDataset:
        """Read and tokenise `split`; a training split (`train`) without over-long examples."""
        raise NotImplementedError

    def collate(self, stage: str) -> Callable[[list[Any]], Any]:
        """How the examples of `stage`'s split become a padded batch."""
        raise NotImplementedError

    def setup(self, stage: str) -> None:
        for name in NEEDED.get(stage, (stage,)):
            if name not in self.datasets:
                self.datasets[name] = self.load_split(self.splits[name], train=name == "fit")

    def loader(self, stage: str, train: bool) -> DataLoader:
        dataset = self.datasets[stage]
        lengths = dataset.lengths()
        if self.padding.pads:
            lengths = self.padding.lengths(np.asarray(lengths))
        return bucketed_loader(
            dataset,
            lengths,
            self.max_tokens,
            train,
            self.seed,
            self.collate(stage),
            self.num_workers,
            pin_memory=pin_for(getattr(self, "trainer", None)),
            prefetch_factor=self.prefetch_factor,
        )

    def train_dataloader(self) -> DataLoader:
        return self.loader("fit", train=True)

    def val_dataloader(self) -> DataLoader:
        return self.loader("validate", train=False)

    def test_dataloader(self) -> DataLoader:
        return self.loader("test", train=False)

    def predict_dataloader(self) -> DataLoader:
        """The test split (`seqtasks predict`; see `training.callbacks.TranslationWriter`)."""
        return self.loader("predict", train=False)


def report_skipped(where: Path | str, total: int, noun: str, reasons: dict[str, int]) -> None:
    """One warning for a training split: `WHERE: skipped K of N training NOUN: n REASON, …`."""
    skipped = sum(reasons.values())
    if skipped:
        why = ", ".join(f"{count} {reason}" for reason, count in reasons.items())
        log.warning("%s: skipped %d of %d training %s: %s", where, skipped, total, noun, why)
