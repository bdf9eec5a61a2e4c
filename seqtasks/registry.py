"""The tasks seqtasks knows, by the name their checkpoints store ("translation", …): for each, its
LightningModule, what `seqtasks.load` returns for it, its server endpoint, what its checkpoints
keep beside the weights, and whether CTranslate2 can run it. Classes are named by import path
and imported when asked for, so reading the registry imports neither Lightning nor torch.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any


def _imported(path: str) -> Any:
    """The object at `path` ("package.module.Name"), its module imported."""
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class TaskEntry:
    """One task.

    Attributes:
        name: what `checkpoint["seqtasks"]["task"]` says.
        task, model, endpoint: import paths of its LightningModule, of the `seqtasks.api` class
            that `seqtasks.load` returns for it, and of its `seqtasks serve` endpoint.
        stored: the keys its checkpoints keep in `checkpoint["seqtasks"]` beside "task"
            (`seqtasks.tasks.stored`), and what they are, in words (`stored_as`).
        not_exported: why `seqtasks export` cannot write it for CTranslate2; None: it can.
    """

    name: str
    task: str
    model: str
    endpoint: str
    stored: tuple[str, ...]
    stored_as: str
    not_exported: str | None = None

    def task_class(self) -> Any:
        return _imported(self.task)

    def model_class(self) -> Any:
        return _imported(self.model)

    def endpoint_class(self) -> Any:
        return _imported(self.endpoint)


TRANSLATION = TaskEntry(
    "translation",
    task="seqtasks.tasks.translation.TranslationTask",
    model="seqtasks.api.translator.Translator",
    endpoint="seqtasks.serving.endpoints.TranslateEndpoint",
    stored=("src_tokenizer", "tgt_tokenizer"),
    stored_as="tokenisers",
)
PARSING = TaskEntry(
    "parsing",
    task="seqtasks.tasks.parsing.ParsingTask",
    model="seqtasks.api.parser.Parser",
    endpoint="seqtasks.serving.endpoints.ParseEndpoint",
    stored=("vocabulary",),
    stored_as="vocabularies",
    not_exported="its search must follow the bracket grammar (a `Constraint`), which "
    "CTranslate2's search cannot apply",
)
CAPTIONING = TaskEntry(
    "captioning",
    task="seqtasks.tasks.captioning.CaptioningTask",
    model="seqtasks.api.captioner.Captioner",
    endpoint="seqtasks.serving.endpoints.CaptionEndpoint",
    stored=("vocabulary", "image_size"),
    stored_as="vocabulary",
    not_exported="its encoder reads images, and CTranslate2's Transformer reads tokens",
)
TASKS: dict[str, TaskEntry] = {entry.name: entry for entry in (TRANSLATION, PARSING, CAPTIONING)}


def task_of(model_class: type) -> str | None:
    """The name of the task `model_class` is (or subclasses); None for another class."""
    return next(
        (name for name, entry in TASKS.items() if issubclass(model_class, entry.task_class())),
        None,
    )
