"""seqtasks: swappable encoders and attention decoders for translation, captioning and parsing.

Dimension legend used in every docstring and shape comment:
    B batch, S source positions (tokens or image cells), T target positions, D model width,
    V vocabulary, L = H·W image locations, K beam size, H heads (or grid height).

From Python: `seqtasks.load(checkpoint)` (see `seqtasks.tasks.load`), imported on first use so that
`import seqtasks` stays light (the components import neither Lightning nor the tasks).
"""

import importlib
import importlib.abc
import importlib.util
import sys

__version__ = "0.1.0"


def __getattr__(name: str):
    """`seqtasks.load`, and each task's model class and result type (`seqtasks.Translator`,
    `seqtasks.Translation`, …: the names its model's module exports), imported when asked for."""
    if name == "load":
        from seqtasks.tasks.load import load

        return load
    from seqtasks.registry import tasks

    for entry in tasks().values():
        module = importlib.import_module(entry.path(entry.model).rpartition(".")[0])
        if name in getattr(module, "__all__", ()):
            return getattr(module, name)
    raise AttributeError(f"module 'seqtasks' has no attribute {name!r}")


# Modules of 0.1 that configs and checkpoints name by class path (`seqtasks.schedules.
# InverseSqrtWarmup` in a checkpoint's hyperparameters, `seqtasks.callbacks.FitSummary` in a
# user's YAML), served from where their classes live now.
MOVED = {
    "seqtasks.callbacks": "seqtasks.training.callbacks",
    "seqtasks.checkpoints": "seqtasks.training.checkpoints",
    "seqtasks.schedules": "seqtasks.training.schedules",
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old module path as a module holding the new module's names."""

    def find_spec(self, fullname, path, target=None):
        return importlib.util.spec_from_loader(fullname, self) if fullname in MOVED else None

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        new = importlib.import_module(MOVED[module.__name__])
        module.__dict__.update({k: v for k, v in vars(new).items() if not k.startswith("__")})


sys.meta_path.append(_MovedModules())
