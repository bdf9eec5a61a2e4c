"""Learning-rate schedules that the optimisers in the configs step every training step."""

from __future__ import annotations

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler


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
