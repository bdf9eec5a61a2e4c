"""Data: tokenisers, bucketed batching, and one DataModule per task.

The DataModules (and what YAML names as `seqtasks.data.TranslationData` …) are imported when
first asked for, so the plain modules here (tokenisers, batches, text files) can be used by the
components without importing Lightning.
"""

import importlib
from typing import Any

_EXPORTS = {
    "Batch": "seqtasks.data.batch",
    "CaptionData": "seqtasks.data.captioning",
    "DatesData": "seqtasks.data.dates",
    "ParsingData": "seqtasks.data.parsing",
    "SentencePieceTokenizer": "seqtasks.data.tokenizer",
    "ShapesData": "seqtasks.data.captioning",
    "ShardedTranslationData": "seqtasks.data.streaming.sharded_translation",
    "TranslationData": "seqtasks.data.translation",
    "train_sentencepiece": "seqtasks.data.tokenizer",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'seqtasks.data' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


def __dir__() -> list[str]:
    return __all__
