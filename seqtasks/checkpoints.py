"""Loading a task from a checkpoint with errors a person can act on."""

from __future__ import annotations

import pickle
import zipfile
from pathlib import Path
from typing import TypeVar

import lightning as L
import torch

T = TypeVar("T", bound=L.LightningModule)


class CheckpointError(Exception):
    """A checkpoint that is missing, unreadable, or of another task."""


def checkpoint_task(path: str | Path) -> str:
    """The task a seqtasks checkpoint was trained for ('translation', …)."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no such checkpoint: {path}")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, pickle.UnpicklingError, zipfile.BadZipFile, ValueError) as e:
        raise CheckpointError(f"{path} is not a readable PyTorch checkpoint ({e})") from None
    if not isinstance(checkpoint, dict) or "state_dict" not in checkpoint:
        raise CheckpointError(f"{path} is not a Lightning checkpoint (no state_dict)")
    stored = checkpoint.get("seqtasks")
    if not isinstance(stored, dict) or "task" not in stored:
        raise CheckpointError(f"{path} was not written by seqtasks (no tokenisers or task inside)")
    return stored["task"]


def load_task(path: str | Path, task_class: type[T], task: str, device: str = "cpu") -> T:
    """`task_class.load_from_checkpoint(path)` in eval mode, after checking it is a `task` one."""
    found = checkpoint_task(path)
    if found != task:
        raise CheckpointError(f"{path} is a {found} checkpoint, not a {task} one")
    model = task_class.load_from_checkpoint(path, map_location=device)
    return model.eval()


def resolve_device(device: str) -> str:
    """'auto' -> 'cuda' when a GPU is visible, else 'cpu'; anything else as given."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device
