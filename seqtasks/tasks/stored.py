"""What a task keeps in its checkpoints beside the weights (tokenisers, vocabularies, the image
size), so that `load_from_checkpoint(path)` gives a model that reads and writes text: written
as `checkpoint["seqtasks"] = {"task": name, key: value, …}` with the keys its class names
(`stored_keys`), and read back checked (`stored_entries`); and the model's identity
record beside it (`seqtasks.model_files.identity`: the version and format that wrote it, a
fingerprint of each entry, the data and the fit's scores)."""

from __future__ import annotations

from typing import Any, ClassVar

import seqtasks
from seqtasks.io.checkpoint_files import stored_entries
from seqtasks.model_files.identity import IDENTITY_KEY, Identity, fingerprints
from seqtasks.model_files.provenance import describe_data, fit_scores, search_record
from seqtasks.registry import TaskEntry


class StoredEntries:
    """The checkpoint hooks of a task that stores entries beside its weights: their keys in
    `checkpoint["seqtasks"]`, beside "task" (`stored_keys`), and what they are, in words
    (`stored_as`); the task says what the entries are now (`stored`: None before the data
    gives them) and takes them back (`restore`). Listed before `EncoderDecoderTask`, whose
    hooks it calls on."""

    entry: ClassVar[TaskEntry]
    stored_keys: ClassVar[tuple[str, ...]]
    stored_as: ClassVar[str]

    def stored(self) -> dict[str, Any] | None:
        """The entries to store, by `stored_keys`; None if not known yet."""
        raise NotImplementedError

    def restore(self, entries: dict[str, Any]) -> None:
        """Take back what a checkpoint stored (checking it fits the model)."""
        raise NotImplementedError

    @classmethod
    def data_entries(cls, datamodule: Any) -> dict[str, Any]:
        """What a task of this class would store if trained on `datamodule` (as `stored`
        gives it): to compare with what a checkpoint stores before resuming on that data."""
        raise NotImplementedError

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        entries, entry = self.stored(), self.entry
        if entries is None:
            raise RuntimeError(
                f"cannot save a {entry.name} checkpoint without its {self.stored_as}"
            )
        super().on_save_checkpoint(checkpoint)
        stored = {key: entries[key] for key in self.stored_keys}
        checkpoint["seqtasks"] = {"task": entry.name, **stored}
        trainer = self._trainer
        identity = Identity(
            entry.name,
            fingerprints(stored),
            version=seqtasks.__version__,
            data=describe_data(getattr(trainer, "datamodule", None)),
            scores=fit_scores(trainer),
            search=search_record(self.test_settings),
        )
        checkpoint[IDENTITY_KEY] = identity.record()

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Take back what the checkpoint stores; a trainer restoring it into this model (built
        from a config) first checks it is this model, trained on the trainer's data
        (`check_identity`)."""
        keys = self.stored_keys
        entries = dict(zip(keys, stored_entries(checkpoint, self.entry.name, keys)))
        if self._trainer is not None:
            from seqtasks.training.compatibility import check_identity

            datamodule = getattr(self.trainer, "datamodule", None)
            check_identity(checkpoint, self, datamodule, str(self.trainer.ckpt_path))
        self.restore(entries)
        super().on_load_checkpoint(checkpoint)
