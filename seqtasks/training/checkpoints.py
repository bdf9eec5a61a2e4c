"""Writing checkpoints during training: atomically, and the latest one to resume from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.plugins.io import TorchCheckpointIO
from torch import Tensor

from seqtasks.io.checkpoint_files import check_entries, torch_load
from seqtasks.io.files import open_atomic, remove_stale_temporaries


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's `TorchCheckpointIO`, writing each checkpoint to a temporary file beside it
    and renaming that into place (`seqtasks.io.files.open_atomic`), so a crash or a kill mid-write
    leaves the previous `last.ckpt` whole.

    Lightning 2.6 writes through an fsspec transaction whose temporary file lives in the system
    temporary folder; moving it into place is a rename only when that folder shares a file
    system with the checkpoint, and otherwise a copy over the old file that a kill cuts short.
    Remote paths (s3://, gs://, …) keep Lightning's writer: object stores replace whole objects.
    Reading a local checkpoint that is damaged raises a `CheckpointError` that says how.
    """

    def __init__(self) -> None:
        super().__init__()
        self._cleaned: set[Path] = set()

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: str | Path, storage_options: Any | None = None
    ) -> None:
        """Write `checkpoint` to `path` atomically; before the first write into a folder,
        remove the temporary files that killed runs left there."""
        fs, local_path = url_to_fs(str(path))
        if storage_options is not None or not isinstance(fs, LocalFileSystem):
            super().save_checkpoint(checkpoint, path, storage_options)
            return
        folder = Path(local_path).parent
        if folder not in self._cleaned:
            remove_stale_temporaries(folder)
            self._cleaned.add(folder)
        with open_atomic(local_path) as f:
            torch.save(checkpoint, f)

    def load_checkpoint(
        self, path: str | Path, map_location: Any | None = None, weights_only: bool | None = None
    ) -> dict[str, Any]:
        """Lightning's loading, except that a local file that cannot be read, or one with a
        damaged entry, raises a `CheckpointError` naming it and what is wrong (`torch_load`)."""
        fs, local_path = url_to_fs(str(path))
        try:
            checkpoint = super().load_checkpoint(path, map_location, weights_only)
        except Exception:  # any: if the file is at fault, torch_load says how
            if isinstance(fs, LocalFileSystem):
                torch_load(local_path, weights_only)
            raise
        if isinstance(fs, LocalFileSystem):
            check_entries(Path(local_path))
        return checkpoint


class LastCheckpoint(ModelCheckpoint):
    """Writes `last.ckpt` after every validation (at every epoch's end when there is none),
    for `--ckpt_path last` to resume from.

    Since Lightning 2.6, `ModelCheckpoint(save_last=True)` copies last.ckpt only when it writes
    a top-k checkpoint too, which with a monitored metric means only when the metric improved:
    a killed run would go back to its best validation, not its latest. This is a checkpoint
    without a monitor that keeps a single file named last; the configs pair it with a
    monitored ModelCheckpoint that keeps the best.

    Args:
        dirpath: the folder; by default the logger's `<version>/checkpoints`.
    """

    def __init__(self, dirpath: str | None = None):
        super().__init__(
            dirpath=dirpath, filename=self.CHECKPOINT_NAME_LAST, enable_version_counter=False
        )


def refuse_non_finite(state_dict: dict[str, Any], step: int) -> None:
    """Raise rather than write a checkpoint whose weights hold NaN or infinity."""
    for name, tensor in state_dict.items():
        if isinstance(tensor, Tensor) and tensor.is_floating_point():
            if not torch.isfinite(tensor).all():
                raise FloatingPointError(
                    f"not writing a checkpoint at step {step}: parameter {name} holds "
                    "non-finite values"
                )
