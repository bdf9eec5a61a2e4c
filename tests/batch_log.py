"""A callback the distributed tests add to `seqtasks fit` runs (tests/ on PYTHONPATH): what
each rank trained on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import lightning as L


class BatchLog(L.Callback):
    """Writes `folder/rank{global rank}.json`: per epoch, the split indices of every training
    batch in the order they came, `{"0": [[i, …], …], "1": …}`.

    Args:
        folder: where the files go.
    """

    def __init__(self, folder: str):
        self.folder = Path(folder)
        self.epochs: dict[int, list[list[int]]] = {}

    def on_train_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        self.epochs.setdefault(trainer.current_epoch, []).append(batch.index.tolist())

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"rank{trainer.global_rank}.json"
        path.write_text(json.dumps(self.epochs))
