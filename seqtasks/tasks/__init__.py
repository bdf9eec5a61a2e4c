"""What every task's LightningModule shares: `EncoderDecoderTask` (base.py), its training
objective, the checks of its parts, and what its checkpoints store. The tasks themselves live in
their own packages (`seqtasks.translation`, …; `seqtasks.registry` finds them)."""

from typing import Any

from seqtasks.registry import declared_class


def __getattr__(name: str) -> Any:
    """`seqtasks.tasks.TranslationTask`, the class path 0.1 configs and checkpoints hold, as the
    task class of that name some task declares."""
    if name == "EncoderDecoderTask":  # the base, for `from seqtasks.tasks import …` of 0.1
        from seqtasks.tasks.base import EncoderDecoderTask

        return EncoderDecoderTask
    try:
        return declared_class(name, "task")
    except AttributeError:
        raise AttributeError(f"module 'seqtasks.tasks' has no attribute {name!r}") from None
