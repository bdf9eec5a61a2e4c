"""Data every task shares: tokenisers, padded batches, token-bucketed batching and the
DataModule base (`BucketedData`), text files. Each task's DataModules live in its package."""

from seqtasks.old_names import old_class
from seqtasks.registry import tasks


def _data_classes():
    for entry in tasks().values():
        for path in entry.data:
            yield path, lambda entry=entry, path=path: entry.imported(path)


# `seqtasks.data.TranslationData`, the class path 0.1 configs name
__getattr__ = old_class("seqtasks.data", _data_classes)
