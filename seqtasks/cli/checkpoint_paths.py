"""What `--ckpt_path last` and `--ckpt_path best` mean for a `seqtasks` run: the checkpoints of
the newest earlier run of the config, which Lightning alone does not find from a new process.

A ModelCheckpoint without a `dirpath` keeps its files in the logger's
`<name>/version_N/checkpoints`, and every run gets a new version: Lightning would look for
last.ckpt in the new, empty folder and start from scratch with only a warning, and it knows the
best checkpoint only of callbacks that ran in the same process (`ValueError: ... ModelCheckpoint
is not configured to save the best model`).
"""

from __future__ import annotations

import os
from pathlib import Path

from lightning.pytorch import Trainer
from lightning.pytorch.callbacks import ModelCheckpoint

from seqtasks.io.checkpoint_files import CheckpointError, torch_load

LAST = ModelCheckpoint.CHECKPOINT_NAME_LAST + ModelCheckpoint.FILE_EXTENSION


def newest_last_folder(trainer: Trainer) -> str | None:
    """The `version_N/checkpoints` folder, under the first logger's folder, holding the newest
    last.ckpt (or `last-vN.ckpt`), spelled as ModelCheckpoint spells it; None if there is none."""
    if not trainer.loggers:
        return None
    logger = trainer.loggers[0]
    root = os.path.join(logger.save_dir or trainer.default_root_dir, str(logger.name))
    if not os.path.isdir(root):
        return None
    folders = [os.path.join(root, version, "checkpoints") for version in os.listdir(root)]
    found = [
        (os.path.getmtime(os.path.join(folder, name)), folder)
        for folder in folders
        if os.path.isdir(folder)
        for name in os.listdir(folder)
        if name.startswith(ModelCheckpoint.CHECKPOINT_NAME_LAST)
        and name.endswith(ModelCheckpoint.FILE_EXTENSION)
    ]
    return max(found)[1] if found else None


def point_at_last(trainer: Trainer) -> None:
    """Point every ModelCheckpoint without a `dirpath` at `newest_last_folder`, where Lightning
    then finds last.ckpt and `fit` goes on writing (with the callbacks' best score and top k)."""
    folder = newest_last_folder(trainer)
    if folder is None:
        return
    for callback in trainer.checkpoint_callbacks:
        if isinstance(callback, ModelCheckpoint) and callback.dirpath is None:
            callback.dirpath = folder


def last_checkpoint(trainer: Trainer) -> str | None:
    """The file `--ckpt_path last` resumes from, found as Lightning finds it (the newest
    last*.ckpt in the folders of the trainer's ModelCheckpoints, once `point_at_last` has
    pointed them); None if there is none."""
    found = [
        (
            os.path.getmtime(os.path.join(callback.dirpath, name)),
            os.path.join(callback.dirpath, name),
        )
        for callback in trainer.checkpoint_callbacks
        if isinstance(callback, ModelCheckpoint)
        and callback.dirpath
        and os.path.isdir(callback.dirpath)
        for name in os.listdir(callback.dirpath)
        if name.startswith(ModelCheckpoint.CHECKPOINT_NAME_LAST)
        and name.endswith(ModelCheckpoint.FILE_EXTENSION)
    ]
    return max(found)[1] if found else None


def best_checkpoint(trainer: Trainer) -> str:
    """The best checkpoint of the newest earlier run, as its newest last.ckpt records it for
    the trainer's first ModelCheckpoint (the one Lightning's `best` means).

    Raises:
        CheckpointError: when no last.ckpt records one, or the file it names is gone.
    """
    callback = trainer.checkpoint_callback
    if not isinstance(callback, ModelCheckpoint):
        raise CheckpointError("--ckpt_path best: the config has no ModelCheckpoint to keep a best")
    folders = [newest_last_folder(trainer)]
    folders += [c.dirpath for c in trainer.checkpoint_callbacks if getattr(c, "dirpath", None)]
    lasts = [Path(f) / LAST for f in folders if f is not None and (Path(f) / LAST).is_file()]
    if not lasts:
        raise CheckpointError(
            "--ckpt_path best: no earlier run of this config left a last.ckpt to say which "
            f"checkpoint was best (looked under {trainer.default_root_dir}); name the file"
        )
    last = max(lasts, key=lambda path: path.stat().st_mtime)
    state = torch_load(last).get("callbacks", {}).get(callback.state_key, {})
    best = state.get("best_model_path")
    if not best:
        raise CheckpointError(f"--ckpt_path best: {last} records no best checkpoint; name the file")
    if not Path(best).is_file():
        raise CheckpointError(f"--ckpt_path best: {best}, which {last} records, is gone")
    return best
