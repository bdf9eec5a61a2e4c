"""Inference precision for the benchmarks: full float32, or bfloat16 matrix products.

On CPUs with bfloat16 matrix units (Intel AMX, Arm SME/BF16) and on GPUs, running the linear
layers, LSTMs and attention products in bfloat16 under `torch.autocast` is several times faster
than float32; softmaxes, layer norms and search scores stay in float32. Outputs can differ from
float32 ones where two hypotheses score almost alike, so measure quality in the precision you
deploy (docs/ quotes both).
"""

from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager
from typing import Literal

import torch

Precision = Literal["32", "bf16"]
PRECISIONS: tuple[str, ...] = ("32", "bf16")


def inference_precision(device: str | torch.device, precision: Precision) -> AbstractContextManager:
    """A context in which to run a model's forward passes: nothing for '32', autocast to
    bfloat16 on `device`'s type for 'bf16'."""
    if precision == "32":
        return contextlib.nullcontext()
    if precision == "bf16":
        return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)
    raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
