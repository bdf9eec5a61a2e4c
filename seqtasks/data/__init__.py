"""Data every task shares: tokenisers, padded batches, token-bucketed batching and the
DataModule base (`BucketedData`), text files. Each task's DataModules live in its package."""

from typing import Any

from seqtasks.registry import declared_class


def __getattr__(name: str) -> Any:
    """`seqtasks.data.TranslationData`, the class path 0.1 configs name, as the DataModule of
    that name some task declares."""
    try:
        return declared_class(name, "data")
    except AttributeError:
        raise AttributeError(f"module 'seqtasks.data' has no attribute {name!r}") from None
