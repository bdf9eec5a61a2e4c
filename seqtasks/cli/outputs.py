"""Every place a `seqtasks` run will write, checked before its first step and named by its
config key: the trainer's `default_root_dir`, the loggers' folders, the checkpoint folders
(`fit`) and a prediction writer's file (`predict`). Lightning finds out only when it first
writes there, at the first checkpoint, an epoch of work later; a prediction file that is one of
the data's own files would replace it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lightning.pytorch import Trainer
from lightning.pytorch.callbacks import BasePredictionWriter

from seqtasks.io.outputs import check_output

DATA_PATHS = ("data_dir", "shard_dir", "source", "image_dir")  # what DataModules read from


def data_inputs(datamodule: Any) -> dict[str, list[Path]]:
    """The files a DataModule reads, by the config key that names them: its file, or every file
    in its folder (`data_dir`, `shard_dir`, `source`, `image_dir`)."""
    inputs: dict[str, list[Path]] = {}
    for name in DATA_PATHS:
        value = getattr(datamodule, name, None)
        path = Path(value) if isinstance(value, (str, Path)) else None
        if path is not None and path.is_file():
            inputs[f"data.init_args.{name}"] = [path]
        elif path is not None and path.is_dir():
            inputs[f"a file of data.init_args.{name}"] = [p for p in path.iterdir() if p.is_file()]
    return inputs


def _local(path: Any) -> bool:
    return path is not None and "://" not in str(path)


def run_folders(
    trainer: Trainer, subcommand: str, root_used: bool, default_loggers: bool
) -> list[tuple[Any, str]]:
    """(folder, config key) for every folder the run writes in: `default_root_dir` when
    something writes there (`root_used`), the loggers' folders (`default_loggers`: those the
    CLI made in `default_root_dir`; else those the config names), and for `fit` the checkpoint
    folders the config names."""
    folders = [(trainer.default_root_dir, "trainer.default_root_dir")] if root_used else []
    for logger in trainer.loggers:
        key = f"trainer.logger[{type(logger).__name__}].init_args.save_dir"
        key = "trainer.default_root_dir" if default_loggers else key
        folders += [(logger.save_dir, key), (getattr(logger, "root_dir", None), key)]
    if subcommand == "fit":
        for callback in trainer.checkpoint_callbacks:
            key = f"trainer.callbacks[{type(callback).__name__}].init_args.dirpath"
            folders.append((getattr(callback, "dirpath", None), key))
    return [(folder, key) for folder, key in folders if _local(folder)]


def check_run_outputs(
    trainer: Trainer,
    subcommand: str,
    datamodule: Any,
    ckpt_path: Any,
    root_used: bool,
    default_loggers: bool,
) -> None:
    """Raise `seqtasks.io.outputs.OutputError` naming the config key if a folder of the run
    (`run_folders`) cannot be written, or lies in seqtasks' own files, or if a prediction
    writer's `output` cannot be written or is one of the data's files or the checkpoint."""
    for folder, key in run_folders(trainer, subcommand, root_used, default_loggers):
        check_output(folder, key, folder=True)
    if subcommand != "predict":
        return
    inputs: dict[str, Any] = data_inputs(datamodule)
    if _local(ckpt_path) and Path(ckpt_path).is_file():
        inputs["--ckpt_path"] = ckpt_path
    for callback in trainer.callbacks:
        output = getattr(callback, "output", None)
        if isinstance(callback, BasePredictionWriter) and output is not None:
            key = f"trainer.callbacks[{type(callback).__name__}].init_args.output"
            check_output(output, key, inputs)
