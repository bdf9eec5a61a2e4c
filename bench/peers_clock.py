"""A Lightning callback that writes when each optimiser step ended and how many real target
tokens it trained on, for `bench/peers.py` (OpenNMT-py's log gives the same per step with
`report_every: 1`).

    seqtasks fit … --trainer.callbacks+=peers_clock.StepClock --trainer.callbacks.path=steps.json \
        [--trainer.callbacks.checkpoint=model.ckpt]   (with bench/ on PYTHONPATH)
"""

from __future__ import annotations

import json
import time
from typing import Any

import lightning as L

from seqtasks.data.tokenizer import PAD_ID


class StepClock(L.Callback):
    """At the end of training, `path` holds a JSON list of [seconds, target tokens] per step:
    `time.time()` when the step ended and the non-padding tokens of its `tgt_out`; the model is
    saved to `checkpoint` when one is named (after the clock has stopped)."""

    def __init__(self, path: str, checkpoint: str | None = None):
        self.path, self.checkpoint = path, checkpoint
        self.steps: list[list[float]] = []

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
        batch_idx: int,
    ) -> None:  # fmt: skip
        tokens = int((batch.tgt_out != PAD_ID).sum())  # a sync, harmless on the CPU
        self.steps.append([time.time(), tokens])

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        with open(self.path, "w", encoding="utf-8") as f:
            json.dump(self.steps, f)
        if self.checkpoint:
            trainer.save_checkpoint(self.checkpoint)
