"""Writers of a trained model for others to run that every task shares: the Hugging Face
Hub-layout folder (`folder.py`), staged beside its output and renamed into place
(`staging.py`, which a task's own formats use too: `TaskEntry.formats`, the CTranslate2 model of
`seqtasks.translation.ctranslate2`). The command is `seqtasks export` (`seqtasks.cli.export`)."""

from seqtasks.export.staging import ExportError

__all__ = ["ExportError"]
