"""Gradient clipping that a fused optimiser allows where nothing scales the gradients.

Lightning refuses to clip for an optimiser that unscales gradients inside its own step (fused
Adam/AdamW, `_step_supports_amp_scaling`) under any mixed precision, but only float16's
gradient scaler makes clipping wrong there: the gradients it clips would still be scaled. Under
bf16-mixed and float32 nothing scales them, so a fused optimiser (one kernel for the whole
update on a GPU, where the multi-tensor `foreach` form launches several per parameter group)
can be clipped like any other.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.optim import Optimizer


def clip_gradients(
    task: Any, optimizer: Optimizer, value: float | None, algorithm: str | None
) -> None:
    """Clip the gradients of `optimizer`'s parameters to `value` by norm (the default) or by
    value, as Lightning's `gradient_clip_val` / `gradient_clip_algorithm` say: here when the
    optimiser is fused and no gradient scaler is in use, else by `task.clip_gradients`
    (Lightning's, which refuses a fused optimiser under float16)."""
    scaler = getattr(task.trainer.precision_plugin, "scaler", None)
    fused = getattr(optimizer, "_step_supports_amp_scaling", False)
    if not value or scaler is not None or not fused:
        task.clip_gradients(optimizer, value, algorithm)
        return
    parameters = [p for group in optimizer.param_groups for p in group["params"]]
    if algorithm == "value":  # a str, or Lightning's str enum
        torch.nn.utils.clip_grad_value_(parameters, value)
    else:
        torch.nn.utils.clip_grad_norm_(parameters, value)
