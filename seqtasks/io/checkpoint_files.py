"""Reading checkpoint files: loading a task with errors a person can act on, and averaging the
weights of several.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch import Tensor

T = TypeVar("T")  # a task class (a LightningModule)


class CheckpointError(ValueError):
    """A checkpoint that is missing, unreadable, of another task, or unlike its peers."""


def _why_unreadable(path: Path, error: Exception) -> str:
    """What is wrong with a file `torch.load` failed on, in words: PyTorch's own message for a
    damaged file is an internal error, or an unrelated one (IndexError, struct.error …) when it
    reads random bytes as a pickle."""
    size = path.stat().st_size
    if size == 0:
        return "the file is empty (0 bytes): was its writing or download cut short?"
    with open(path, "rb") as f:
        start = f.read(4)
    if start != b"PK\x03\x04":
        return (
            f"it is not the zip archive torch.save writes (it starts with bytes {start.hex(' ')}) "
            f"and cannot be read as an older PyTorch file ({type(error).__name__})"
        )
    if not zipfile.is_zipfile(path):
        return (
            f"the zip archive ends after {size} bytes without its table of contents: was its "
            "writing or download cut short?"
        )
    refused = re.search(r"Unsupported global: GLOBAL ([\w.]+)", str(error))
    if refused:
        return (
            f"it holds a {refused[1]} object, which loading with weights_only refuses; seqtasks "
            "checkpoints hold only tensors and plain Python values (docs/bad_input.md)"
        )
    missing = re.search(r'failed locating file ([^\s:]+)|hasRecord\("([^"]+)"\)', str(error))
    if missing:
        return f"the zip archive lacks its entry {missing[1] or missing[2]!r}"
    return _damaged_entry(path) or (
        f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else 'no details'}"
    )


def _damaged_entry(path: Path) -> str | None:
    """Which entry of the zip archive at `path` fails its CRC check, in words, or None.
    PyTorch does not check: a flipped bit in a tensor's data loads as a wrong weight."""
    with zipfile.ZipFile(path) as archive:
        damaged = archive.testzip()
    if damaged is None:
        return None
    return (
        f"the zip archive's entry {damaged!r} does not match its CRC: the file changed after it "
        "was written (a damaged disk or transfer?)"
    )


def check_entries(path: Path) -> None:
    """Raise a `CheckpointError` if a zip checkpoint that loaded holds a damaged entry."""
    damaged = _damaged_entry(path) if zipfile.is_zipfile(path) else None
    if damaged:
        raise CheckpointError(f"{path} is not a readable PyTorch checkpoint: {damaged}")


def torch_load(path: str | Path, weights_only: bool | None = True) -> Any:
    """What `torch.load` reads from the file `path`, on the CPU; `weights_only` builds nothing
    but tensors and plain values (None: PyTorch's default, which is True since 2.6).

    Raises:
        CheckpointError: naming the file and what is wrong with it, whatever `torch.load`
            raised (random bytes make its unpickler fail in many ways), and also when it read
            an archive one of whose entries fails its CRC check.
    """
    path = Path(path)
    if path.is_dir():
        inside = sorted(p.name for p in path.glob("*.ckpt") if not p.name.startswith("."))
        hint = f": name one of the checkpoints in it ({', '.join(inside[:5])})" if inside else ""
        raise CheckpointError(f"{path} is a folder, not a checkpoint file{hint}")
    if not path.is_file():
        raise CheckpointError(f"no such checkpoint: {path}")
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=weights_only)
    except Exception as error:  # any: see the docstring
        raise CheckpointError(
            f"{path} is not a readable PyTorch checkpoint: {_why_unreadable(path, error)}"
        ) from None
    check_entries(path)
    return loaded


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """A seqtasks checkpoint as a dict, read without unpickling code (`weights_only`)."""
    path = Path(path)
    checkpoint = torch_load(path)
    if not isinstance(checkpoint, dict) or "state_dict" not in checkpoint:
        raise CheckpointError(f"{path} is not a Lightning checkpoint (no state_dict)")
    stored = checkpoint.get("seqtasks")
    if not isinstance(stored, dict) or "task" not in stored:
        raise CheckpointError(f"{path} was not written by seqtasks (no tokenisers or task inside)")
    return checkpoint


def checkpoint_task(path: str | Path) -> str:
    """The task a seqtasks checkpoint was trained for ('translation', …)."""
    return read_checkpoint(path)["seqtasks"]["task"]


