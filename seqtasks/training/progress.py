"""Progress as plain lines, for output that is not a terminal (CI, `nohup`, SLURM): a redrawn
bar writes there a carriage return per refresh, and no bar at all shows nothing.

    epoch 0  step 7/1250  loss 4.312  lr 0.003  2,480 tgt tok/s  elapsed 0:05  eta 14:58
    epoch 0  step 50/1250  loss 2.314  lr 0.003  2,870 tgt tok/s  elapsed 0:41  eta 16:30
    validation at step 250 (epoch 0): batch 31/63  elapsed 0:30  eta 0:31
    validation at step 250 (epoch 0): val/exact_match 87.50 %  val/loss 0.1235  (61.2 s)
    test: batch 40/126  elapsed 0:30  eta 1:05

A line every `every_n_steps` optimiser steps and, whatever the steps, at the end of the first
step or evaluation batch that ends `every_seconds` after the last line (`first_after` seconds
into training or an evaluation for its first): so a slow step, a long validation, `seqtasks
validate`, `test` and `predict` all show that they are moving.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Mapping
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import ProgressBar, Timer
from lightning.pytorch.trainer.states import TrainerFn
from torch import Tensor

from seqtasks.data.tokenizer import PAD_ID
from seqtasks.io.preparation import clock
from seqtasks.metrics.formats import format_score, score_list


class LineProgress(ProgressBar):
    """Training: every `every_n_steps` optimiser steps (and at the last), one line: epoch, step
    of all, the mean training loss since the last line, learning rate, target tokens (or
    batches) a second of training, time elapsed and, when the end is known, left. After each
    validation of `fit`, one line with its `val…` scores. During any validation, test or
    prediction, a line of batches done. Written to stderr and flushed, by the first process.

    Whatever the step count, a line comes `first_after` seconds into training or an evaluation
    and then at least every `every_seconds`, at the end of the batch that passes the time.
    `clock` (seconds) is `time.monotonic`; tests set their own.

    Args:
        every_n_steps: optimiser steps between lines.
        every_seconds: seconds at most between two lines.
        first_after: seconds into training (or an evaluation) for its first line.
    """

    def __init__(
        self, every_n_steps: int = 50, every_seconds: float = 30.0, first_after: float = 5.0
    ):
        super().__init__()
        if every_n_steps < 1:
            raise ValueError(f"every_n_steps must be at least 1, got {every_n_steps}")
        if every_seconds <= 0 or first_after < 0:
            raise ValueError(
                f"need every_seconds > 0 and first_after >= 0, got {every_seconds}, {first_after}"
            )
        self.every_n_steps = every_n_steps
        self.every_seconds = every_seconds
        self.first_after = first_after
        self.clock = time.monotonic
        self._enabled = True
        self._total = math.inf
        self._start = self._window_start = self._phase_start = self._validation_start = 0.0
        self._next_line = 0.0  # when a line is due whatever the step
        self._start_step = self._last_step = 0
        self._reset_window()

    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    def _write(self, line: str) -> None:
        self._next_line = self.clock() + self.every_seconds
        if self._enabled:
            print(line, file=sys.stderr, flush=True)

    def _start_phase(self, early: bool = True) -> float:
        """Training or an evaluation starts now; an `early` one has its first line due
        `first_after` from now, another (a validation inside `fit`) when the last line's
        `every_seconds` are up."""
        self._phase_start = self.clock()
        self._evaluated = 0  # batches of the evaluation under way, all its dataloaders'
        if early:
            self._next_line = self._phase_start + self.first_after
        return self._phase_start

    def _due(self) -> bool:
        return self.clock() >= self._next_line

    def _reset_window(self) -> None:
        self._window_start = self.clock()
        self._loss: Tensor | float = 0.0
        self._tokens: Tensor | int = 0
        self._batches = 0

    # ---- training -------------------------------------------------------------------------
    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._total = float(trainer.estimated_stepping_batches)
        self._start = self._start_phase()
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
        counted = step % self.every_n_steps == 0 or step >= self._total
        if step != self._last_step and (counted or self._due()):
            self._last_step = step
            self._write(self.step_line(trainer))
            self._reset_window()

    def step_line(self, trainer: L.Trainer) -> str:
        """The line for the current step, from what was summed since the last line."""
        now = self.clock()
        step = trainer.global_step
        total = f"/{int(self._total)}" if math.isfinite(self._total) else ""
        parts = [f"epoch {trainer.current_epoch}", f"step {step}{total}"]
        if self._batches and isinstance(self._loss, Tensor):
            parts.append(f"loss {format_score('loss', float(self._loss) / self._batches)}")
        if trainer.optimizers:
            parts.append(f"lr {format_score('lr', trainer.optimizers[0].param_groups[0]['lr'])}")
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

    # ---- evaluation -----------------------------------------------------------------------
    def _evaluation(self, trainer: L.Trainer) -> tuple[str, list[int] | int | float]:
        """What is being evaluated, as a line starts, and its batches per dataloader."""
        if trainer.sanity_checking:
            return "sanity check", trainer.num_sanity_val_batches
        if trainer.testing:
            return "test", trainer.num_test_batches
        if trainer.predicting:
            return "predict", trainer.num_predict_batches
        if trainer.state.fn == TrainerFn.FITTING:
            where = f"at step {trainer.global_step} (epoch {trainer.current_epoch})"
            return f"validation {where}", trainer.num_val_batches
        return "validation", trainer.num_val_batches

    def batch_line(self, trainer: L.Trainer) -> str:
        """How far the current evaluation has got: batches done of all (every dataloader's),
        time elapsed and left."""
        what, counts = self._evaluation(trainer)
        total = sum(counts) if isinstance(counts, list) else counts
        done, elapsed = self._evaluated, self.clock() - self._phase_start
        of = f"/{total}" if math.isfinite(total) else ""
        parts = [f"{what}: batch {done}{of}", f"elapsed {clock(elapsed)}"]
        if math.isfinite(total) and total > done:
            parts.append(f"eta {clock(elapsed * (total - done) / done)}")
        return "  ".join(parts)

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        inside_fit = trainer.state.fn == TrainerFn.FITTING and not trainer.sanity_checking
        self._validation_start = self._start_phase(early=not inside_fit)

    def on_test_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._start_phase()

    def _evaluation_batch_end(self, trainer: L.Trainer, *_: Any) -> None:
        """After a batch of validation, test or prediction (Lightning passes the module, the
        outputs, the batch and its indices too): its line, when one is due."""
        self._evaluated += 1
        if self._due():
            self._write(self.batch_line(trainer))

    on_predict_start = on_test_start
    on_validation_batch_end = on_test_batch_end = on_predict_batch_end = _evaluation_batch_end

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        seconds = self.clock() - self._validation_start
        if trainer.sanity_checking:
            return
        if trainer.state.fn != TrainerFn.FITTING:  # `seqtasks validate` prints the scores
            self._write(f"validation: done in {clock(seconds)}")
            return
        self._window_start += seconds  # training speed leaves validation out
        scores = [(n, v) for n, v in trainer.callback_metrics.items() if n.startswith("val")]
        where = f"at step {trainer.global_step} (epoch {trainer.current_epoch})"
        self._write(f"validation {where}: {score_list(scores)}  ({seconds:.1f} s)")

    def on_test_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._write(f"test: done in {clock(self.clock() - self._phase_start)}")

    def on_predict_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._write(f"predict: done in {clock(self.clock() - self._phase_start)}")
