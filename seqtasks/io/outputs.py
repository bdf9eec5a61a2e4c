"""Output paths, checked before any work starts: an output that would replace one of the run's
inputs (its text, a reference, a checkpoint), lie inside a folder the run replaces, or overwrite
a file of seqtasks itself is refused, and so is one that cannot be written (a folder where a file
is to go, a file where a folder is to go, a parent that is a file, a folder without write
permission). A run then never does its work only to lose it, or its input, to the output.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

import seqtasks


class OutputError(ValueError):
    """An output path that must not, or cannot, be written (the message says which and why)."""


def same_path(a: str | Path, b: str | Path) -> bool:
    """Whether `a` and `b` name one file or folder: the same inode when both exist (links
    included), else the same absolute path once links are resolved."""
    a, b = Path(a), Path(b)
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return a.resolve() == b.resolve()


def inside(path: str | Path, folder: str | Path) -> bool:
    """Whether `path` is `folder` or lies somewhere under it (links resolved)."""
    path, folder = Path(path).resolve(), Path(folder).resolve()
    return path == folder or path.is_relative_to(folder)


def _own_files() -> dict[str, Path]:
    """What no output may replace: the seqtasks package and the script being run."""
    own = {"the seqtasks package": Path(seqtasks.__file__).resolve().parent}
    script = sys.argv[0] if sys.argv and sys.argv[0] not in ("", "-c", "-m") else None
    if script and Path(script).is_file():
        own["the script being run"] = Path(script).resolve()
    return own


def _unwritable(path: Path, folder: bool) -> str | None:
    """Why `path` (a file, or a folder when `folder`) cannot be written, or None."""
    if path.is_symlink() and not path.exists():
        return f"is a link to {os.readlink(path)}, which does not exist"
    path = Path(os.path.realpath(path))  # what is written: the file or folder a link names
    if path.exists():
        if folder and not path.is_dir():
            return "is a file, not a folder"
        if not folder and path.is_dir():
            return "is a folder: name a file to write"
        if not path.is_file() and not path.is_dir():  # a pipe, a terminal: written as it is
            return None if os.access(path, os.W_OK) else "cannot be written (permission denied)"
    ancestor = path.parent if not path.is_dir() else path
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        return f"cannot be written: {ancestor} is a file, not a folder"
    try:  # the one sure test (permissions, read-only disks, /proc …): create a file there
        descriptor, probe = tempfile.mkstemp(prefix=".seqtasks-write-check-", dir=ancestor)
    except OSError as error:
        return f"cannot be written: no file can be created in {ancestor} ({error.strerror})"
    os.close(descriptor)
    os.unlink(probe)
    return None


def check_output(
    path: str | Path,
    what: str,
    inputs: Mapping[str, str | Path | Iterable[str | Path] | None] | None = None,
    folder: bool = False,
    replaces: bool = False,
) -> Path:
    """`path` once it is known that writing it loses nothing and can succeed; `what` names it
    in messages ("argument --output", "OUT").

    `inputs` maps what each input is called ("--input", "the checkpoint") to its path(s): the
    output must not be any of them, nor a file of seqtasks itself. `folder`: `path` is a folder
    to write files in. `replaces`: the run replaces that folder as a whole, so no input may lie
    inside it either.

    Raises:
        OutputError: saying what is wrong, naming `what`, the path and the input at stake.
    """
    path = Path(path)
    for label, paths in (inputs or {}).items():
        if paths is None:
            continue
        for source in [paths] if isinstance(paths, (str, Path)) else paths:
            if same_path(path, source):
                harm = (
                    "writing there would mix outputs with that input; choose another folder"
                    if folder
                    else "writing it would overwrite that file; choose another name"
                )
                raise OutputError(f"{what} {path} is also {label} ({source}): {harm}")
            if replaces and inside(source, path):
                raise OutputError(
                    f"{what} {path} holds {label} ({source}), and writing {path} replaces the "
                    "whole folder: choose another folder"
                )
    for label, own in _own_files().items():
        if inside(path, own) or (replaces and inside(own, path)):
            raise OutputError(f"{what} {path} would overwrite {label} ({own})")
    reason = _unwritable(path, folder)
    if reason is not None:
        raise OutputError(f"{what} {path} {reason}")
    return path
