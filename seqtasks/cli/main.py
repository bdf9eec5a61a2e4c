"""The `seqtasks` command: LightningCLI over every task, encoder and decoder.

    seqtasks fit --config configs/translation/rnn_bahdanau.yaml
    seqtasks fit --config configs/translation/rnn_bahdanau.yaml --ckpt_path last   # resume
    seqtasks test --config configs/translation/rnn_bahdanau.yaml --ckpt_path best

The task, encoder and decoder are chosen by `class_path` in YAML; vocabulary sizes flow from
the DataModule into the model, so they are never typed twice. Checkpoints are written
atomically (`checkpoints.AtomicCheckpointIO`) unless the config names its own CheckpointIO.
A config that names no logger gets `metrics.csv` and TensorBoard event files in one
`lightning_logs/version_N` folder (`training.loggers`); one that names no progress bar gets
plain lines (`training.progress.LineProgress`) when stderr is not a terminal. `validate` and
`test` print their scores as seqtasks prints scores (`metrics.formats`), and Lightning's
messages that say nothing a user can act on are silenced (`training.noise`).

Errors a person can act on end the run with one `error:` line (status 2) before its first step:
a config error names the key and what is wrong with it (`config_errors`; jsonargparse's account
follows); a `--ckpt_path` that is missing, damaged, or of another task than the config's model
is refused before anything is built; an accelerator or devices this machine lacks
(`accelerators`) before the Trainer is built; a place the run cannot write, or a prediction
file that would replace the data (`outputs`), and a checkpoint of another model (a setting of
its specification) or of other data (a tokeniser's fingerprint; `training.compatibility.
check_identity`), before it writes anything; a checkpoint whose tensors, optimiser or
schedulers differ from the config's (`training.compatibility`), and a model with fewer
positions than the data's sequences need (`training.positions`), before the first step.
Lightning's start-up lines are held until the run starts (`training.noise.StartupLines`).
The config describes the model: unlike LightningCLI, `--ckpt_path FILE` does not read the
model's settings from the file over it.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any, NoReturn

from lightning.pytorch import Trainer
from lightning.pytorch.callbacks import ProgressBar
from lightning.pytorch.cli import LightningCLI
from lightning.pytorch.plugins.io import CheckpointIO
from lightning.pytorch.utilities.exceptions import MisconfigurationException

from seqtasks.cli.accelerators import check_accelerator
from seqtasks.cli.checkpoint_paths import best_checkpoint, last_checkpoint, point_at_last
from seqtasks.cli.config_errors import SeqtasksParser
from seqtasks.cli.outputs import check_run_outputs
from seqtasks.devices import DeviceError
from seqtasks.io.checkpoint_files import CheckpointError, read_checkpoint, require_task
from seqtasks.io.outputs import OutputError
from seqtasks.metrics.formats import score_table
from seqtasks.registry import task_of, tasks
from seqtasks.training.checkpoints import AtomicCheckpointIO
from seqtasks.training.compatibility import check_identity
from seqtasks.training.host_memory import keep_freed_memory
from seqtasks.training.loggers import default_loggers
from seqtasks.training.noise import STARTUP, evaluation_without_fit_state, silence_known_noise
from seqtasks.training.positions import PositionsError
from seqtasks.training.progress import LineProgress

SPECIAL_PATHS = ("last", "best", "hpc", "registry")  # what Lightning finds itself


class SeqtasksCLI(LightningCLI):
    def add_arguments_to_parser(self, parser) -> None:
        for name in ("src_vocab_size", "tgt_vocab_size"):
            parser.link_arguments(f"data.{name}", f"model.init_args.{name}", apply_on="instantiate")

    def instantiate_classes(self) -> None:
        """Build the DataModule, model and trainer; one that cannot be built from a valid config
        because of its data (not prepared, unreadable) ends the run with `error: <its own
        message>`, which names the file, instead of jsonargparse's nested tracebacks."""
        try:
            super().instantiate_classes()
        except ValueError as error:
            cause = error
            while cause.__cause__ is not None:
                cause = cause.__cause__
            if cause is error or not isinstance(cause, (OSError, ValueError)):
                raise
            _exit_with(str(cause))

    def instantiate_trainer(self, **kwargs: Any) -> Trainer:
        """The trainer the config says, with what it leaves unsaid filled in: atomic checkpoint
        writes, CSV and TensorBoard loggers, and line progress on a non-terminal stderr."""
        config = self.config_init[self.subcommand] if self.subcommand else self.config_init
        trainer = config["trainer"]
        try:
            check_accelerator(trainer.get("accelerator"), trainer.get("devices"))
        except DeviceError as error:
            _exit_with(str(error))
        plugins = _as_list(trainer.get("plugins"))
        if not any(isinstance(plugin, CheckpointIO) for plugin in plugins):
            plugins.append(AtomicCheckpointIO())
        kwargs = {"plugins": plugins, **kwargs}
        if trainer.get("barebones"):  # no loggers, no progress bar: leave it as it is
            return super().instantiate_trainer(**kwargs)
        if trainer.get("logger") is None or trainer.get("logger") is True:
            root = trainer.get("default_root_dir") or os.getcwd()
            kwargs.setdefault("logger", default_loggers(root))
        callbacks = _as_list(trainer.get("callbacks"))
        defaults = _as_list(self.trainer_defaults.get("callbacks"))
        if (
            trainer.get("enable_progress_bar") is not False
            and not any(isinstance(c, ProgressBar) for c in callbacks + defaults)
            and not _is_terminal(sys.stderr)
        ):
            kwargs.setdefault("callbacks", [*callbacks, LineProgress()])
        return super().instantiate_trainer(**kwargs)

    def _parse_ckpt_path(self) -> None:
        """Check a `--ckpt_path` file before anything is built: a missing, damaged or folder
        path, or a checkpoint of another task than the config's model, ends the run with
        `error: …`. Unlike LightningCLI, do not read the model's settings from the checkpoint
        over the config's: those given on the command line (`--model.init_args.test_beam 10`)
        would be ignored without a word, and a changed model would be another than the config
        says; the config's model must fit the checkpoint (`compatibility.check_weights`), as
        with `--ckpt_path last`, whose file is found later."""
        subcommand = self.config.get("subcommand")
        ckpt_path = self.config[subcommand].get("ckpt_path") if subcommand else None
        if _local(ckpt_path):
            try:
                require_task(ckpt_path, _model_task(self.config[subcommand].get("model")))
            except CheckpointError as error:
                _exit_with(str(error))

    def _run_subcommand(self, subcommand: str) -> None:
        """Run it, once the places it writes are checked (`check_run_outputs`); a checkpoint
        Lightning finds unreadable, of another task, or unlike the config's model or training
        state, a model too short for the data (`check_positions`), and what Lightning finds
        misconfigured (resuming at epoch 5 with `max_epochs` 3) end the run with `error: …`
        before its first step."""
        try:
            with evaluation_without_fit_state(subcommand):
                super()._run_subcommand(subcommand)
        except (CheckpointError, OutputError) as error:
            path, message = self.trainer.ckpt_path, str(error)
            _exit_with(message if path is None or str(path) in message else f"{path}: {message}")
        except (PositionsError, MisconfigurationException) as error:
            _exit_with(str(error))

    def validate(self, verbose: bool = True, **kwargs: Any) -> None:
        """`trainer.validate`, its scores printed as seqtasks prints scores (`score_table`)
        instead of Lightning's table of 16-digit numbers."""
        self._print_scores(self.trainer.validate(verbose=False, **kwargs), verbose)

    def test(self, verbose: bool = True, **kwargs: Any) -> None:
        """`trainer.test`, its scores printed as `validate` prints them."""
        self._print_scores(self.trainer.test(verbose=False, **kwargs), verbose)

    def _print_scores(self, results: list[dict[str, float]], verbose: bool) -> None:
        if verbose and self.trainer.is_global_zero:
            print(score_table(item for scores in results for item in scores.items()))

    def before_fit(self) -> None:
        self._before_run()

    def before_validate(self) -> None:
        self._before_run()

    def before_test(self) -> None:
        self._before_run()

    def before_predict(self) -> None:
        self._before_run()

    def _check_identity(self, path: str) -> None:
        """End the run with `error: …` if the checkpoint at `path` is not the config's model
        trained on the config's data (`compatibility.check_identity`), before anything is
        written or restored."""
        try:
            checkpoint = read_checkpoint(path, mmap=True)
            check_identity(checkpoint, self.model, self.datamodule, path)
        except CheckpointError as error:
            message = str(error)
            _exit_with(message if path in message else f"{path}: {message}")

    def _before_run(self) -> None:
        """Find what `--ckpt_path last` or `best` means (`checkpoint_paths`), check every place
        the run writes (`check_run_outputs`), and refuse a checkpoint of another model or data
        (`_check_identity`)."""
        config = self.config_init[self.subcommand]
        restored = config.get("ckpt_path")
        if restored == "last":
            point_at_last(self.trainer)
            restored = last_checkpoint(self.trainer)
        elif restored == "best":
            restored = config["ckpt_path"] = best_checkpoint(self.trainer)
        trainer_config = config["trainer"]
        logger = trainer_config.get("logger")
        default_loggers = not trainer_config.get("barebones") and logger in (None, True)
        root_used = bool(trainer_config.get("default_root_dir")) or default_loggers
        check_run_outputs(
            self.trainer,
            self.subcommand,
            self.datamodule,
            config.get("ckpt_path"),
            root_used or not self.trainer.loggers,
            default_loggers,
        )
        if _local(restored):
            self._check_identity(restored)
        STARTUP.release()  # the run starts: Lightning's start-up lines as they came


