"""`seqtasks export MODEL --to folder|ctranslate2 OUT/`: a trained model as a folder to hand on.

    seqtasks export runs/transformer/best.ckpt --to folder models/de-en   # then: hf upload …
    seqtasks export runs/transformer/last.ckpt --to ctranslate2 models/de-en-ct2
    seqtasks export last.ckpt --to ctranslate2 models/de-en-int8 --quantization int8 --force

`--to folder` writes the Hugging Face Hub's layout (model.safetensors, config.json, the
tokenisers, a model card; docs/models.md), which `seqtasks.load`, every command and `seqtasks
serve` read, from a path or as `hf://ORG/NAME` once uploaded; `--to ctranslate2` a CTranslate2
model (docs/deployment.md). MODEL is a checkpoint, a model folder or an `hf://` name.

Exit status 0 when written; 2 for bad arguments, a missing, damaged or newer model, a model the
runtime cannot run (the reason named: an RNN, ResiDual norm, a captioning or parsing model for
CTranslate2), an OUT that is or holds the checkpoint or cannot be written, an output folder that
is not empty (without --force), or too little free space; OUT is checked before the model is
read. The folder is built beside OUT and renamed into place, so a failed or killed export
leaves OUT as it was (the next export cleans what a killed one left).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from seqtasks.cli.arguments import CommandParser, model_reference
from seqtasks.export import QUANTIZATIONS
from seqtasks.export.staging import ExportError


def folder_path(text: str) -> Path:
    """OUT as a path; an empty one is refused (it would name the current folder)."""
    if not text:
        raise argparse.ArgumentTypeError("must name a folder, got an empty string")
    return Path(text)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = CommandParser(
        prog="seqtasks export", description=__doc__.split("\n\n")[0].replace("`", "")
    )
    parser.add_argument(
        "checkpoint",
        type=model_reference,
        metavar="MODEL",
        help="a seqtasks checkpoint, model folder or hf://ORG/NAME[@REVISION]",
    )
    parser.add_argument("out", type=folder_path, metavar="OUT", help="the model folder to write")
    parser.add_argument(
        "--to",
        required=True,
        choices=["folder", "ctranslate2"],
        help="folder: the Hugging Face Hub's layout, for seqtasks; ctranslate2: that runtime's",
    )
    parser.add_argument(
        "--quantization",
        default="none",
        choices=QUANTIZATIONS,
        help="CTranslate2's weight type (none: float32 as trained; int8 runs fastest on a CPU)",
    )
    parser.add_argument("--force", action="store_true", help="replace a non-empty OUT")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    try:
        args = parse_args(argv)
    except SystemExit as exit:  # argparse: --help (0) or a usage error (2), already printed
        return int(exit.code or 0)
    if args.to == "folder":
        return export_folder(args)
    try:
        import ctranslate2  # noqa: F401
    except ImportError:
        print("error: --to ctranslate2 needs CTranslate2: pip install ctranslate2", file=sys.stderr)
        return 2
    from seqtasks.export.ctranslate2 import WEIGHTS, export_ctranslate2, unsupported_here
    from seqtasks.io.checkpoint_files import CheckpointError

    try:
        out = export_ctranslate2(args.checkpoint, args.out, args.quantization, args.force)
    except (ExportError, CheckpointError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    weights = WEIGHTS.get(args.quantization, args.quantization)
    print(f"wrote {out}/ (CTranslate2, weights {weights}) from {args.checkpoint}")
    if (why := unsupported_here(args.quantization)) is not None:
        print(f"note: {why}", file=sys.stderr)
    return 0


def export_folder(args: argparse.Namespace) -> int:
    """`--to folder`: write the model folder; 0, or 2 with one `error:` line."""
    if args.quantization != "none":
        print("error: --quantization is for --to ctranslate2", file=sys.stderr)
        return 2
    from seqtasks.export.folder import export_folder as write
    from seqtasks.io.checkpoint_files import CheckpointError

    try:
        out = write(args.checkpoint, args.out, args.force)
    except (ExportError, CheckpointError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(
        f"wrote {out}/ (a seqtasks model folder: model.safetensors, config.json, README.md) "
        f"from {args.checkpoint}"
    )
    return 0
