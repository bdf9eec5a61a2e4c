"""An output folder that is never half-written over a good one: it is built in a hidden
sibling folder and renamed into place only once complete."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class ExportError(ValueError):
    """A checkpoint that the target runtime cannot run, or an output folder that must not be
    replaced; the message names the file or folder and the reason."""


def refuse_existing(out: Path, force: bool) -> None:
    """Raise an `ExportError` if `out` is a file, or a folder with something in it and `force`
    is off."""
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out} exists and is not a folder; choose another output folder")
    if not force and out.is_dir() and any(out.iterdir()):
        raise ExportError(f"{out} exists and is not empty; pass --force to replace it")


@contextmanager
def staged_directory(out: str | Path, force: bool = False) -> Iterator[Path]:
    """A new, empty hidden sibling of `out` (`.NAME.XXXX.tmp`) to fill; when the block ends
    without an error it becomes `out`. If the block raises, `out` is left as it was and the
    sibling is removed.

    An empty `out` is replaced; a non-empty one only with `force`, and then it is first renamed
    aside (`.NAME.XXXX.old`) and removed after the new folder is in place, so at every moment
    a complete folder exists under one of the two names.
    """
    out = Path(os.path.abspath(out))  # "models/." -> its real name and parent
    refuse_existing(out, force)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        yield staging
        refuse_existing(out, force)  # again: something may have appeared meanwhile
        _move_into_place(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _move_into_place(staging: Path, out: Path) -> None:
    """Rename the complete folder `staging` to `out`, replacing what is there."""
    if out.is_dir() and not any(out.iterdir()):
        out.rmdir()
    if not out.exists():
        os.rename(staging, out)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
    os.rename(out, old / out.name)
    os.rename(staging, out)
    shutil.rmtree(old, ignore_errors=True)
