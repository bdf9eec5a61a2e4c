"""The loggers of a `seqtasks` run whose config names none: `metrics.csv`, and TensorBoard event
files beside it in the same `lightning_logs/version_N` folder when TensorBoard is installed.

Lightning's own default is TensorBoard alone once it is installed, and CSV alone otherwise; the
docs, the tests and `trainer.log_dir` (checkpoints, attention plots) expect the CSV folder.
"""

from __future__ import annotations

import importlib.util

from lightning.pytorch.loggers import CSVLogger, Logger, TensorBoardLogger


def tensorboard_available() -> bool:
    """Whether TensorBoardLogger can write: it needs `tensorboard` or `tensorboardX`."""
    return any(importlib.util.find_spec(name) for name in ("tensorboard", "tensorboardX"))


class TensorBoardBeside(TensorBoardLogger):
    """A TensorBoardLogger writing into another logger's `version_N` folder.

    Each logger otherwise counts the `version_*` folders on its own, and the second to look
    would count the first's folder and pick the next number. No `hp_metric` placeholder scalar.

    Args:
        beside: the logger whose save_dir, name and version this one takes.
    """

    def __init__(self, beside: CSVLogger):
        super().__init__(save_dir=beside.save_dir, name=beside.name, default_hp_metric=False)
        self.beside = beside

    @property
    def version(self) -> int | str:
        return self.beside.version


def default_loggers(root_dir: str) -> list[Logger]:
    """CSVLogger in `root_dir/lightning_logs/version_N`, first (so `trainer.log_dir` and the
    checkpoints are its folder), and TensorBoard in the same folder when it is installed."""
    csv = CSVLogger(save_dir=root_dir)
    return [csv, TensorBoardBeside(csv)] if tensorboard_available() else [csv]
