"""How a command loads its model: the checkpoints for one task, and the search settings the
options give checked against the checkpoint's own, before any input is decoded. A checkpoint
or setting that will not do ends the command with one `error: …` line and status 2."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import seqtasks
from seqtasks.model_files.peek import other_task

if TYPE_CHECKING:
    from seqtasks.search.settings import SearchSettings


class CommandError(Exception):
    """What ends a command with `error: <message>` and status 2."""


def load_model(
    checkpoints: Sequence[Path],
    device: str,
    task: str,
    search: Mapping[str, object],
    figures: str | None = None,
) -> tuple[Any, SearchSettings]:
    """The model of `checkpoints` (several: an ensemble) for `task` (what `seqtasks.load`
    returns: the task's `Model`), and its search settings with the options given in `search`.
    `figures` names an option that draws attention (`--attention-plots`), refused for a model
    without attention.

    Raises:
        CommandError: for a missing, damaged or foreign checkpoint, a bad setting, or figures
            of attention that the model cannot give.
    """
    refused = other_task(list(checkpoints), task)  # read before torch is imported: at once
    if refused is not None:
        raise CommandError(refused)
    from seqtasks.io.checkpoint_files import CheckpointError  # torch: after the arguments

    try:
        model = seqtasks.load(list(checkpoints), device, task=task)
        settings = model.search_settings(**search)
    except (CheckpointError, FileNotFoundError, ValueError) as error:
        raise CommandError(str(error)) from error
    if figures and not model.gives_attention:
        name = type(model.task.decoder).__name__
        raise CommandError(f"{figures}: {checkpoints[0]}'s {name} has no attention")
    return model, settings
