"""What every task's LightningModule shares: `EncoderDecoderTask` (base.py), its training
objective, the checks of its parts, and what its checkpoints store. The tasks themselves live in
their own packages (`seqtasks.translation`, …; `seqtasks.registry` finds them)."""

from seqtasks.old_names import old_class
from seqtasks.registry import tasks


def _base() -> type:
    from seqtasks.tasks.base import EncoderDecoderTask

    return EncoderDecoderTask


def _task_classes():
    yield "EncoderDecoderTask", _base
    for entry in tasks().values():
        yield entry.task, lambda entry=entry: entry.imported(entry.task)


# `seqtasks.tasks.TranslationTask`, the class path 0.1 configs and checkpoints hold (and the
# base, for `from seqtasks.tasks import EncoderDecoderTask` of 0.1)
__getattr__ = old_class("seqtasks.tasks", _task_classes)
