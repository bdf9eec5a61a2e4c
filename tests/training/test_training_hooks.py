"""`TrainingHooks`, the task's hooks that hold in every fit, on a stand-in trainer: plateau
schedulers step after each validation of a fit (and only then), never at Lightning's epoch end;
a run stops at `max_steps`; a non-finite loss stops a CPU run at its step."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from lightning.pytorch import LightningModule
from lightning.pytorch.core.hooks import CheckpointHooks as LightningCheckpointHooks
from lightning.pytorch.core.hooks import ModelHooks
from torch.optim.lr_scheduler import ReduceLROnPlateau, StepLR

from seqtasks.training.checkpoint_hooks import CheckpointHooks
from seqtasks.training.hooks import TrainingHooks
from seqtasks.training.resume import RESUME_KEY


class LightningStandIn(ModelHooks, LightningCheckpointHooks):
    """What `TrainingHooks` defers to: LightningModule's hooks (which do nothing), and its
    scheduler step, recorded."""

    def __init__(self) -> None:
        self.stepped: list = []

    def lr_scheduler_step(self, scheduler, metric) -> None:
        self.stepped.append(scheduler)


class Task(TrainingHooks, LightningStandIn):
    monitor = "val/accuracy"
    global_step = 0


def task_with(scheduler, fn: str = "fit", sanity_checking: bool = False, **metrics) -> Task:
    task = Task()
    task.trainer = SimpleNamespace(
        state=SimpleNamespace(fn=fn),
        sanity_checking=sanity_checking,
        lr_scheduler_configs=[SimpleNamespace(scheduler=scheduler)],
        callback_metrics={k.replace("_", "/"): torch.tensor(v) for k, v in metrics.items()},
        max_steps=-1,
        should_stop=False,
        log_every_n_steps=50,
    )
    return task


def plateau() -> ReduceLROnPlateau:
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    return ReduceLROnPlateau(optimizer, mode="max", factor=0.5, patience=0)


def test_a_plateau_scheduler_steps_after_each_validation_of_a_fit_only():
    scheduler = plateau()
    lr = lambda: scheduler.optimizer.param_groups[0]["lr"]  # noqa: E731
    for fn, sanity in [("fit", True), ("validate", False)]:
        task_with(scheduler, fn, sanity, val_accuracy=0.5).on_validation_epoch_end()
    assert scheduler.last_epoch == 0 and lr() == 1.0
    task = task_with(scheduler, val_accuracy=0.5)
    task.on_validation_epoch_end()  # the best yet
    task.on_validation_epoch_end()  # no better: halved at once (patience 0)
    assert scheduler.last_epoch == 2 and lr() == 0.5
    task.lr_scheduler_step(scheduler, 0.5)  # Lightning's epoch-end step: skipped
    other = StepLR(scheduler.optimizer, step_size=1)
    task.lr_scheduler_step(other, None)
    assert task.stepped == [other] and scheduler.last_epoch == 2


def test_a_plateau_scheduler_without_its_monitor_is_named():
    task = task_with(plateau(), val_loss=1.0)
    with pytest.raises(KeyError, match=r"monitor='val/accuracy'.*\['val/loss'\]"):
        task.on_validation_epoch_end()


def test_a_run_stops_at_max_steps_and_at_a_non_finite_loss_on_the_cpu():
    task = task_with(None)
    task.trainer.max_steps, task.global_step = 3, 2
    task.on_train_batch_end(None, None, 0)
    assert not task.trainer.should_stop
    task.global_step = 3
    task.on_train_batch_end(None, None, 0)
    assert task.trainer.should_stop
    task.watch_loss(torch.tensor(1.0), 7)
    with pytest.raises(FloatingPointError, match="loss nan at step 3, batch 8"):
        task.watch_loss(torch.tensor(math.nan), 8)


@pytest.mark.parametrize("first", [TrainingHooks, CheckpointHooks], ids=lambda c: c.__name__)
def test_the_training_and_checkpoint_hooks_hold_in_either_order(first):
    """The two share no state and each calls on to the next class's hook: in either order, a
    checkpoint after a non-finite loss is refused (the loss watch's), and one after finite
    losses keeps the process states (the checkpoint hooks')."""
    second = CheckpointHooks if first is TrainingHooks else TrainingHooks

    class Either(first, second, LightningModule):
        def __init__(self):
            super().__init__()
            self.objective = SimpleNamespace(baseline=None)

    task = Either()
    saved = {"state_dict": {"w": torch.ones(2)}}
    task.on_save_checkpoint(saved)
    assert RESUME_KEY in saved
    task.loss_watch.observe(torch.tensor(math.inf), step=3, batch_idx=1)
    with pytest.raises(FloatingPointError, match="step 3"):
        task.on_save_checkpoint({"state_dict": {"w": torch.ones(2)}})
