"""The models a server holds, grouped by task (`group_by_task`): each task's checkpoints or model
folders (several: an ensemble), checked in the server's process before any worker starts, and
what the page is told of them (`Served`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seqtasks.model_files.sources import check_members, open_model


@dataclass(frozen=True)
class Served:
    """One task's models as the server holds them: the local checkpoints or folders its
    workers load (several: an ensemble), how each was named, and what the page starts from:
    the first model's search settings and an example input (None where not recorded), and
    whether the models give attention."""

    paths: list[str]
    names: list[str]
    search: dict[str, Any] | None = None
    example: str | None = None
    attention: bool = True


def group_by_task(models: Sequence[str | Path]) -> dict[str, Served]:
    """The models of each task (checkpoints, model folders, `hf://` names), in the order given
    (a task's list is one model or an ensemble), checked here so that no worker fails to load
    them; an `hf://` name is downloaded here, once, and its workers read the local copy.

    Raises:
        CheckpointError: naming a model that is missing, damaged, of a newer seqtasks or not a
            seqtasks model, or ensemble members that do not share their vocabularies.
    """
    sources = [open_model(model) for model in models]
    groups: dict[str, Served] = {}
    for task in dict.fromkeys(source.task for source in sources):
        members = [source for source in sources if source.task == task]
        check_members(members)
        first = members[0]
        groups[task] = Served(
            paths=[str(source.path) for source in members],
            names=[source.where for source in members],
            search=first.search or first.identity.search,
            example=(first.identity.data or {}).get("example"),
            attention=all(source.gives_attention for source in members),
        )
    return groups
