"""Data: tokenisers, bucketed batching, and one DataModule per task."""

from seqtasks.data.dates import DatesData
from seqtasks.data.tokenizer import SentencePieceTokenizer, train_sentencepiece
from seqtasks.data.translation import Batch, TranslationData

__all__ = ["Batch", "DatesData", "SentencePieceTokenizer", "TranslationData", "train_sentencepiece"]
