"""The tasks seqtasks knows, found where each declares itself.

A task is a package (`seqtasks/translation/`, …) holding all that is particular to it. Its
`__init__.py` declares it once, as `TASK = TaskEntry(...)`, naming its parts by their paths
inside the package (".task.TranslationTask"), so reading a declaration imports neither torch
nor Lightning (`seqtasks --help` and argument errors stay instant). The generic layers (the
command line, `seqtasks.load`, the server, the export, the checkpoint formats) know no task by
name: they ask `tasks()` for every task, or `task_entry(name)` for the one a model file names,
which imports that task's package alone. A task outside this package is found by an entry
point of the group "seqtasks.tasks" whose name is the task's name and whose value is its
package (`[project.entry-points."seqtasks.tasks"]` in its pyproject.toml: `toy = "toy_task"`).

An outside package is isolated: one that fails to import, declares no task, or declares a task
name another package declares too, is left out with one warning line naming its package and
entry point (`TaskPackageWarning`), and only what asks for its task fails (a `TaskError` saying
why); the built-in tasks, `--help` and the models of other tasks work as before.
"""

from __future__ import annotations

import importlib
import warnings
from dataclasses import dataclass
from functools import cache
from importlib.metadata import entry_points
from typing import Any

# Each built-in task's name (what its checkpoints store) and package: a task, a line.
BUILT_IN = {
    "translation": "seqtasks.translation",
    "parsing": "seqtasks.parsing",
    "captioning": "seqtasks.captioning",
    "pretraining": "seqtasks.pretraining",
}
ENTRY_POINTS = "seqtasks.tasks"


class TaskError(ValueError):
    """A task package whose declaration is missing or does not hold, or a task that no usable
    package declares."""


class TaskPackageWarning(UserWarning):
    """An outside task package left out (`Unusable`): said once, in one line."""


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
        evaluations: further reports of the task's models, as (name, module) pairs that
            `seqtasks evaluate NAME` runs as it runs `evaluation` (translation's word
            alignments: `("alignment", ".alignment_evaluation")`).
        endpoint: its `seqtasks serve` endpoint class, None: not served.
        api: the names `seqtasks.NAME` gives from its model's module (that module's
            `__all__`: the model class and its result type), read without importing it.
        formats: the formats `seqtasks export --to FORMAT` writes for it beyond the model
            folder every task has: (format, the module that writes it) pairs.
        hub_tag: the Hugging Face pipeline tag of its model cards (None: no tag).
    """

    package: str
    name: str
    task: str
    model: str
    data: tuple[str, ...] = ()
    command: Command | None = None
    evaluation: str | None = None
    evaluations: tuple[tuple[str, str], ...] = ()
    endpoint: str | None = None
    api: tuple[str, ...] = ()
    formats: tuple[tuple[str, str], ...] = ()
    hub_tag: str | None = None

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

    def evaluation_modules(self) -> dict[str, str]:
        """The name of each `seqtasks evaluate NAME` report of the task, and its module as
        declared (`path` reads it): the task's own name for `evaluation`, then `evaluations`."""
        own = {} if self.evaluation is None else {self.name: self.evaluation}
        return own | dict(self.evaluations)

    def export_module(self, format: str) -> Any:
        """The module that writes this task's models `--to format`; None if it offers none."""
        module = dict(self.formats).get(format)
        return None if module is None else importlib.import_module(self.path(module))


@dataclass(frozen=True)
class Unusable:
    """An outside task package that cannot be used: the entry point naming it, the task name
    it declares (or, when it cannot be read, the entry point's), and why, in one line."""

    point: str
    package: str
    name: str
    why: str

    def __str__(self) -> str:
        return (
            f"task package {self.package} (entry point {self.point!r} of {ENTRY_POINTS}) "
            f"left out: {self.why}"
        )


