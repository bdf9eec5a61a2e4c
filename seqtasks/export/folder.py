"""`seqtasks export MODEL --to folder OUT/`: a model as a folder in the Hugging Face Hub's layout
(`seqtasks.model_files.folder`): `huggingface-cli upload ORG/NAME OUT/` (or `hf upload`)
publishes it as it is, and `seqtasks.load("hf://ORG/NAME")` loads it. MODEL is a checkpoint, a
model folder or an `hf://` name; OUT is checked before MODEL is read, and built beside itself
and renamed into place (`seqtasks.export.staging`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import seqtasks
from seqtasks.export.staging import prepare_output, require_space, staged_directory
from seqtasks.model_files.card import model_card
from seqtasks.model_files.folder import folder_files
from seqtasks.model_files.hub import is_hub_name
from seqtasks.model_files.provenance import search_record
from seqtasks.model_files.sources import Reference, open_model


def export_folder(model: Reference, out: str | Path, force: bool = False) -> Path:
    """Write the model `model` names as a model folder at `out`; its model card names it by
    `out`'s folder name. The weights are the task's `state_dict` (shared tensors once), the
    search settings its `test_settings`, the tokenisers its own.

    Raises:
        CheckpointError: for a missing, damaged, newer or foreign model.
        ExportError: for an `out` that must not or cannot be written, or too little space.
    """
    local = None if is_hub_name(model) else Path(model)
    folder = prepare_output(Path(out), local, force)  # before a large checkpoint's minutes
    source = open_model(model)
    task = source.build("cpu")
    search = search_record(task.test_settings)
    identity = replace(source.identity, version=seqtasks.__version__, search=search)
    files = folder_files(
        source.resolved,
        identity,
        source.entries,
        search,
        task.state_dict(),
        lambda config: model_card(config, folder.name),
        training=source.training,
    )
    require_space(folder, sum(map(len, files.values())))
    with staged_directory(folder, force) as staging:
        for name, data in files.items():
            (staging / name).write_bytes(data)
    return Path(out)
