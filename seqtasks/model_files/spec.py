"""A model's specification: the class path and every init argument of its task and of the parts
inside it (encoder, decoder, attention, …), with this seqtasks' defaults filled in, as plain
JSON values. It is what a checkpoint's hyperparameters and a model folder's `config.json` say,
read the way loading reads them (jsonargparse, as LightningCLI and `load_from_checkpoint` do),
so a value this seqtasks would build differently, or could not build, is found before a model is.

What a model file may name is limited: every class it names must be a `torch.nn.Module` (the
task and its parts), or for training an optimiser or learning-rate scheduler of `torch.optim`'s
kinds. Nothing else named in a file is imported and called (docs/models.md, "What to trust").
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

from seqtasks.io.checkpoint_files import CheckpointError
from seqtasks.io.config_errors import config_error_summary
from seqtasks.registry import task_entry, task_of, tasks

Spec = dict[
    str, Any
]  # {"class_path": "seqtasks.translation.task.TranslationTask", "init_args": {...}}
Path_ = tuple[str, ...]  # keys from the task down, without the "init_args" between them


class SpecError(CheckpointError):
    """A specification this seqtasks cannot build, and why (`cause`): "unknown", a class or
    option it does not have (a newer seqtasks' model, or another package's); "forbidden", a
    name it will not import and call from a file; "incomplete", a setting the model needs left
    out; "task", a model of another task than the file declares; "refused", a setting its part
    refuses (a value out of range)."""

    def __init__(self, message: str, cause: str = "unknown"):
        super().__init__(message)
        self.cause = cause


def from_hparams(hparams: Mapping[str, Any], task_class: type) -> Spec:
    """The specification that Lightning's `hyper_parameters` give (`_class_path` and the init
    arguments; `task_class` when they name no class), unresolved."""
    init_args = {k: v for k, v in hparams.items() if not k.startswith("_")}
    class_path = hparams.get("_class_path") or f"{task_class.__module__}.{task_class.__name__}"
    return {"class_path": class_path, "init_args": init_args}


def _parser(spec: Spec, task: str | None) -> Any:
    """jsonargparse's parser of a task's specification, for the task class it names: a class
    of the task `task` (the name the file declares, whose package alone is imported), or of
    any task this seqtasks knows when none is declared; a SpecError otherwise."""
    from jsonargparse import ArgumentParser

    named = spec.get("class_path") if isinstance(spec, Mapping) else None
    found = imported(named) if isinstance(named, str) else None
    if task is None:
        if not isinstance(found, type) or task_of(found) is None:
            known = ", ".join(entry.task for entry in tasks().values())
            raise SpecError(f"the task: {named!r} is no task of this seqtasks ({known})")
    else:
        declared = task_entry(task).task_class()
        if not (isinstance(found, type) and issubclass(found, declared)):
            raise SpecError(
                f"it declares a {task} model, but its model is {named}, which is no "
                f"{declared.__name__}",
                cause="task",
            )
    parser = ArgumentParser(exit_on_error=False)
    parser.add_subclass_arguments(found, "module", fail_untyped=False)
    return parser


class ParsedSpec:
    """A specification read as loading reads it (jsonargparse, as `load_from_checkpoint`
    does), once: its `resolved` form, and the task it `build`s.

    Raises:
        SpecError: in one line, naming the class or option this seqtasks does not have, or a
            name it will not build from a file (`_check_values`).
    """

    def __init__(self, spec: Spec, task: str | None = None):
        _check_classes(spec)
        _check_names(spec)
        self.parser = _parser(spec, task)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.namespace = self.parser.parse_object({"module": spec})
        except Exception as error:  # jsonargparse's ArgumentError, or what a class raised
            summary = config_error_summary(str(error)).replace("module.class_path", "the task")
            summary = summary.replace("module.init_args.", "").replace(".init_args", "")
            if _REQUIRED.search(str(error)):
                missing = _missing(str(error), spec.get("class_path"))
                raise SpecError(missing, "incomplete") from None
            raise SpecError(summary) from None
        _check_values(self.namespace.module.as_dict())
        self.resolved: Spec = plain(self.namespace.module.as_dict())

    def build(self) -> Any:
        """The task, built as `load_from_checkpoint` builds it (its weights as initialised, for
        the caller to load).

        Raises:
            SpecError ("refused"): with the message of the part that refused a setting (its
                own validation: `num_heads` that does not divide `d_model`, a dropout of 1.5).
        """
        instantiate = getattr(self.parser, "instantiate", None) or self.parser.instantiate_classes
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # jsonargparse < 4.49 names it instantiate_classes
                return instantiate(self.namespace).module
        except (ValueError, TypeError) as error:  # jsonargparse's account wraps the part's own
            raise SpecError(_first_cause(error), cause="refused") from None


def _first_cause(error: BaseException) -> str:
    """The refusal under jsonargparse's account of `error`, in one line: the innermost of its
    causes, as a traceback would follow them (a `PartError`, which names the part, raises
    `from None`, so the walk ends there)."""
    while True:
        cause = error.__cause__
        if cause is None and not error.__suppress_context__:
            cause = error.__context__
        if cause is None:
            return " ".join(str(error).split())[:300]
        error = cause


def _missing(message: str, class_path: str | None) -> str:
    """What a jsonargparse message of a setting left out says, in words: "its model lacks
    decoder, which TranslationTask needs"."""
    names = _REQUIRED.search(message)
    owner = str(class_path).rpartition(".")[2]
    if names is None:
        return message
    return f"its model lacks {(names[1] or names[2]).strip()}, which {owner} needs"


