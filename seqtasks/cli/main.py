"""The `seqtasks` command: LightningCLI over every task, encoder and decoder.

    seqtasks fit --config configs/translation/rnn_bahdanau.yaml
    seqtasks fit --config configs/translation/rnn_bahdanau.yaml --ckpt_path last   # resume
    seqtasks test --config configs/translation/rnn_bahdanau.yaml --ckpt_path best

The task, encoder and decoder are chosen by `class_path` in YAML; vocabulary sizes flow from
the DataModule into the model, so they are never typed twice. Checkpoints are written
atomically (`checkpoints.AtomicCheckpointIO`) unless the config names its own CheckpointIO.
A config that names no logger gets `metrics.csv` and TensorBoard event files in one
`lightning_logs/version_N` folder (`training.loggers`); one that names no progress bar gets
plain lines (`training.progress.LineProgress`) when stderr is not a terminal.

Errors a person can act on: a config error starts with one line naming the key and what is wrong
with it (jsonargparse's account follows), and a `--ckpt_path` that is damaged, or of another
task than the config's model, is refused by name before anything is built.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from pathlib import Path
from typing import Any, NoReturn

from lightning.pytorch import Trainer
from lightning.pytorch.callbacks import ModelCheckpoint, ProgressBar
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI
from lightning.pytorch.plugins.io import CheckpointIO

from seqtasks.io.checkpoint_files import CheckpointError, require_task
from seqtasks.tasks import CaptioningTask, ParsingTask, TranslationTask
from seqtasks.training.checkpoints import AtomicCheckpointIO
from seqtasks.training.host_memory import keep_freed_memory
from seqtasks.training.loggers import default_loggers
from seqtasks.training.progress import LineProgress

TASKS = {"translation": TranslationTask, "parsing": ParsingTask, "captioning": CaptioningTask}

# What jsonargparse's error messages say, step by step from the outer key to the fault.
_ERROR_STEP = re.compile(
    r'Parser key "(?P<key>[^"]+)":(?P<list>\s+Does not validate[^\n]*\n\s+Subtypes: \[list\[)?'
    r"|Problem with given class_path '(?P<class_path>[^']+)':"
    r"|Option '(?P<unknown>[^']+)' is not accepted"
    r"|does not accept option '(?P<option>[^']+)'"
    r"|Key \"(?P<required>[^\"]+)\" is required"
    r"|Expected a <class '(?P<type>(?!NoneType')\w+)'>"
)
_GIVEN = re.compile(r"(?:Got|Given) value: (.*?)(?:\. Got value: .*)?$", re.MULTILINE)
_NAMED_CLASS = re.compile(r"Namespace\(class_path='([^']+)'")
_YAML_PLACE = re.compile(r'in "<unicode string>", (line \d+, column \d+)')


def config_error_summary(message: str) -> str:
    """One line out of a jsonargparse error message: the config key at fault, spelled as on
    the command line (`model.init_args.decoder.init_args.hidden_size`), and what is wrong with
    it. A message it does not recognise gives its own first line."""
    if message.startswith("Problems parsing config"):  # YAML syntax: say where
        problem = [line for line in message.splitlines()[1:] if not line.startswith(" ")]
        places = _YAML_PLACE.findall(message)
        where = f" at {places[-1]}" if places else ""
        return f"the config is not valid YAML{where}: {' '.join(problem) or message}"
    keys: list[str] = []
    class_path, in_list, problem = None, False, None
    for step in _ERROR_STEP.finditer(message):
        # what follows the step on its line, or on the next line, when that is no step itself
        rest = message[step.end() :].lstrip(" ").split("\n", 2)
        follows = (rest[0] or (rest[1] if len(rest) > 1 else "")).strip()
        if _ERROR_STEP.search(follows) or follows.startswith("Does not validate"):
            follows = ""
        if step["key"]:
            keys.append(step["key"] if not keys else f"init_args.{step['key']}")
            in_list, problem, class_path = bool(step["list"]), follows or problem, None
        elif step["class_path"]:
            class_path = step["class_path"]
            if keys and in_list:
                keys[-1] += f"[{class_path.rsplit('.', 1)[-1]}]"
            if follows:
                problem = f"cannot use {class_path!r}: {follows}"
                keys.append("class_path")
        elif step["unknown"]:
            keys.append(step["unknown"] if not keys else f"init_args.{step['unknown']}")
            named = _NAMED_CLASS.search(message, step.end())  # a nested value names it after
            owner = class_path or (named[1] if named else "its class")
            return f"{'.'.join(keys)}: not a parameter of {owner}"
        elif step["option"] or step["required"]:
            reason = "no such option" if step["option"] else "required, but not given"
            return f"{step['option'] or step['required']}: {reason}"
        else:
            given = _GIVEN.search(message, step.end())
            got = f", got {given[1][:80]!r}" if given else ""
            article = "an" if step["type"][0] in "aeiou" else "a"
            return f"{'.'.join(keys) or 'a value'}: expected {article} {step['type']}{got}"
    if keys and problem:
        return f"{'.'.join(keys)}: {problem}"
    return message.strip().splitlines()[0] if message.strip() else "invalid arguments"


class SeqtasksParser(LightningArgumentParser):
    """LightningCLI's parser, whose errors begin with the line `config_error_summary` makes:
    jsonargparse prints the whole usage (some 50 lines) first and the key at fault later."""

    def error(self, message: str, ex: Exception | None = None) -> NoReturn:
        if not self.exit_on_error or os.environ.get("JSONARGPARSE_DEBUG"):
            super().error(message, ex)  # jsonargparse is trying alternatives, or debugging
        details = f"\n{message.rstrip()}\n" if "\n" in message.strip() else ""
        sys.stderr.write(
            f"error: {config_error_summary(message)}\n{details}\n"
            f"tip: `{self.prog.replace(' [options]', '')} --help` lists the options\n"
        )
        self.exit(2)


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
        """Check a `--ckpt_path` file before LightningCLI reads the model's hyperparameters
        from it: a damaged file, or one of another task than the config's model, ends the run
        with `error: …` (a traceback about a missing attribute, otherwise)."""
        subcommand = self.config.get("subcommand")
        ckpt_path = self.config[subcommand].get("ckpt_path") if subcommand else None
        if ckpt_path and Path(ckpt_path).is_file():
            try:
                require_task(ckpt_path, _model_task(self.config[subcommand].get("model")))
            except CheckpointError as error:
                _exit_with(str(error))
        super()._parse_ckpt_path()

    def _run_subcommand(self, subcommand: str) -> None:
        """Run it; a checkpoint Lightning finds unreadable, or of another task, (`--ckpt_path
        last` or `best`) ends the run with `error: PATH: …`."""
        try:
            super()._run_subcommand(subcommand)
        except CheckpointError as error:
            path, message = self.trainer.ckpt_path, str(error)
            _exit_with(message if path is None or str(path) in message else f"{path}: {message}")

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


def _model_task(model: Any) -> str | None:
    """The task ('translation', …) of the model a config names by class_path, if it is one."""
    class_path = getattr(model, "class_path", None)
    if not class_path:
        return None
    module, _, name = class_path.rpartition(".")
    model_class = getattr(importlib.import_module(module), name)
    return next((task for task, cls in TASKS.items() if issubclass(model_class, cls)), None)


def _exit_with(message: str) -> NoReturn:
    """End the command as the apps do on bad input: `error: message`, exit status 2."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def main(args: list[str] | None = None) -> None:
    keep_freed_memory()
    SeqtasksCLI(
        subclass_mode_model=True,
        subclass_mode_data=True,
        save_config_kwargs={"overwrite": True},
        parser_class=SeqtasksParser,
        args=args,
    )


if __name__ == "__main__":
    main()
