"""What a task keeps in its checkpoints beside the weights (tokenisers, vocabularies, the image
size), so that `load_from_checkpoint(path)` gives a model that reads and writes text: written
as `checkpoint["seqtasks"] = {"task": name, key: value, …}` with the keys its registry entry
names (`seqtasks.registry`), and read back checked (`stored_entries`)."""

from __future__ import annotations

from typing import Any, ClassVar

from seqtasks.io.checkpoint_files import stored_entries
from seqtasks.registry import TaskEntry


class StoredEntries:
    """The checkpoint hooks of a task whose `entry` names what it stores; the task says what
    the entries are now (`stored`: None before the data gives them) and takes them back
    (`restore`). Listed before `EncoderDecoderTask`, whose hooks it calls on."""

    entry: ClassVar[TaskEntry]

    def stored(self) -> dict[str, Any] | None:
        """The entries to store, by the keys of `entry.stored`; None if not known yet."""
        raise NotImplementedError

    def restore(self, entries: dict[str, Any]) -> None:
        """Take back what a checkpoint stored (checking it fits the model)."""
        raise NotImplementedError

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        entries, entry = self.stored(), self.entry
        if entries is None:
            raise RuntimeError(
                f"cannot save a {entry.name} checkpoint without its {entry.stored_as}"
            )
        super().on_save_checkpoint(checkpoint)
        checkpoint["seqtasks"] = {"task": entry.name, **{key: entries[key] for key in entry.stored}}

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        keys = self.entry.stored
        self.restore(dict(zip(keys, stored_entries(checkpoint, self.entry.name, keys))))
        super().on_load_checkpoint(checkpoint)
