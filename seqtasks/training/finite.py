"""Stop a run at its first non-finite training loss without reading the loss back every step.

Asking `torch.isfinite(loss)` for a Python bool each step makes the host wait for the device at
every step (a GPU then idles while the next batch is prepared). `LossWatch` keeps what it needs
on the loss's device (was any loss non-finite, the first one, its step and batch) with tensor
operations only, and reads it back when asked: each step on the CPU, where reading costs
nothing, and every `log_every_n_steps` steps, before each validation and checkpoint and at the
end of training elsewhere (`TrainingHooks`), so no checkpoint is written after a bad step.
"""

from __future__ import annotations

import torch
from torch import Tensor


class LossWatch:
    """The first non-finite loss seen by `observe`, raised by `check`."""

    def __init__(self) -> None:
        self._bad: Tensor | None = None  # any non-finite loss yet
        self._value = self._step = self._batch = torch.zeros(())

    def observe(self, loss: Tensor, step: int, batch_idx: int) -> None:
        """Note `loss` of optimiser step `step` (batch `batch_idx`); no host read."""
        loss = loss.detach()
        bad = ~torch.isfinite(loss)
        if self._bad is None:
            self._bad = torch.zeros((), dtype=torch.bool, device=loss.device)
            self._value = torch.zeros((), dtype=loss.dtype, device=loss.device)
            self._step = self._batch = torch.zeros((), dtype=torch.long, device=loss.device)
        first = bad & ~self._bad
        self._value = torch.where(first, loss, self._value)
        self._step = torch.where(first, step, self._step)
        self._batch = torch.where(first, batch_idx, self._batch)
        self._bad = self._bad | bad

    def check(self) -> None:
        """Raise FloatingPointError naming the first non-finite loss, if there was one."""
        if self._bad is not None and bool(self._bad):
            raise FloatingPointError(
                f"non-finite training loss {self._value.item()} at step {int(self._step)}, "
                f"batch {int(self._batch)}; lower the learning rate or check the data"
            )
