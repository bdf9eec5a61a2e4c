"""seqtasks: swappable encoders and attention decoders for translation, captioning and parsing.

Dimension legend used in every docstring and shape comment:
    B batch, S source positions (tokens or image cells), T target positions, D model width,
    V vocabulary, L = H·W image locations, K beam size, H heads (or grid height).

From Python: `seqtasks.load(checkpoint)` (see `seqtasks.tasks.load`), imported on first use so that
`import seqtasks` stays light (the components import neither Lightning nor the tasks).
"""

import importlib

from seqtasks import old_names

__version__ = "0.9.0"


def __getattr__(name: str):
    """`seqtasks.load`, and each task's model class and result type (`seqtasks.Translator`,
    `seqtasks.Translation`, …: the names its declaration's `api` lists), imported when asked
    for: only that task's module, so that probing a name (as jsonargparse does) imports none."""
    if name.startswith("__"):  # what tools probe a module for (__path__, __wrapped__ …)
        raise AttributeError(f"module 'seqtasks' has no attribute {name!r}")
    if name == "load":
        from seqtasks.tasks.load import load

        return load
    from seqtasks.registry import found_tasks

    for entry in found_tasks().values():
        if name in entry.api:
            module = importlib.import_module(entry.path(entry.model).rpartition(".")[0])
            return getattr(module, name)
    raise AttributeError(f"module 'seqtasks' has no attribute {name!r}")


old_names.install()  # the module paths of 0.1 that configs and checkpoints still name
