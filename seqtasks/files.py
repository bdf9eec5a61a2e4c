"""Writing files atomically: a crash or a full disk never leaves a truncated file where a good
one stood, because the data goes to a temporary file beside it that is renamed when complete."""

from __future__ import annotations

import os
from pathlib import Path


def temporary_path(path: Path) -> Path:
    """A hidden sibling of `path` (same folder, so the rename is atomic; same suffix)."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp{path.suffix}")


def write_atomic(path: str | Path, data: str | bytes) -> Path:
    """Write `data` (str as UTF-8) to `path` via a temporary file and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_path(path)
    try:
        tmp.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
