"""Callbacks the resume tests add to `seqtasks fit` runs (tests/ on the child's PYTHONPATH):
a kill and a numerical fault at a chosen training step."""

from __future__ import annotations

import os
import signal
from typing import Any

import lightning as L
import torch


class KillAtStep(L.Callback):
    """SIGKILLs the process as the batch after `step` optimiser steps begins: nothing is
    flushed, closed or saved, as when a machine is lost.

    Args:
        step: the global step at which to die.
    """

    def __init__(self, step: int):
        self.step = step

    def on_train_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        if trainer.global_step == self.step:
            os.kill(os.getpid(), signal.SIGKILL)


class PoisonWeights(L.Callback):
    """Fills the first parameter with NaN at global step `step`: before the batch's forward
    pass (`when="start"`, the loss turns NaN) or after its optimiser step (`when="end"`, the
    weights turn NaN with no loss to show it, as after an overflowing update).

    Args:
        step: the global step at which to strike.
        when: "start" or "end" of that step's batch.
    """

    def __init__(self, step: int, when: str):
        self.step, self.when = step, when

    def _poison(self, trainer: L.Trainer, pl_module: L.LightningModule, when: str) -> None:
        if trainer.global_step == self.step and when == self.when:
            with torch.no_grad():
                next(pl_module.parameters()).fill_(float("nan"))

    def on_train_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        self._poison(trainer, pl_module, "start")

    def on_train_batch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        self._poison(trainer, pl_module, "end")
