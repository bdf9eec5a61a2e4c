"""Reading checkpoint files with errors a person can act on (what a checkpoint is, and how it
is compared with others: `seqtasks.model_files`). torch is imported only to read one, so that
`CheckpointError` is at hand to the commands before torch is."""

from __future__ import annotations

import re
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any


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


def torch_load(path: str | Path, weights_only: bool | None = True, mmap: bool = False) -> Any:
    """What `torch.load` reads from the file `path`, on the CPU; `weights_only` builds nothing
    but tensors and plain values (None: PyTorch's default, which is True since 2.6); `mmap`
    maps the tensors' data rather than reading it (for what is beside them, read at once).

    Raises:
        CheckpointError: naming the file and what is wrong with it, whatever `torch.load`
            raised (random bytes make its unpickler fail in many ways), and also when it read
            an archive one of whose entries fails its CRC check.
    """
    path = Path(path)
    if path.is_dir() and (path / "config.json").is_file():
        raise CheckpointError(
            f"{path} is a model folder, not a checkpoint file: it holds the model for inference "
            "(seqtasks.load, the commands, serve, export read it) but no training state to "
            "restore"
        )
    if path.is_dir():
        inside = sorted(p.name for p in path.glob("*.ckpt") if not p.name.startswith("."))
        hint = f": name one of the checkpoints in it ({', '.join(inside[:5])})" if inside else ""
        raise CheckpointError(f"{path} is a folder, not a checkpoint file{hint}")
    if not path.is_file():
        raise CheckpointError(f"no such checkpoint: {path}")
    import torch

    try:
        loaded = torch.load(path, map_location="cpu", weights_only=weights_only, mmap=mmap)
    except Exception as error:  # any: see the docstring
        raise CheckpointError(
            f"{path} is not a readable PyTorch checkpoint: {_why_unreadable(path, error)}"
        ) from None
    check_entries(path)
    return loaded


def read_checkpoint(path: str | Path, mmap: bool = False) -> dict[str, Any]:
    """A seqtasks checkpoint as a dict, read without unpickling code (`weights_only`), its
    tensors mapped rather than read with `mmap` (`torch_load`)."""
    path = Path(path)
    checkpoint = torch_load(path, mmap=mmap)
    if not isinstance(checkpoint, dict) or "state_dict" not in checkpoint:
        raise CheckpointError(f"{path} is not a Lightning checkpoint (no state_dict)")
    stored = checkpoint.get("seqtasks")
    if not isinstance(stored, dict) or "task" not in stored:
        raise CheckpointError(f"{path} was not written by seqtasks (no tokenisers or task inside)")
    return checkpoint


def checkpoint_task(path: str | Path) -> str:
    """The task a seqtasks checkpoint was trained for ('translation', …)."""
    return read_checkpoint(path, mmap=True)["seqtasks"]["task"]


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
