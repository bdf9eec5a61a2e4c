"""The `seqtasks` command: LightningCLI over every task, encoder and decoder.

    seqtasks fit --config configs/translation/rnn_bahdanau.yaml
    seqtasks fit --config configs/translation/rnn_bahdanau.yaml --ckpt_path last   # resume
    seqtasks test --config configs/translation/rnn_bahdanau.yaml --ckpt_path best

The task, encoder and decoder are chosen by `class_path` in YAML; vocabulary sizes flow from
the DataModule into the model, so they are never typed twice. Checkpoints are written
atomically (`checkpoints.AtomicCheckpointIO`) unless the config names its own CheckpointIO.
"""

from __future__ import annotations

import os
from typing import Any

from lightning.pytorch import Trainer
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.cli import LightningCLI
from lightning.pytorch.plugins.io import CheckpointIO

from seqtasks.checkpoints import AtomicCheckpointIO


class SeqtasksCLI(LightningCLI):
    def add_arguments_to_parser(self, parser) -> None:
        for name in ("src_vocab_size", "tgt_vocab_size"):
            parser.link_arguments(f"data.{name}", f"model.init_args.{name}", apply_on="instantiate")

    def instantiate_trainer(self, **kwargs: Any) -> Trainer:
        config = self.config_init[self.subcommand] if self.subcommand else self.config_init
        plugins = config["trainer"].get("plugins") or []
        plugins = list(plugins) if isinstance(plugins, list) else [plugins]
        if not any(isinstance(plugin, CheckpointIO) for plugin in plugins):
            plugins.append(AtomicCheckpointIO())
        return super().instantiate_trainer(plugins=plugins, **kwargs)

    def before_fit(self) -> None:
        self._find_last_checkpoint()

    def before_validate(self) -> None:
        self._find_last_checkpoint()

    def before_test(self) -> None:
        self._find_last_checkpoint()

    def before_predict(self) -> None:
        self._find_last_checkpoint()

    def _find_last_checkpoint(self) -> None:
        """For `--ckpt_path last`: point every ModelCheckpoint without a `dirpath` at the
        checkpoint folder of the newest earlier run, where `fit` then also goes on writing.

        Such a ModelCheckpoint keeps its files in the logger's `<name>/version_N/checkpoints`,
        and every run gets a new version: Lightning would look for last.ckpt in the new, empty
        folder and start from scratch with only a warning. The folder is spelled as
        ModelCheckpoint spells it, so the callback's state (best score, top k) is restored too.
        """
        if self.config_init[self.subcommand].get("ckpt_path") != "last" or not self.trainer.loggers:
            return
        callbacks = [
            callback
            for callback in self.trainer.checkpoint_callbacks
            if isinstance(callback, ModelCheckpoint) and callback.dirpath is None
        ]
        logger = self.trainer.loggers[0]
        root = os.path.join(logger.save_dir or self.trainer.default_root_dir, str(logger.name))
        if not callbacks or not os.path.isdir(root):
            return
        folders = [os.path.join(root, version, "checkpoints") for version in os.listdir(root)]
        found = [
            (os.path.getmtime(os.path.join(folder, name)), folder)
            for folder in folders
            if os.path.isdir(folder)
            for name in os.listdir(folder)
            if name.startswith(ModelCheckpoint.CHECKPOINT_NAME_LAST)
            and name.endswith(ModelCheckpoint.FILE_EXTENSION)
        ]
        if found:
            for callback in callbacks:
                callback.dirpath = max(found)[1]


def main(args: list[str] | None = None) -> None:
    SeqtasksCLI(
        subclass_mode_model=True,
        subclass_mode_data=True,
        save_config_kwargs={"overwrite": True},
        args=args,
    )


if __name__ == "__main__":
    main()