def stored_entries(checkpoint: dict[str, Any], task: str, keys: Sequence[str]) -> list[Any]:
    """What a `task` checkpoint keeps beside its weights (tokenisers, vocabularies), by `keys`.

    Raises:
        CheckpointError: naming the task found, or the entries that are missing.
    """
    stored = checkpoint.get("seqtasks", {})
    if stored.get("task") != task:
        raise CheckpointError(f"not a {task} checkpoint (task: {stored.get('task', 'unknown')})")
    missing = [key for key in keys if key not in stored]
    if missing:
        raise CheckpointError(
            f"this {task} checkpoint lacks {', '.join(missing)}: without them the model cannot "
            "read or write text"
        )
    return [stored[key] for key in keys]


def require_task(path: str | Path, task: str | None) -> None:
    """Raise a `CheckpointError` unless `path` is a readable seqtasks checkpoint, of `task`
    when one is given, naming the task found otherwise."""
    found = checkpoint_task(path)
    if task is not None and found != task:
        raise CheckpointError(f"{path} is a {found} checkpoint, not a {task} one")


def load_task(path: str | Path, task_class: type[T], task: str, device: str = "cpu") -> T:
    """`task_class.load_from_checkpoint(path)` in eval mode, after checking it is a `task` one."""
    require_task(path, task)
    try:
        model = task_class.load_from_checkpoint(path, map_location=device)
    except ValueError as error:  # from the task's on_load_checkpoint
        raise CheckpointError(f"{path}: {error}") from None
    except (RuntimeError, KeyError, TypeError, ImportError, AttributeError) as error:
        details = " ".join(str(error).split())  # load_state_dict lists keys over many lines
        raise CheckpointError(
            f"{path}: cannot build the {task} model it describes ({type(error).__name__}: "
            f"{details[:300]})"
        ) from None
    return model.eval()


def _signature(checkpoint: dict[str, Any]) -> dict[str, Any]:
    """What checkpoints must share to be averaged: task, model class, vocabularies, and the
    name, shape and dtype of every tensor."""
    return {
        "task": checkpoint["seqtasks"]["task"],
        "model class": checkpoint.get("hyper_parameters", {}).get("_class_path"),
        "vocabularies": {k: v for k, v in checkpoint["seqtasks"].items() if k != "task"},
        "tensors": {
            name: (tuple(t.shape), t.dtype)
            for name, t in checkpoint["state_dict"].items()
            if isinstance(t, Tensor)
        },
    }


def _difference(first: dict[str, Any], other: dict[str, Any]) -> str | None:
    """How `other`'s signature differs from `first`'s, in words; None if it does not."""
    if other["task"] != first["task"]:
        return f"it is a {other['task']} checkpoint, not a {first['task']} one"
    if other["model class"] != first["model class"]:
        return f"its model is a {other['model class']}, not a {first['model class']}"
    if other["vocabularies"] != first["vocabularies"]:
        return "its vocabularies differ"
    names, first_names = other["tensors"].keys(), first["tensors"].keys()
    if names != first_names:
        extra, missing = sorted(names - first_names), sorted(first_names - names)
        return f"its architecture differs (only here: {extra[:3]}; missing: {missing[:3]})"
    for name, (shape, dtype) in other["tensors"].items():
        if (shape, dtype) != first["tensors"][name]:
            first_shape, first_dtype = first["tensors"][name]
            return (
                f"its architecture differs: {name} is {list(shape)} {dtype}, "
                f"not {list(first_shape)} {first_dtype}"
            )
    return None


def average_checkpoints(paths: Sequence[str | Path]) -> dict[str, Any]:
    """One checkpoint whose floating-point weights are the mean of those in `paths` (summed in
    float64, cast back); integer buffers and everything else (hyperparameters, vocabularies,
    optimiser and loop state) come from the newest one (highest global step, the later one
    named on a tie). The checkpoints are read one at a time.

    Raises `CheckpointError` naming the file if one is unreadable or differs from the first
    in task, model class, vocabularies or tensor names, shapes and dtypes.
    """
    if not paths:
        raise CheckpointError("no checkpoints to average")
    sums: dict[str, Tensor] = {}
    first_path, first, newest = Path(paths[0]), None, None
    for path in map(Path, paths):
        checkpoint = read_checkpoint(path)
        signature = _signature(checkpoint)
        if first is None:
            first = signature
        elif (difference := _difference(first, signature)) is not None:
            raise CheckpointError(f"cannot average {path} with {first_path}: {difference}")
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
    return averaged
