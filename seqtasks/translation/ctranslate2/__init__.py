"""`seqtasks export MODEL --to ctranslate2 OUT/`: a Transformer translation model as a
CTranslate2 model folder (the `export` extra), the one format beyond the model folder that
translation declares (`TaskEntry.formats`). This module is what `seqtasks export` reads to
offer it, and imports no torch: its options (`add_arguments`) and its run (`write`); the
writer is `export.py`, the weight mapping `spec.py`, seqtasks' search set up in CTranslate2
`search.py`.
"""

from __future__ import annotations

import argparse
import sys

HELP = "a model folder for the CTranslate2 runtime (docs/deployment.md)"

# What `--quantization` accepts: "none" keeps float32 weights; the rest are CTranslate2's
# weight types (`ctranslate2.specs.model_spec.ACCEPTED_MODEL_TYPES`).
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of this format (refused with any other `--to`)."""
    parser.add_argument(
        "--quantization",
        default="none",
        choices=QUANTIZATIONS,
        help="for --to ctranslate2: CTranslate2's weight type (none: float32 as trained; int8 "
        "runs fastest on a CPU)",
    )


def write(args: argparse.Namespace) -> int:
    """Write `args.checkpoint` as a CTranslate2 model at `args.out`; 0, or 2 with one
    `error:` line."""
    try:
        import ctranslate2  # noqa: F401
    except ImportError:
        print("error: --to ctranslate2 needs CTranslate2: pip install ctranslate2", file=sys.stderr)
        return 2
    from seqtasks.export.staging import ExportError
    from seqtasks.io.checkpoint_files import CheckpointError
    from seqtasks.translation.ctranslate2.export import (
        WEIGHTS,
        export_ctranslate2,
        unsupported_here,
    )

    try:
        out = export_ctranslate2(args.checkpoint, args.out, args.quantization, args.force)
    except (ExportError, CheckpointError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    weights = WEIGHTS.get(args.quantization, args.quantization)
    files = ", ".join(sorted(path.name for path in out.iterdir()))
    print(f"wrote {out}/ (CTranslate2, weights {weights}: {files}) from {args.checkpoint}")
    if (why := unsupported_here(args.quantization)) is not None:
        print(f"note: {why}", file=sys.stderr)
    return 0
