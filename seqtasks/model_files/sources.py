"""A trained model wherever it is: a checkpoint `seqtasks fit` wrote, a model folder
(`folder`), or a model on the Hugging Face Hub (`hf://ORG/NAME[@REVISION]`, `hub`). Opening
one reads and checks what it is (its identity, its specification, its stored tokenisers)
without building it; `build` makes the task, on a device, in eval mode.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from torch import Tensor

from seqtasks.io.checkpoint_files import CheckpointError, read_checkpoint
from seqtasks.model_files.identity import (
    Identity,
    NewerModelError,
    entry_name,
    fingerprint_difference,
    identity_of,
)
from seqtasks.model_files.spec import ParsedSpec, Spec, SpecError, from_hparams, imported
from seqtasks.registry import TaskError, task_entry

Reference = str | Path  # a checkpoint file, a model folder, or an hf:// name


@dataclass
class ModelSource:
    """A model opened from `where` (as messages name it), checked, not yet built.

    Attributes:
        where: the path given, or `hf://ORG/NAME@COMMIT`.
        path: the local checkpoint file or model folder.
        identity: what the model is (`seqtasks.model_files.identity`).
        spec: its specification, as stored.
        entries: what its task stores beside the weights (tokenisers, vocabularies).
        search: a folder's default search settings (`SearchSettings` fields); None: those its
            specification gives.
        weights: reads its weights (the task's `state_dict`).
        training: a folder's record of the settings only training read; None: those of its
            specification.
    """

    where: str
    path: Path
    identity: Identity
    spec: Spec
    entries: dict[str, Any]
    search: dict[str, Any] | None
    weights: Callable[[], Mapping[str, Tensor]] = field(repr=False)
    training: dict[str, Any] | None = None

    @property
    def task(self) -> str:
        return self.identity.task

    @property
    def kind(self) -> str:
        """What messages call it: "checkpoint", or "model folder"."""
        return "model folder" if self.path.is_dir() else "checkpoint"

    @cached_property
    def parsed(self) -> ParsedSpec:
        """Its specification, as this seqtasks reads it, for the task it declares.

        Raises:
            NewerModelError: naming the version that wrote the model and the class or option
                this seqtasks does not have.
            CheckpointError: for a name a model file may not hold, a setting the model needs
                left out, or a model of another task than it declares.
        """
        try:
            return ParsedSpec(self.spec, self.task)
        except SpecError as error:
            if error.cause == "unknown":
                raise NewerModelError(
                    f"{self.where} was written by {self.identity.written_by} and names what "
                    f"this seqtasks does not have: {error}; upgrade seqtasks (pip install -U "
                    "seqtasks), or install the package that has it"
                ) from None
            edited = f"the {self.kind} was edited or damaged"  # a setting left out, another task
            why = "not loaded" if error.cause == "forbidden" else edited
            raise CheckpointError(f"{self.where}: {error}; {why}") from None

    @property
    def gives_attention(self) -> bool:
        """Whether its decoder gives attention weights (`Decoder.gives_attention`)."""
        decoder = self.resolved["init_args"].get("decoder")
        found = imported(decoder["class_path"]) if isinstance(decoder, dict) else None
        return bool(getattr(found, "gives_attention", True))

    @property
    def resolved(self) -> Spec:
        """Its specification with this seqtasks' defaults filled in (`ParsedSpec.resolved`)."""
        return self.parsed.resolved

    def build(self, device: str = "cpu") -> Any:
        """The task, its entries and weights loaded, in eval mode on `device`, as
        `load_from_checkpoint` builds it; a folder's search settings are its `test_settings`.

        Raises:
            CheckpointError: naming `where`, for weights or entries unlike the model its
                specification describes.
        """
        from seqtasks.search import SearchSettings

        try:
            task = self.parsed.build()
        except SpecError as error:  # a setting its part refuses: the file was edited
            raise CheckpointError(f"{self.where}: its model cannot be built: {error}") from None
        task.configure_model()
        try:
            task.restore(self.entries)
        except (ValueError, KeyError, TypeError, AttributeError) as error:  # an edited entry
            raise CheckpointError(
                f"{self.where}: its {task.stored_as} cannot be read ({error})"
            ) from None
        try:
            task.load_state_dict(_with_shared(self.weights(), task.state_dict()))
        except ValueError as error:  # CheckpointError, or the task's own check of its entries
            raise CheckpointError(f"{self.where}: {error}") from None
        except RuntimeError as error:  # what load_state_dict says beyond names and shapes
            details = " ".join(str(error).split())
            raise CheckpointError(
                f"{self.where}: cannot load its weights ({details[:300]})"
            ) from None
        if self.search:  # {} for a model that does not search
            names = {"stop": "beam_stop", "beam": "test_beam"}
            try:
                task.test_settings = SearchSettings(**self.search, names=names)
            except (TypeError, ValueError) as error:
                raise CheckpointError(f"{self.where}: config.json's search: {error}") from None
        return task.to(device).eval()


def _with_shared(weights: Mapping[str, Tensor], model: Mapping[str, Tensor]) -> dict:
    """`weights` with the tensors a model folder keeps once (tied embeddings) under each name
    the model gives them."""
    from seqtasks.model_files.folder import shared_names

    weights = dict(weights)
    for name, first in shared_names(model).items():
        if name not in weights and first in weights:
            weights[name] = weights[first]
    return weights


def open_model(reference: Reference) -> ModelSource:
    """The model `reference` names: a checkpoint file, a model folder, or `hf://ORG/NAME
    [@REVISION]` (downloaded into the Hub's cache first), read and checked, not built.

    Raises:
        NewerModelError: for a model of a newer format, or naming what this seqtasks lacks.
        CheckpointError: naming the file, for anything missing, damaged, foreign or altered,
            or a model of a task seqtasks does not know.
    """
    from seqtasks.model_files import folder, hub

    if hub.is_hub_name(reference):
        path, where = hub.download(str(reference))
    else:
        path, where = Path(reference), str(reference)
    if folder.is_model_folder(path) or (hub.is_hub_name(reference) and path.is_dir()):
        model = folder.read_folder(path, where)
        source = ModelSource(
            where,
            path,
            model.identity,
            model.spec,
            model.entries,
            model.search,
            model.weights,
            model.training,
        )
    else:
        source = checkpoint_source(read_checkpoint(path), path, where)
    return checked(source)


def checkpoint_source(checkpoint: dict[str, Any], path: Path, where: str) -> ModelSource:
    """The model a checkpoint holds (as `read_checkpoint` read it from `path`), unchecked."""
    identity = identity_of(checkpoint, where)
    hparams = checkpoint.get("hyper_parameters") or {}
    named = hparams.get("_class_path")  # else: a checkpoint of 0.1, by its task's class
    spec = from_hparams(hparams, object if named else _task_class(identity.task))
    stored = {k: v for k, v in checkpoint["seqtasks"].items() if k != "task"}
    state = checkpoint["state_dict"]
    return ModelSource(where, path, identity, spec, stored, None, lambda: state)


def _task_class(task: str) -> type:
    """The LightningModule of the task named `task` (its package alone imported); `object`
    when no usable task has that name (`checked` then says why)."""
    try:
        return task_entry(task).task_class()
    except TaskError:
        return object


def checked(source: ModelSource) -> ModelSource:
    """`source` once its task is one seqtasks knows, its specification one it can build for
    that task (`ModelSource.parsed`) and its stored entries the ones that task keeps; raises
    as `open_model` does."""
    try:
        entry = task_entry(source.task)
    except TaskError as error:
        raise CheckpointError(
            f"{source.where}: a {source.task!r} model, which seqtasks cannot load: {error}"
        ) from None
    keys = getattr(entry.task_class(), "stored_keys", None)
    if keys is not None and sorted(source.entries.keys() - {"task"}) != sorted(keys):
        held = ", ".join(map(entry_name, sorted(source.entries))) or "nothing"
        raise CheckpointError(
            f"{source.where}: it declares a {source.task} model, which keeps "
            f"{', '.join(map(entry_name, keys))}, but it holds {held}; the {source.kind} was "
            "edited or damaged"
        )
    source.parsed  # noqa: B018 (read and checked now, before any input is)
    return source


def check_members(sources: Sequence[ModelSource], task: str | None = None) -> None:
    """Raise a CheckpointError, naming the model at fault and what is wrong, unless the models
    (`open_model`) can decode together: of one task (`task` when given), with the same
    tokenisers."""
    if not sources:
        raise CheckpointError("no checkpoint to load")
    first = sources[0]
    if task is not None and first.task != task:
        raise CheckpointError(f"{first.where} is a {first.task} {first.kind}, not a {task} one")
    for source in sources[1:]:
        if source.task != first.task:
            raise CheckpointError(
                f"cannot ensemble {source.where} with {first.where}: it is a {source.task} "
                f"{source.kind}, not a {first.task} one"
            )
        names = (Path(first.where).name, Path(source.where).name)
        if names[0] == names[1]:
            names = ("the first", "this one")
        mismatch = fingerprint_difference(
            first.identity.fingerprints, source.identity.fingerprints, names
        )
        if mismatch is not None:
            raise CheckpointError(
                f"cannot ensemble {source.where} with {first.where}: {mismatch} (ensemble "
                "members must share their tokenisers and vocabularies)"
            )
