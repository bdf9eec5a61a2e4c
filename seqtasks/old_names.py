"""What seqtasks 0.1 named otherwise, still read, in one place: configs and checkpoints of 0.1
name classes by paths that have moved, and a few settings have been renamed since.

- Modules (`MOVED`): `seqtasks.schedules.InverseSqrtWarmup` in a checkpoint's hyperparameters,
  `seqtasks.callbacks.FitSummary` in a user's YAML: imported from where their classes live now
  (`install`, called by `seqtasks/__init__.py`).
- Classes by the package they were in (`old_class`): `seqtasks.tasks.TranslationTask`,
  `seqtasks.data.DatesData`: the task class or DataModule of that name some task declares.
- Settings (`RENAMED` of a class, read by `renamed`): `ShapesData(num_train=…)` is now
  `counts.train`; a config that still says `num_train` is answered with the new name.

Nothing here imports another part of seqtasks: the callers hand in what it looks through.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from collections.abc import Callable, Iterable
from typing import Any

MOVED = {
    "seqtasks.callbacks": "seqtasks.training.callbacks",
    "seqtasks.checkpoints": "seqtasks.training.checkpoints",
    "seqtasks.schedules": "seqtasks.training.schedules",
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old module path as a module holding the new module's names."""

    def find_spec(self, fullname, path, target=None):  # noqa: ANN001, ANN201 (importlib's)
        return importlib.util.spec_from_loader(fullname, self) if fullname in MOVED else None

    def create_module(self, spec):  # noqa: ANN001, ANN201
        return None

    def exec_module(self, module) -> None:  # noqa: ANN001
        new = importlib.import_module(MOVED[module.__name__])
        module.__dict__.update({k: v for k, v in vars(new).items() if not k.startswith("__")})


def install() -> None:
    """Let the `MOVED` module paths import (once per process)."""
    if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(_MovedModules())


def old_class(package: str, paths: Callable[[], Iterable[tuple[str, Callable[[], Any]]]]):
    """The module `__getattr__` of `package` (`seqtasks.tasks`, `seqtasks.data`), which 0.1
    configs name classes in: NAME is the class whose path ends in NAME among `paths()` (each
    declared path, and what imports it), an AttributeError otherwise."""

    def attribute(name: str) -> Any:
        for path, imported in paths():
            if path.rpartition(".")[2] == name:
                return imported()
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return attribute


def renamed(owner: type, option: str) -> str | None:
    """What `owner` now calls the setting `option` it had in 0.1 (its `RENAMED`), or None."""
    return getattr(owner, "RENAMED", {}).get(option)
