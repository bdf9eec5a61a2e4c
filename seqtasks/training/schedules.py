"""Learning-rate schedules: the Transformer's warm-up, and how a task hands its scheduler to
Lightning and steps a plateau scheduler."""

from __future__ import annotations

from typing import Any

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler, ReduceLROnPlateau


class InverseSqrtWarmup(LRScheduler):
    """The Transformer schedule ("Noam", Vaswani et al. 2017 §5.3): a linear warm-up to the
    optimiser's learning rate over `warmup_steps`, then decay ∝ 1/√step.

    lr(step) = lr · min(step / warmup, √(warmup / step)). The paper's d^−0.5 · min(step^−0.5,
    step · warmup^−1.5) is this with lr = (d · warmup)^−0.5; giving the peak directly keeps it
    readable in a config and independent of the model width.
    """

    def __init__(self, optimizer: Optimizer, warmup_steps: int = 4000, last_epoch: int = -1):
        if warmup_steps < 1:
            raise ValueError(f"warmup_steps must be positive, got {warmup_steps}")
        self.warmup_steps = warmup_steps
        super().__init__(optimizer, last_epoch)

    def factor(self, step: int) -> float:
        step = max(step, 1)
        return min(step / self.warmup_steps, (self.warmup_steps / step) ** 0.5)

    def get_lr(self) -> list[float]:
        return [base * self.factor(self.last_epoch + 1) for base in self.base_lrs]


def optimizer_config(optimizer: Optimizer, scheduler: Any | None, monitor: str) -> Any:
    """What `configure_optimizers` returns: the optimiser alone, or with its scheduler, which
    steps every training step, or for `ReduceLROnPlateau` on `monitor` (see `step_plateaus`)."""
    if scheduler is None:
        return optimizer
    if isinstance(scheduler, ReduceLROnPlateau):
        config = {"scheduler": scheduler, "monitor": monitor, "interval": "epoch"}
    else:
        config = {"scheduler": scheduler, "interval": "step"}
    return {"optimizer": optimizer, "lr_scheduler": config}


def step_plateaus(trainer: Any, monitor: str) -> None:
    """Step every ReduceLROnPlateau of `trainer` on the `monitor` value this validation logged.

    Lightning would step it at the epoch's end, after the checkpoint of the epoch's last
    validation, and skip that step when it resumes from that checkpoint; stepped here, after
    each validation and before its checkpoint, the checkpoint holds the step."""
    schedulers = [config.scheduler for config in trainer.lr_scheduler_configs]
    plateaus = [s for s in schedulers if isinstance(s, ReduceLROnPlateau)]
    if not plateaus:
        return
    metrics = trainer.callback_metrics
    if monitor not in metrics:
        raise KeyError(
            f"ReduceLROnPlateau watches monitor={monitor!r}, which validation did not "
            f"log; it logged {sorted(metrics)}"
        )
    for scheduler in plateaus:
        scheduler.step(float(metrics[monitor]))
