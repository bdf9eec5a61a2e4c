"""Writing files atomically: a crash or a full disk never leaves a truncated file where a good
one stood, because the data goes to a temporary file beside it that is renamed when complete."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO


def temporary_path(path: Path) -> Path:
    """A hidden sibling of `path` (same folder, so the rename is atomic; same suffix)."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp{path.suffix}")


@contextmanager
def open_atomic(path: str | Path) -> Iterator[BinaryIO]:
    """A binary file to write that becomes `path` when the block ends without an error.

    The data goes to `temporary_path(path)`, is flushed to the disk, and replaces `path` in one
    rename. If the block raises, `path` is left as it was and the temporary file is removed; a
    process killed while writing leaves `path` intact and at most a hidden temporary sibling.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_path(path)
    try:
        with open(tmp, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def write_atomic(path: str | Path, data: str | bytes) -> Path:
    """Write `data` (str as UTF-8) to `path` via a temporary file and a rename."""
    with open_atomic(path) as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)
    return Path(path)