def _as_list(value: Any) -> list[Any]:
    """A trainer argument that takes one object or a list of them (callbacks, plugins), as a
    new list."""
    return [] if value is None else list(value) if isinstance(value, list) else [value]


def _is_terminal(stream: Any) -> bool:
    """Whether `stream` is a terminal, where a redrawn progress bar belongs."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # None (pythonw), or closed
        return False


def _local(path: Any) -> bool:
    """Whether `path` names a checkpoint file here (not Lightning's hpc or registry, nor a
    remote URL)."""
    return bool(path) and "://" not in str(path) and str(path).split(":")[0] not in SPECIAL_PATHS


def _model_task(model: Any) -> str | None:
    """The task ('translation', …) of the model a config names by class_path, if it is one."""
    class_path = getattr(model, "class_path", None)
    if not class_path:
        return None
    module, _, name = class_path.rpartition(".")
    return task_of(getattr(importlib.import_module(module), name))


def _exit_with(message: str) -> NoReturn:
    """End the command as the apps do on bad input: `error: message`, exit status 2 (and
    without Lightning's start-up lines, held until now)."""
    STARTUP.drop()
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def import_task_classes() -> None:
    """Import every task's LightningModule and DataModules, so that a config may name them by
    their class name alone (`--model TranslationTask`, `--data DatesData`)."""
    for entry in tasks().values():
        for path in (entry.task, *entry.data):
            entry.imported(path)


def main(args: list[str] | None = None) -> None:
    import_task_classes()
    keep_freed_memory()
    silence_known_noise()
    STARTUP.hold()
    try:
        SeqtasksCLI(
            subclass_mode_model=True,
            subclass_mode_data=True,
            save_config_kwargs={"overwrite": True},
            parser_class=SeqtasksParser,
            args=args,
        )
    finally:
        STARTUP.release()  # whatever ended the run (what `_exit_with` dropped stays dropped)


if __name__ == "__main__":
    main()
