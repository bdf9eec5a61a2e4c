"""Averaging the weights of several checkpoints of one model (Vaswani et al. 2017 average the
last 5 or 20): refused, naming the file and the first difference, unless every checkpoint is the
same model, setting by setting (`comparison.difference`; what only training reads may differ), with
the same tokenisers (`identity.fingerprint_difference`) and tensors."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from seqtasks.io.checkpoint_files import CheckpointError, read_checkpoint
from seqtasks.model_files.comparison import difference as spec_difference
from seqtasks.model_files.identity import IDENTITY_KEY, fingerprint_difference
from seqtasks.model_files.sources import ModelSource, checked, checkpoint_source


def _tensors(checkpoint: dict[str, Any]) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    return {
        name: (tuple(t.shape), t.dtype)
        for name, t in checkpoint["state_dict"].items()
        if isinstance(t, Tensor)
    }


def _tensor_difference(first: dict, other: dict) -> str | None:
    """How `other`'s tensors (name -> shape, dtype) differ from `first`'s, in words."""
    if other.keys() != first.keys():
        extra, missing = sorted(other.keys() - first.keys()), sorted(first.keys() - other.keys())
        return f"its architecture differs (only here: {extra[:3]}; missing: {missing[:3]})"
    for name, (shape, dtype) in other.items():
        if (shape, dtype) != first[name]:
            first_shape, first_dtype = first[name]
            return (
                f"its architecture differs: {name} is {list(shape)} {dtype}, "
                f"not {list(first_shape)} {first_dtype}"
            )
    return None


def difference(first: ModelSource, other: ModelSource) -> str | None:
    """How the model `other` differs from `first`, in words (task, then each setting of the
    specification, then the tokenisers); None when they are one model."""

    if other.task != first.task:
        return f"it is a {other.task} checkpoint, not a {first.task} one"
    names = (Path(first.where).name, Path(other.where).name)
    if names[0] == names[1]:
        names = ("the first", "this one")
    return spec_difference(first.resolved, other.resolved, names) or fingerprint_difference(
        first.identity.fingerprints, other.identity.fingerprints, names
    )


def average_checkpoints(paths: Sequence[str | Path]) -> dict[str, Any]:
    """One checkpoint whose floating-point weights are the mean of those in `paths` (summed in
    float64, cast back); integer buffers and everything else (hyperparameters, vocabularies,
    optimiser and loop state) come from the newest one (highest global step, the later one
    named on a tie). Its identity record keeps no fit scores (they were not the average's).
    The checkpoints are read one at a time.

    Raises `CheckpointError` naming the file if one is unreadable, of a newer format, or not
    the same model as the first (`difference`), or unlike it in tensor names, shapes and dtypes.
    """
    if not paths:
        raise CheckpointError("no checkpoints to average")
    sums: dict[str, Tensor] = {}
    first: ModelSource | None = None
    first_tensors: dict = {}
    newest: dict[str, Any] | None = None
    for path in map(Path, paths):
        if path.is_dir():
            raise CheckpointError(
                f"{path} is a folder: average takes checkpoint files (a model folder holds no "
                "training state to average into a checkpoint)"
            )
        checkpoint = read_checkpoint(path)
        source = checked(checkpoint_source(checkpoint, path, str(path)))
        tensors = _tensors(checkpoint)
        if first is None:
            first, first_tensors = source, tensors
        elif why := difference(first, source) or _tensor_difference(first_tensors, tensors):
            raise CheckpointError(f"cannot average {path} with {first.where}: {why}")
        for name, tensor in checkpoint["state_dict"].items():
            if isinstance(tensor, Tensor) and tensor.is_floating_point():
                total = tensor.to(torch.float64)
                sums[name] = total if name not in sums else sums[name].add_(total)
        if newest is None or checkpoint.get("global_step", 0) >= newest.get("global_step", 0):
            newest = checkpoint
    averaged = dict(newest)
    averaged["state_dict"] = {
        name: (sums[name] / len(paths)).to(tensor.dtype) if name in sums else tensor
        for name, tensor in newest["state_dict"].items()
    }
    averaged["averaged_from"] = [str(path) for path in paths]
    if IDENTITY_KEY in averaged:
        averaged[IDENTITY_KEY] = {**averaged[IDENTITY_KEY], "scores": None}
    return averaged
