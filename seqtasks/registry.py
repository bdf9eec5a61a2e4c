"""The tasks seqtasks knows, found where each declares itself.

A task is a package (`seqtasks/translation/`, …) holding all that is particular to it. Its
`__init__.py` declares it once, as `TASK = TaskEntry(...)`, naming its parts by their paths
inside the package (".task.TranslationTask"), so reading a declaration imports neither torch
nor Lightning (`seqtasks --help` and argument errors stay instant). The generic layers (the
command line, `seqtasks.load`, the server, the export, the checkpoint formats) know no task by
name: they ask `tasks()`. A task outside this package is found by an entry point of the group
"seqtasks.tasks" naming its package (`[project.entry-points."seqtasks.tasks"]` in its
pyproject.toml: `toy = "toy_task"`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache
from importlib.metadata import entry_points
from typing import Any

BUILT_IN = ("seqtasks.translation", "seqtasks.parsing", "seqtasks.captioning")  # a task: a line
ENTRY_POINTS = "seqtasks.tasks"


class TaskError(ValueError):
    """A task package whose declaration is missing or does not hold."""


@dataclass(frozen=True)
class Command:
    """A subcommand of `seqtasks`: its name, what it does in a line, and the module whose
    `main(argv) -> int` runs it (importing at its top only what its argument parser needs)."""

    name: str
    summary: str
    module: str = ".command"


@dataclass(frozen=True)
class TaskEntry:
    """One task, as its package declares it. Paths starting with "." are inside `package`.

    Attributes:
        package: the task's package (`__name__` in its `__init__.py`).
        name: what its checkpoints store as their task (`checkpoint["seqtasks"]["task"]`).
        task: its LightningModule; `model`: the class `seqtasks.load` returns for it.
        data: its DataModules (YAML may also name them by the 0.1 path `seqtasks.data.NAME`).
        command: its `seqtasks` subcommand for a trained model (translate, parse, …).
        evaluation: the module of `seqtasks evaluate NAME` (`add_arguments(parser)`,
            `evaluate(args) -> int`), None: none.
        endpoint: its `seqtasks serve` endpoint class, None: not served.
        not_exported: why `seqtasks export` cannot write it for CTranslate2; None: it can.
    """

    package: str
    name: str
    task: str
    model: str
    data: tuple[str, ...] = ()
    command: Command | None = None
    evaluation: str | None = None
    endpoint: str | None = None
    not_exported: str | None = None

    def path(self, path: str) -> str:
        """`path` with a leading "." read inside the task's package."""
        return self.package + path if path.startswith(".") else path

    def imported(self, path: str) -> Any:
        """The object at `path` ("module.Name", "." for inside the package), imported."""
        module, _, name = self.path(path).rpartition(".")
        return getattr(importlib.import_module(module), name)

    def task_class(self) -> Any:
        return self.imported(self.task)

    def model_class(self) -> Any:
        return self.imported(self.model)

    def endpoint_class(self) -> Any:
        return None if self.endpoint is None else self.imported(self.endpoint)

    def evaluation_module(self) -> Any:
        return (
            None if self.evaluation is None else importlib.import_module(self.path(self.evaluation))
        )


def declared(package: str) -> TaskEntry:
    """The `TASK` that `package` declares; a TaskError naming the package if it has none."""
    entry = getattr(importlib.import_module(package), "TASK", None)
    if not isinstance(entry, TaskEntry):
        raise TaskError(f"{package} declares no task: its __init__.py has no TASK = TaskEntry(…)")
    if entry.package != package:
        raise TaskError(f"{package}'s TASK names its package {entry.package!r}: use __name__")
    return entry


@cache
def tasks() -> dict[str, TaskEntry]:
    """Every task, by the name its checkpoints store: the built-in ones, then those of the
    installed entry points. Two tasks of one name are refused, naming both packages."""
    packages = [*BUILT_IN, *(point.value for point in entry_points(group=ENTRY_POINTS))]
    found: dict[str, TaskEntry] = {}
    for package in dict.fromkeys(packages):
        entry = declared(package)
        if entry.name in found:
            other = found[entry.name].package
            raise TaskError(f"two tasks are named {entry.name!r}: {other} and {package}")
        found[entry.name] = entry
    return found


def task_of(model_class: type) -> str | None:
    """The name of the task `model_class` is (or subclasses: the nearest, so that a task built
    on another's class is itself); None for another class."""
    ancestry = model_class.__mro__
    found = [
        (ancestry.index(cls), name)
        for name, entry in tasks().items()
        if (cls := entry.task_class()) in ancestry
    ]
    return min(found)[1] if found else None


def declared_class(name: str, kind: str) -> Any:
    """The task class ("task") or DataModule ("data") of some task whose name is `name`, for
    the 0.1 class paths that checkpoints and configs still hold (`seqtasks.tasks.
    TranslationTask`, `seqtasks.data.DatesData`); an AttributeError if none is."""
    for entry in tasks().values():
        for path in (entry.task,) if kind == "task" else entry.data:
            if path.rpartition(".")[2] == name:
                return entry.imported(path)
    raise AttributeError(name)
