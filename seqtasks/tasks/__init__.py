"""Tasks: the LightningModules that train and evaluate an encoder with a decoder."""

from seqtasks.tasks.base import EncoderDecoderTask
from seqtasks.tasks.captioning import CaptioningTask
from seqtasks.tasks.parsing import ParsingTask
from seqtasks.tasks.translation import TranslationTask

__all__ = ["CaptioningTask", "EncoderDecoderTask", "ParsingTask", "TranslationTask"]
