"""`seqtasks export MODEL --to FORMAT OUT/`: a trained model as a folder to hand on.

    seqtasks export runs/transformer/best.ckpt --to folder models/de-en   # then: hf upload …
    seqtasks export runs/transformer/last.ckpt --to ctranslate2 models/de-en-ct2

`--to folder`, for a model of any task, writes the Hugging Face Hub's layout (model.safetensors,
config.json, the tokenisers, a model card; docs/models.md), which `seqtasks.load`, every command
and `seqtasks serve` read, from a path or as `hf://ORG/NAME` once uploaded. The other formats
are those the tasks declare (`TaskEntry.formats`: translation's `ctranslate2`, a CTranslate2
model, docs/deployment.md), each with its own options, refused with another `--to`. MODEL is a
checkpoint, a model folder or an `hf://` name.

Exit status 0 when written, saying each file written; 2 for bad arguments, a missing, damaged
or newer model, a model of a task the format is not for (said before the model is read), a
model the format cannot express (the reason named), an OUT that is or holds the checkpoint or
cannot be written, an output folder that is not empty (without --force), or too little free
space; OUT is checked before the model is read. The folder is built beside OUT and renamed into
place, so a failed or killed export leaves OUT as it was (the next export cleans what a killed
one left).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import ModuleType

from seqtasks.cli.arguments import CommandParser, model_reference
from seqtasks.export.staging import ExportError
from seqtasks.model_files.peek import declared_task
from seqtasks.registry import tasks

FOLDER = "folder"


def folder_path(text: str) -> Path:
    """OUT as a path; an empty one is refused (it would name the current folder)."""
    if not text:
        raise argparse.ArgumentTypeError("must name a folder, got an empty string")
    return Path(text)


def formats() -> dict[str, tuple[list[str], ModuleType]]:
    """Each format a task declares beyond the model folder (`TaskEntry.formats`): the tasks
    that offer it, and the module that writes it (`HELP`, `add_arguments`, `write`)."""
    found: dict[str, tuple[list[str], ModuleType]] = {}
    for name, entry in tasks().items():
        for format, _ in entry.formats:
            offering, _ = found.setdefault(format, ([], entry.export_module(format)))
            offering.append(name)
    return found


def parse_args(argv: list[str], offered: dict[str, tuple[list[str], ModuleType]]):
    """The arguments, checked: an option of one format is refused with another `--to`."""
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
    helps = [f"{FOLDER}: the Hugging Face Hub's layout, for seqtasks (every task)"]
    helps += [
        f"{f}: {module.HELP}, for {' and '.join(t)} models" for f, (t, module) in offered.items()
    ]
    parser.add_argument("--to", required=True, choices=[FOLDER, *offered], help="; ".join(helps))
    parser.add_argument("--force", action="store_true", help="replace a non-empty OUT")
    options = {}
    for format, (_, module) in offered.items():
        before = len(parser._actions)
        module.add_arguments(parser)
        options[format] = parser._actions[before:]
    args = parser.parse_args(argv)
    for format, actions in options.items():
        for action in actions:
            if format != args.to and getattr(args, action.dest) != action.default:
                parser.error(f"argument {action.option_strings[0]}: is for --to {format}")
    return args


def main(argv: list[str]) -> int:
    offered = formats()
    try:
        args = parse_args(argv, offered)
    except SystemExit as exit:  # argparse: --help (0) or a usage error (2), already printed
        return int(exit.code or 0)
    if args.to == FOLDER:
        return export_folder(args)
    offering, module = offered[args.to]
    declared = declared_task(args.checkpoint)  # at once, before torch: a model of another task
    if declared is not None and declared[0] not in offering:
        print(
            f"error: {args.checkpoint} is a {declared[0]} {declared[1]}, and --to {args.to} "
            f"writes {' and '.join(offering)} models only",
            file=sys.stderr,
        )
        return 2
    return module.write(args)


def export_folder(args: argparse.Namespace) -> int:
    """`--to folder`: write the model folder; 0, or 2 with one `error:` line."""
    from seqtasks.export.folder import export_folder as write
    from seqtasks.io.checkpoint_files import CheckpointError

    try:
        out = write(args.checkpoint, args.out, args.force)
    except (ExportError, CheckpointError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {out}/ (a seqtasks model folder: {written(out)}) from {args.checkpoint}")
    return 0


def written(out: Path) -> str:
    """The files a writer put in `out`, as the export's last line lists them."""
    return ", ".join(sorted(path.name for path in out.iterdir()))