def resolved(spec: Spec) -> Spec:
    """`spec` with every option of every class that it leaves out at this seqtasks' default,
    as plain JSON values (classes as import paths, tuples as lists); a SpecError as
    `ParsedSpec` raises."""
    return ParsedSpec(spec).resolved


def plain(value: Any) -> Any:
    """`value` as JSON values: a class or function as its import path, a partial of one as its
    class path and arguments, tuples as lists."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, functools.partial):
        return {"class_path": plain(value.func), "init_args": plain(value.keywords)}
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{value.__module__}.{value.__qualname__}"
    if callable(value):
        return repr(value)
    return value


def _class_paths(value: Any, path: Path_ = ()) -> Iterator[tuple[Path_, str]]:
    """(path, class path) of every `class_path` entry in a nested spec, outermost first."""
    if isinstance(value, Mapping):
        if isinstance(value.get("class_path"), str):
            yield path, value["class_path"]
        for key, item in value.items():
            if key != "class_path":
                yield from _class_paths(item, path if key == "init_args" else (*path, key))
    elif isinstance(value, list):
        for item in value:
            yield from _class_paths(item, path)


def name(path: Path_) -> str:
    """A path as a message names it: `decoder.attention.attention_dim`; () is the task."""
    return ".".join(path) or "the task"


def _check_classes(spec: Spec) -> None:
    """Each class a spec names, imported and `_allowed`; a SpecError naming the first that is
    not here, or not a class a file may name."""
    for path, class_path in _class_paths(spec):
        try:
            found = imported(class_path)
        except (ImportError, AttributeError, ValueError):
            raise SpecError(
                f"{name(path)}: class {class_path}, which this seqtasks does not have"
            ) from None
        if not (isinstance(found, type) and _allowed(found, path)):
            raise _refused(path, class_path)


_REQUIRED = re.compile(r"arguments are required: ([^\n]+)|Key \"([^\"]+)\" is required")
_IMPORT_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")


def _check_names(value: Any, path: Path_ = ()) -> None:
    """Refuse (SpecError) a string setting that names a function or a class `_allowed` does not
    let a file name (jsonargparse would import what a callable-typed option names, and building
    would call it), before jsonargparse reads the spec."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if key != "class_path":
                _check_names(item, path if key == "init_args" else (*path, key))
    elif isinstance(value, list):
        for item in value:
            _check_names(item, path)
    elif isinstance(value, str) and _IMPORT_PATH.match(value):
        try:
            named = imported(value)
        except (ImportError, AttributeError, ValueError):
            return  # no import path: a plain string
        if callable(named) and not (isinstance(named, type) and _allowed(named, path)):
            raise _refused(path, value)


def _allowed(value: type, path: Path_) -> bool:
    """Whether a file may name the class `value` at `path`: modules everywhere; optimisers and
    schedulers under the task's `optimizer` and `lr_scheduler`."""
    from torch import nn, optim

    if issubclass(value, nn.Module):
        return True
    training = path[:1] in (("optimizer",), ("lr_scheduler",))
    schedulers = (optim.lr_scheduler.LRScheduler, optim.lr_scheduler.ReduceLROnPlateau)
    return training and issubclass(value, (optim.Optimizer, *schedulers))


def _check_values(value: Any, path: Path_ = ()) -> None:
    """Refuse (SpecError) a parsed spec (as nested dicts) that names anything but the classes
    `_allowed` lets a file name: jsonargparse imports what a callable-typed option names, and
    building the model calls it."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if key == "class_path":
                item = imported(item)
            _check_values(item, path if key in ("class_path", "init_args") else (*path, key))
    elif isinstance(value, (list, tuple)):
        for item in value:
            _check_values(item, path)
    elif callable(value) and not (isinstance(value, type) and _allowed(value, path)):
        raise _refused(path, plain(value))


def _refused(path: Path_, named: str) -> SpecError:
    return SpecError(
        f"{name(path)}: {named} is not a module, optimiser or scheduler class, which is all a "
        "seqtasks model file may name",
        cause="forbidden",
    )


def imported(class_path: str) -> Any:
    """The object at the import path `class_path`."""
    import importlib

    module, _, attribute = class_path.rpartition(".")
    return getattr(importlib.import_module(module), attribute)
