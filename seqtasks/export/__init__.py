"""Writers of a trained model for others to run: a Hugging Face Hub-layout folder (`folder.py`)
and a CTranslate2 model (`ctranslate2.py`), each staged beside its output and renamed into place
(`staging.py`). The command is `seqtasks export` (`seqtasks.cli.export`)."""

from seqtasks.export.staging import ExportError

__all__ = ["ExportError", "QUANTIZATIONS"]

# What `--quantization` accepts: "none" keeps float32 weights; the rest are CTranslate2's
# weight types (`ctranslate2.specs.model_spec.ACCEPTED_MODEL_TYPES`). Here, not beside the
# export, so that `seqtasks export --help` imports no torch.
QUANTIZATIONS = (
    "none",
    "int8",
    "int8_float32",
    "int8_float16",
    "int8_bfloat16",
    "int16",
    "float16",
    "bfloat16",
    "float32",
)
