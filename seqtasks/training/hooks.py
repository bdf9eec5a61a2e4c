"""A task's training hooks: what must hold in every fit, whoever builds the Trainer.

They are a mixin the task lists rather than Lightning callbacks, because callbacks are installed
by the CLI and would be missing from a Trainer built by hand: a run stops at its first
non-finite loss (`LossWatch`), validates at `max_steps` before it stops, steps a plateau
scheduler after each validation and before its checkpoint, and clips a fused optimiser's
gradients where nothing scales them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import Tensor
from torch.optim.lr_scheduler import ReduceLROnPlateau

from seqtasks.training.clipping import clip_gradients
from seqtasks.training.finite import LossWatch
from seqtasks.training.schedules import optimizer_config, step_plateaus


class TrainingHooks:
    """The training hooks of `EncoderDecoderTask` (a LightningModule with `optimizer`,
    `lr_scheduler` and `monitor` settings), which lists this class before LightningModule; its
    hooks call on to the next class's, so that `CheckpointHooks` may stand before or after it,
    and it owns its loss watch (no other class reads it). The task calls `watch_loss` from its
    `training_step`, and `super().on_validation_epoch_end()` once it has logged the split's
    scores."""

    optimizer: Callable[[Any], Any]
    lr_scheduler: Callable[[Any], Any] | None
    monitor: str

    def __init__(self) -> None:
        super().__init__()
        self.loss_watch = LossWatch()

    # ---- the loss watch ---------------------------------------------------------------------
    def watch_loss(self, loss: Tensor, batch_idx: int) -> None:
        """Note the step's loss (`LossWatch.observe`), and raise at a non-finite one: each step
        on the CPU, every `log_every_n_steps` steps elsewhere, since reading the result back
        waits for the device."""
        self.loss_watch.observe(loss, self.global_step, batch_idx)
        if (
            loss.device.type == "cpu"
            or (self.global_step + 1) % self.trainer.log_every_n_steps == 0
        ):
            self.loss_watch.check()

    def on_validation_start(self) -> None:
        self.loss_watch.check()
        super().on_validation_start()

    def on_train_end(self) -> None:
        self.loss_watch.check()
        super().on_train_end()

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """No checkpoint after a non-finite loss."""
        self.loss_watch.check()
        super().on_save_checkpoint(checkpoint)

    # ---- when to stop -----------------------------------------------------------------------
    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        # Lightning validates at `max_steps` only if it falls on a validation interval; asking it
        # to stop makes it validate first, so a short run still leaves a scored best checkpoint.
        if 0 < self.trainer.max_steps <= self.global_step:
            self.trainer.should_stop = True
        super().on_train_batch_end(outputs, batch, batch_idx)

    # ---- the optimiser and its schedule -----------------------------------------------------
    def parameter_groups(self) -> Any:
        """What the optimiser is built from: all parameters, or groups with their own settings."""
        return self.parameters()

    def configure_optimizers(self) -> Any:
        optimizer = self.optimizer(self.parameter_groups())
        scheduler = None if self.lr_scheduler is None else self.lr_scheduler(optimizer)
        return optimizer_config(optimizer, scheduler, self.monitor)

    def on_validation_epoch_end(self) -> None:
        """Step the plateau schedulers on what this validation logged (`step_plateaus`)."""
        if self.trainer.state.fn == "fit" and not self.trainer.sanity_checking:
            step_plateaus(self.trainer, self.monitor)
        super().on_validation_epoch_end()

    def lr_scheduler_step(self, scheduler: Any, metric: Any) -> None:
        if not isinstance(scheduler, ReduceLROnPlateau):  # stepped by `step_plateaus`
            super().lr_scheduler_step(scheduler, metric)

    def configure_gradient_clipping(
        self, optimizer: Any, gradient_clip_val: Any = None, gradient_clip_algorithm: Any = None
    ) -> None:
        clip_gradients(self, optimizer, gradient_clip_val, gradient_clip_algorithm)
