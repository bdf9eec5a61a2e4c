"""`seqtasks.load`: a trained model, or an ensemble of several, from the checkpoints `fit`
writes, ready to translate, parse or caption."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from seqtasks.api.captioner import Captioner
from seqtasks.api.parser import Parser
from seqtasks.api.translator import Translator
from seqtasks.devices import check_device
from seqtasks.io.checkpoint_files import CheckpointError, load_task, read_checkpoint
from seqtasks.registry import TASKS
from seqtasks.search.ensemble import EnsembleDecoder, EnsembleEncoder


def load(
    checkpoint: str | Path | Sequence[str | Path], device: str = "auto", task: str | None = None
) -> Translator | Parser | Captioner:
    """The model a seqtasks checkpoint holds, as a `Translator`, `Parser` or `Captioner` by
    the task it was trained for, in eval mode on `device` ("auto": a GPU when one is visible,
    else the CPU; or "cpu", "cuda", "cuda:1" …).

    Given several checkpoints, an ensemble: at every search step the members' log-probabilities
    are averaged (`seqtasks.search.ensemble`). Members may differ in architecture but must be of
    one task and share their vocabularies (and, for captioning, the image size); the first one's
    search settings (`test_beam`, length penalty, length limits) apply. With `task` ("translation",
    "parsing", "captioning"), a checkpoint of another task is refused by name.

    Raises:
        DeviceError: for an unknown device, or one that is not here, before any file is read.
        CheckpointError: naming the file, for a missing, damaged or foreign file
            (docs/bad_input.md), and for ensemble members that do not fit together.
    """
    device = check_device(device)
    paths = (
        [Path(checkpoint)] if isinstance(checkpoint, (str, Path)) else list(map(Path, checkpoint))
    )
    found = members_task(paths)
    if task is not None and found != task:
        raise CheckpointError(f"{paths[0]} is a {found} checkpoint, not a {task} one")
    task = found
    entry = TASKS[task]
    members = [load_task(path, entry.task_class(), task, device) for path in paths]
    first = members[0]
    if len(members) > 1:
        first.attach(
            EnsembleEncoder([m.encoder for m in members]),
            EnsembleDecoder([m.decoder for m in members]),
        )
    return entry.model_class()(first, paths)


def members_task(paths: Sequence[Path]) -> str:
    """The task of the checkpoints at `paths`, once they are known to decode together: readable
    seqtasks checkpoints of one task that seqtasks serves, with equal vocabularies. Reads only
    what the files store beside their weights, without building a model.

    Raises:
        CheckpointError: naming the file at fault and what is wrong.
    """
    if not paths:
        raise CheckpointError("no checkpoint to load")
    stored = [read_checkpoint(path)["seqtasks"] for path in paths]
    task = stored[0]["task"]
    if task not in TASKS:
        raise CheckpointError(f"{paths[0]}: a {task!r} checkpoint, which seqtasks cannot load")
    for path, entries in zip(paths[1:], stored[1:]):
        if entries["task"] != task:
            raise CheckpointError(
                f"cannot ensemble {path} with {paths[0]}: it is a {entries['task']} checkpoint, "
                f"not a {task} one"
            )
        if entries != stored[0]:
            differ = sorted(
                k for k in entries.keys() | stored[0].keys() if entries.get(k) != stored[0].get(k)
            )
            raise CheckpointError(
                f"cannot ensemble {path} with {paths[0]}: their {', '.join(differ)} differ "
                "(ensemble members must share their vocabularies)"
            )
    return task
