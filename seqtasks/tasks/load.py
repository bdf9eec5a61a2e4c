"""`seqtasks.load`: a trained model, or an ensemble of several, from a checkpoint `fit` wrote, a
model folder `seqtasks export --to folder` wrote, or a model on the Hugging Face Hub
(`hf://ORG/NAME[@REVISION]`), ready to translate, parse or caption."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from seqtasks.devices import check_device
from seqtasks.io.checkpoint_files import CheckpointError
from seqtasks.model_files.peek import other_task
from seqtasks.model_files.sources import Reference, check_members, open_model
from seqtasks.registry import task_entry
from seqtasks.search.ensemble import EnsembleDecoder, EnsembleEncoder
from seqtasks.tasks.model import Model


def load(
    model: Reference | Sequence[Reference], device: str = "auto", task: str | None = None
) -> Model:
    """The model a checkpoint, a model folder or an `hf://ORG/NAME[@REVISION]` name holds, as
    the model class of the task it was trained for (a `Translator`, `Parser`, `Captioner`, …),
    in eval mode on `device` ("auto": a GPU when one is visible, else the CPU; or "cpu",
    "cuda", "cuda:1" …).

    Given several, an ensemble: at every search step the members' log-probabilities are
    averaged (`seqtasks.search.ensemble`). Members may differ in architecture but must be of
    one task and share their tokenisers (and, for captioning, the image size); the first one's
    search settings (`test_beam`, length penalty, length limits) apply. With `task`
    (its name: "translation", …), a model of another task is refused by name.

    Raises:
        DeviceError: for an unknown device, or one that is not here, before any file is read.
        NewerModelError: for a model a newer seqtasks wrote (naming its version and what this
            one lacks).
        CheckpointError: naming the file, for a missing, damaged, altered or foreign file
            (docs/bad_input.md, docs/models.md), and for ensemble members that do not fit
            together.
    """
    device = check_device(device)
    references = [model] if isinstance(model, (str, Path)) else list(model)
    refused = None if task is None else other_task(references, task)
    if refused is not None:  # said before any model is read whole
        raise CheckpointError(refused)
    sources = [open_model(reference) for reference in references]
    check_members(sources, task)
    entry = task_entry(sources[0].task)
    members = [source.build(device) for source in sources]
    first = members[0]
    if len(members) > 1:
        first.attach(
            EnsembleEncoder([m.encoder for m in members]),
            EnsembleDecoder([m.decoder for m in members]),
        )
    return entry.model_class()(first, [source.where for source in sources])