def declared(package: str) -> TaskEntry:
    """The `TASK` that `package` declares; a TaskError naming the package if it has none."""
    entry = getattr(importlib.import_module(package), "TASK", None)
    if not isinstance(entry, TaskEntry):
        raise TaskError(f"{package} declares no task: its __init__.py has no TASK = TaskEntry(…)")
    if entry.package != package:
        raise TaskError(f"{package}'s TASK names its package {entry.package!r}: use __name__")
    wrong = [
        field
        for field, value, kind in (
            ("name", entry.name, str),
            ("task", entry.task, str),
            ("model", entry.model, str),
            ("command", entry.command, (Command, type(None))),
            ("data", entry.data, tuple),
            ("api", entry.api, tuple),
            ("formats", entry.formats, tuple),
            ("evaluations", entry.evaluations, tuple),
        )
        if not isinstance(value, kind) or (kind is str and not value)
    ]
    if wrong:
        raise TaskError(f"{package}'s TASK has a {wrong[0]} of the wrong kind: {entry!r}"[:300])
    return entry


def _outside() -> list[tuple[str, str]]:
    """(entry point name, package) of each outside task package installed, each package once."""
    try:
        points = entry_points(group=ENTRY_POINTS)
    except Exception:  # unreadable metadata of some distribution: no outside tasks
        return []
    return list({point.value: (point.name, point.value) for point in points}.values())


def _declared_outside(point: str, package: str) -> TaskEntry | Unusable:
    """The task an outside package declares, or why it cannot be used (whatever importing it
    raised, in one line: a package must not take the others down)."""
    try:
        return declared(package)
    except ModuleNotFoundError as error:
        why = f"{error.name or package} is not installed ({error})"
    except TaskError as error:
        why = str(error)
    except (Exception, SystemExit) as error:  # noqa: BLE001 (any failure of an outside import)
        lines = str(error).strip().splitlines()
        why = f"importing it raised {type(error).__name__}" + (f": {lines[0]}" if lines else "")
    return Unusable(point, package, point, why)


@cache
def _found() -> tuple[dict[str, TaskEntry], tuple[Unusable, ...]]:
    """Every usable task by name (the built-in ones, then the outside ones), and the outside
    packages left out: those that fail, and each of two that declare one name (a built-in
    name stays the built-in task's)."""
    found = {name: declared(package) for name, package in BUILT_IN.items()}
    outside: dict[str, list[tuple[str, TaskEntry]]] = {}
    unusable: list[Unusable] = []
    for point, package in _outside():
        if package in BUILT_IN.values():
            continue
        entry = _declared_outside(point, package)
        if isinstance(entry, Unusable):
            unusable.append(entry)
        elif entry.name in found:
            why = f"it declares the task {entry.name!r}, which {found[entry.name].package} declares"
            unusable.append(Unusable(point, package, entry.name, why))
        else:
            outside.setdefault(entry.name, []).append((point, entry))
    for name, claims in outside.items():
        if len(claims) == 1:
            found[name] = claims[0][1]
            continue
        packages = " and ".join(entry.package for _, entry in claims)
        for point, entry in claims:
            why = f"{packages} both declare the task {name!r}"
            unusable.append(Unusable(point, entry.package, name, why))
    return found, tuple(unusable)


@cache
def tasks() -> dict[str, TaskEntry]:
    """Every usable task, by the name its checkpoints store: the built-in ones, then those of
    the installed entry points; each outside package left out is warned of once
    (`TaskPackageWarning`)."""
    found, unusable = _found()
    for package in unusable:
        warnings.warn(str(package), TaskPackageWarning, stacklevel=2)
    return found


def found_tasks() -> dict[str, TaskEntry]:
    """Every usable task, as `tasks()` gives them, without warning of those left out (for
    lookups that fail quietly: `seqtasks.NAME`)."""
    return _found()[0]


def left_out() -> tuple[Unusable, ...]:
    """The outside task packages that cannot be used (`Unusable`), each once."""
    return _found()[1]


def task_entry(name: str) -> TaskEntry:
    """The task of that name: for a built-in task, importing its own package alone (not the
    other tasks, nor any outside package); otherwise every declaration is read.

    Raises:
        TaskError: naming the package and why, when the package declaring it is left out
            (`Unusable`); saying which tasks there are, when none declares it.
    """
    if name in BUILT_IN:
        return declared(BUILT_IN[name])
    found, unusable = _found()
    if name in found:
        return found[name]
    for package in unusable:
        if package.name == name:
            raise TaskError(f"the {name!r} task cannot be used: {package}")
    raise TaskError(f"no task {name!r} is installed (seqtasks knows {', '.join(found)})")


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
