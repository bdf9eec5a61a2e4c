"""The task a local model declares, read in milliseconds and without torch: a model folder's
`config.json`, or the small pickle inside a checkpoint's zip archive, read by an unpickler that
builds nothing but dicts, lists and plain values (every class the pickle names, tensors
included, becomes an empty `_Stand_in`; no code of the file runs). A command checks it before
it imports torch, so that a checkpoint of another task is refused at once rather than after
the seconds a full load takes; the full load then checks everything else.
"""

from __future__ import annotations

import json
import pickle
import zipfile
from pathlib import Path
from typing import Any

from seqtasks.model_files.hub import is_hub_name

_PICKLE_LIMIT = 256 << 20  # a checkpoint's data.pkl holds tokenisers, never tensors' data


class _Stand_in(dict):
    """What any class the pickle names becomes: takes every argument and state, holds items."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def __setstate__(self, state: Any) -> None:
        pass

    def append(self, item: Any) -> None:
        pass

    def extend(self, items: Any) -> None:
        pass


class _Skeleton(pickle.Unpickler):
    """An unpickler that imports nothing: classes and functions are `_Stand_in`, and the
    tensors' storages (persistent ids) None."""

    def find_class(self, module: str, name: str) -> Any:
        return _Stand_in

    def persistent_load(self, pid: Any) -> None:
        return None


def _checkpoint_task(path: Path) -> str | None:
    with zipfile.ZipFile(path) as archive:
        names = [n for n in archive.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
        if len(names) != 1 or archive.getinfo(names[0]).file_size > _PICKLE_LIMIT:
            return None
        with archive.open(names[0]) as pickled:
            checkpoint = _Skeleton(pickled).load()
    stored = checkpoint.get("seqtasks") if isinstance(checkpoint, dict) else None
    task = stored.get("task") if isinstance(stored, dict) else None
    return task if isinstance(task, str) else None


def _folder_task(path: Path) -> str | None:
    config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    task = config.get("identity", {}).get("task") if isinstance(config, dict) else None
    return task if isinstance(task, str) else None


def declared_task(reference: str | Path) -> tuple[str, str] | None:
    """(the task, "checkpoint" or "model folder") that the local model `reference` declares;
    None where it cannot be told this way (an `hf://` name, a missing, damaged or unusual
    file), for the full load to say what is wrong."""
    if is_hub_name(reference):
        return None
    path = Path(reference)
    try:
        if path.is_dir():
            found, kind = _folder_task(path), "model folder"
        elif zipfile.is_zipfile(path):
            found, kind = _checkpoint_task(path), "checkpoint"
        else:
            return None
    except Exception:  # noqa: BLE001 (any damage: the full load names it)
        return None
    return None if found is None else (found, kind)


def other_task(references: list[str | Path], task: str) -> str | None:
    """Why the first of `references` that declares another task than `task` will not do, in
    the words the full load uses ("X is a parsing checkpoint, not a translation one"); None
    when none does, as far as `declared_task` can tell."""
    for reference in references:
        found = declared_task(reference)
        if found is not None and found[0] != task:
            return f"{reference} is a {found[0]} {found[1]}, not a {task} one"
    return None
