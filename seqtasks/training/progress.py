"""Progress as plain lines, for output that is not a terminal (CI, `nohup`, SLURM): a redrawn
bar writes there a carriage return per refresh, and no bar at all shows nothing.

    epoch 0  step 50/1250  loss 2.3140  lr 0.003  2,870 tgt tok/s  elapsed 0:41  eta 16:30
    validation at step 250 (epoch 0): val/exact_match 87.5  val/loss 0.1235  (4.2 s)
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Mapping
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import ProgressBar, Timer
from torch import Tensor

from seqtasks.data.tokenizer import PAD_ID


def clock(seconds: float) -> str:
    """`1:02:03`, or `2:03` under an hour."""
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class LineProgress(ProgressBar):
    """Every `every_n_steps` optimiser steps (and at the last), one line: epoch, step of all,
    the mean training loss since the last line, learning rate, target tokens (or batches) a
    second of training, time elapsed and, when the end is known, left. After each validation,
    one line with its `val…` scores. Written to stderr and flushed, by the first process only.

    Args:
        every_n_steps: optimiser steps between lines.
    """

    def __init__(self, every_n_steps: int = 50):
        super().__init__()
        if every_n_steps < 1:
            raise ValueError(f"every_n_steps must be at least 1, got {every_n_steps}")
        self.every_n_steps = every_n_steps
        self._enabled = True
        self._total = math.inf
        self._start = self._window_start = self._validation_start = 0.0
        self._start_step = self._last_step = 0
        self._reset_window()

    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    def _write(self, line: str) -> None:
        if self._enabled:
            print(line, file=sys.stderr, flush=True)

    def _reset_window(self) -> None:
        self._window_start = time.monotonic()
        self._loss: Tensor | float = 0.0
        self._tokens: Tensor | int = 0
        self._batches = 0

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._total = float(trainer.estimated_stepping_batches)
        self._start = time.monotonic()
        self._start_step = self._last_step = trainer.global_step
        self._reset_window()

    def on_train_batch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        # Sums stay tensors until a line is written: no device sync a step.
        loss = outputs.get("loss") if isinstance(outputs, Mapping) else outputs
        if isinstance(loss, Tensor):  # Lightning divides it by the accumulated batches
            self._loss = self._loss + loss.detach() * trainer.accumulate_grad_batches
        targets = getattr(batch, "tgt_out", None)
        if isinstance(targets, Tensor):
            self._tokens = self._tokens + (targets != PAD_ID).sum()
        self._batches += 1
        step = trainer.global_step
        if step != self._last_step and (step % self.every_n_steps == 0 or step >= self._total):
            self._last_step = step
            self._write(self.step_line(trainer))
            self._reset_window()

    def step_line(self, trainer: L.Trainer) -> str:
        """The line for the current step, from what was summed since the last line."""
        now = time.monotonic()
        step = trainer.global_step
        total = f"/{int(self._total)}" if math.isfinite(self._total) else ""
        parts = [f"epoch {trainer.current_epoch}", f"step {step}{total}"]
        if self._batches and isinstance(self._loss, Tensor):
            parts.append(f"loss {float(self._loss) / self._batches:.4f}")
        if trainer.optimizers:
            parts.append(f"lr {trainer.optimizers[0].param_groups[0]['lr']:.3g}")
        seconds = max(now - self._window_start, 1e-9)
        if isinstance(self._tokens, Tensor):
            parts.append(f"{float(self._tokens) / seconds:,.0f} tgt tok/s")
        else:
            parts.append(f"{self._batches / seconds:.2f} batch/s")
        elapsed = now - self._start
        parts.append(f"elapsed {clock(elapsed)}")
        eta = self._eta(trainer, elapsed)
        if eta is not None:
            parts.append(f"eta {clock(eta)}")
        return "  ".join(parts)

    def _eta(self, trainer: L.Trainer, elapsed: float) -> float | None:
        """Seconds left: the steps left at this run's pace so far (validation included), or
        the time `max_time` leaves, whichever ends first; None when neither is known."""
        left = []
        done = trainer.global_step - self._start_step
        if math.isfinite(self._total) and done > 0:
            left.append((self._total - trainer.global_step) * elapsed / done)
        timer = next((c for c in trainer.callbacks if isinstance(c, Timer)), None)
        remaining = timer.time_remaining("train") if timer is not None else None
        if remaining is not None:
            left.append(remaining)
        return max(0.0, min(left)) if left else None

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._validation_start = time.monotonic()

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        seconds = time.monotonic() - self._validation_start
        self._window_start += seconds  # training speed leaves validation out
        scores = [
            f"{name} {float(value):.4g}"
            for name, value in sorted(trainer.callback_metrics.items())
            if name.startswith("val")
        ]
        where = f"at step {trainer.global_step} (epoch {trainer.current_epoch})"
        self._write(f"validation {where}: {'  '.join(scores)}  ({seconds:.1f} s)")
