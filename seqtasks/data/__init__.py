"""Data: tokenisers, bucketed batching, and one DataModule per task."""

from seqtasks.data.batch import Batch
from seqtasks.data.captioning import CaptionData, ShapesData
from seqtasks.data.dates import DatesData
from seqtasks.data.parsing import ParsingData
from seqtasks.data.streaming.sharded_translation import ShardedTranslationData
from seqtasks.data.tokenizer import SentencePieceTokenizer, train_sentencepiece
from seqtasks.data.translation import TranslationData

__all__ = [
    "Batch",
    "CaptionData",
    "DatesData",
    "ParsingData",
    "SentencePieceTokenizer",
    "ShapesData",
    "ShardedTranslationData",
    "TranslationData",
    "train_sentencepiece",
]
