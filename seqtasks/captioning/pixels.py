"""A disk cache of a source's images decoded and resized once, as uint8 in one memory-mapped
array, so that DataLoader workers copy an image's bytes instead of decoding and resizing it
every epoch: the captioning GPU recipe's step waited 62 % of its time for its eight workers
doing that (docs/gpu.md). An image comes back exactly as `load_image` gives it."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from seqtasks.captioning.captions import as_pixels, decode_image
from seqtasks.io.files import temporary_path
from seqtasks.io.preparation import Preparation


class PixelCache:
    """The images at `paths`, each (S, S, 3) uint8 at S = `image_size`, in one array file,
    `folder/pixels-<digest>-<S>px.npy`, a row per image in the order of their resolved paths;
    an image is read by its path as `paths` gave it (resolved once, here, not on every read).

    The digest covers the image size and each file's resolved path, size and modification
    time, so a cache file is never stale: a changed image, or another set of them, makes
    another file. The file is written whole under a temporary name and renamed into place, so
    an interrupted fill leaves none to read. Each process (a DataLoader worker) maps it
    itself when it first reads from it.
    """

    def __init__(self, folder: str | Path, paths: Sequence[Path], image_size: int):
        files_of = {str(p): str(Path(p).resolve()) for p in paths}  # as given -> the file
        self.paths = sorted(set(files_of.values()))
        row_of = {path: row for row, path in enumerate(self.paths)}
        self.rows = {given: row_of[file] for given, file in files_of.items()}
        self.image_size = image_size
        stats = [os.stat(p) for p in self.paths]
        files = [(p, s.st_size, s.st_mtime_ns) for p, s in zip(self.paths, stats, strict=True)]
        digest = hashlib.sha256(json.dumps([image_size, files]).encode()).hexdigest()[:16]
        self.path = Path(folder) / f"pixels-{digest}-{image_size}px.npy"
        self._array: np.ndarray | None = None
        self._pid: int | None = None

    def fill(self) -> None:
        """Decode every image into the cache file, unless it is there already, saying on stderr
        how far it has got (`Preparation`).

        Raises:
            OSError: naming an image that cannot be read (`decode_image`); no file is left.
        """
        if self.path.is_file():
            return
        size, count = self.image_size, len(self.paths)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = temporary_path(self.path)
        start = f"decoding {count:,} images at {size}px into {self.path}"
        try:
            with Preparation("image cache", start, count, "images") as preparation:
                array = np.lib.format.open_memmap(
                    tmp, mode="w+", dtype=np.uint8, shape=(count, size, size, 3)
                )
                for row, path in enumerate(self.paths):
                    array[row] = decode_image(Path(path), size).numpy()
                    preparation.advance(1)
                array.flush()
                del array
            tmp.replace(self.path)
        finally:
            tmp.unlink(missing_ok=True)

    def __getitem__(self, path: Path) -> Tensor:
        """(3, S, S) RGB in [0, 1] of the image at `path` (one of `paths`), as `load_image`
        gives it."""
        if self._array is None or self._pid != os.getpid():
            self._array, self._pid = np.load(self.path, mmap_mode="r"), os.getpid()
        row = self._array[self.rows[str(path)]]
        return as_pixels(torch.from_numpy(np.array(row)))  # a copy: the map is read-only

    def __getstate__(self) -> dict[str, Any]:
        """Without the map, which each worker opens for itself."""
        return {**self.__dict__, "_array": None, "_pid": None}
