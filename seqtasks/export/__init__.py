"""`seqtasks export CKPT --to ctranslate2 OUT/`: a trained checkpoint as a model folder that
another runtime loads.

    seqtasks export runs/transformer/last.ckpt --to ctranslate2 models/de-en
    seqtasks export last.ckpt --to ctranslate2 models/de-en-int8 --quantization int8 --force

Exit status 0 when written; 2 for bad arguments, a missing or damaged checkpoint, a model the
runtime cannot run (the reason named: an RNN, ResiDual norm, a captioning or parsing
checkpoint) or an output folder that is not empty (without --force). The folder is built beside
OUT and renamed into place, so a failed export leaves OUT as it was. docs/deployment.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from seqtasks.export.staging import ExportError
from seqtasks.io.checkpoint_files import CheckpointError

__all__ = ["ExportError", "main"]


def parse_args(argv: list[str]) -> argparse.Namespace:
    from seqtasks.export.ctranslate2 import QUANTIZATIONS

    parser = argparse.ArgumentParser(
        prog="seqtasks export", description=__doc__.split("\n\n")[0].replace("`", "")
    )
    parser.add_argument("checkpoint", type=Path, metavar="CKPT", help="a seqtasks checkpoint")
    parser.add_argument("out", type=Path, metavar="OUT", help="the model folder to write")
    parser.add_argument("--to", required=True, choices=["ctranslate2"], help="the runtime")
    parser.add_argument(
        "--quantization",
        default="none",
        choices=QUANTIZATIONS,
        help="weight type (none: float32 as trained; int8 runs fastest on a CPU)",
    )
    parser.add_argument("--force", action="store_true", help="replace a non-empty OUT")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    try:
        args = parse_args(argv)
    except SystemExit as exit:  # argparse: --help (0) or a usage error (2), already printed
        return int(exit.code or 0)
    try:
        import ctranslate2  # noqa: F401
    except ImportError:
        print("error: --to ctranslate2 needs CTranslate2: pip install ctranslate2", file=sys.stderr)
        return 2
    from seqtasks.export.ctranslate2 import export_ctranslate2

    try:
        out = export_ctranslate2(args.checkpoint, args.out, args.quantization, args.force)
    except (ExportError, CheckpointError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {out}/ (CTranslate2, weights {args.quantization}) from {args.checkpoint}")
    return 0
