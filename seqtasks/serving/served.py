"""The models a server holds, grouped by task (`group_by_task`): each task's checkpoints or model
folders (several: an ensemble), checked in the server's process before any worker starts, and
what the page, /models and /info are told of them (`Served`): each model's name, never its
path, which would tell every client where the server keeps its files (`model_name`)."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seqtasks.model_files.hub import is_hub_name
from seqtasks.model_files.sources import check_members, open_model

VERSION = re.compile(r"version_\d+")  # a Lightning logger's run folder


@dataclass(frozen=True)
class Served:
    """One task's models as the server holds them: the local checkpoints or folders its
    workers load (several: an ensemble), their names (`model_name`), and what the page starts
    from: the first model's search settings and an example input (None where not recorded),
    and whether the models give attention."""

    paths: list[str]
    names: list[str]
    search: dict[str, Any] | None = None
    example: str | None = None
    attention: bool = True


def model_name(where: str | Path, path: str | Path) -> str:
    """What clients are told a model is called, `where` as it was given and `path` its local
    copy: an `hf://` model its Hub name (`hf://ORG/NAME@COMMIT`), a model folder its folder's
    name, a checkpoint its file's stem, followed by its run where Lightning named the file
    (`ROOT/lightning_logs/version_0/checkpoints/last.ckpt`: "last (ROOT version_0)")."""
    if is_hub_name(where):
        return str(where)
    local = Path(os.path.abspath(path))  # "." and ".." named by the folders they are
    if local.is_dir():
        return local.name
    folder = local.parent
    if folder.name != "checkpoints":
        return local.stem
    run = folder.parent.name  # version_N, or the folder a checkpoint callback was given
    if VERSION.fullmatch(run):
        logs = folder.parent.parent
        run = f"{logs.parent.name if logs.name == 'lightning_logs' else logs.name} {run}".strip()
    return f"{local.stem} ({run})" if run else local.stem


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
            names=[model_name(source.where, source.path) for source in members],
            search=first.search or first.identity.search,
            example=(first.identity.data or {}).get("example"),
            attention=all(source.gives_attention for source in members),
        )
    return groups
