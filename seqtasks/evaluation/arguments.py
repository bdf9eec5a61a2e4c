"""The command line of `seqtasks evaluate`: its options for each task, and what a run reads and
writes, so that an output that would overwrite an input, or cannot be written, is refused before
any model is loaded (docs/bad_input.md). It imports no torch, so that `--help` answers at once;
an option left out is None where its default is the model's or the data reader's own."""

from __future__ import annotations

import argparse
from pathlib import Path

from seqtasks.cli.arguments import (
    CommandParser,
    add_beam_option,
    add_max_tokens_option,
    add_stop_option,
    check_outputs,
    device_name,
    model_reference,
    non_negative_int,
    positive_int,
    text_file,
)


def translation_groups(args: argparse.Namespace) -> list[list[Path]]:
    """The checkpoints of each model to score: each on its own, or all as one ensemble (none
    when a --hyp file is scored)."""
    if args.checkpoint is None:
        return []
    return [args.checkpoint] if args.ensemble else [[path] for path in args.checkpoint]


def group_name(group: list[Path]) -> Path:
    """What the report names a model: its checkpoint, or the members joined by " + "."""
    return Path(" + ".join(map(str, group)))


def outputs_of(args: argparse.Namespace) -> dict[str, list[Path] | Path | None]:
    """What the run writes, by option: checked before anything is read (`check_outputs`)."""
    if args.task != "translation":
        return {"--output": args.output}
    from seqtasks.evaluation.translation import output_paths  # sacrebleu: after parsing

    names = [group_name(group) for group in args.groups]
    written = output_paths(args.output, names) if args.output else None
    return {"--output": written, "--length-plot": args.length_plot}


def inputs_of(args: argparse.Namespace) -> dict[str, list[Path] | Path | None]:
    """What the run reads, by option; for a caption source folder, every file in it and in its
    images/ folder (captions.txt, splits, the images), which no output may overwrite."""
    inputs = {"--checkpoint": args.checkpoint}
    if args.task == "translation":
        return inputs | {"--src": args.src, "--ref": args.ref, "--hyp": args.hyp}
    if args.task == "parsing":
        return inputs | {"--gold": args.gold, "--pred": args.pred}
    inputs["--pred"] = args.pred
    folders = [args.source, args.source / "images", args.image_dir]
    files = [p for folder in folders if folder and folder.is_dir() for p in folder.iterdir()]
    return inputs | {"--source": [args.source, *files]}


DEVICE = "cpu, cuda, cuda:1 … or auto (a GPU when one is visible)"
JSON = "end with the report as one JSON object, on the last line"


def parse_args(argv: list[str] | None, description: str) -> argparse.Namespace:
    """The arguments of `seqtasks evaluate TASK …`, checked: buckets increase, outputs are safe
    to write; for translation, `groups` holds the checkpoints of each model to score."""
    parser = CommandParser(prog="seqtasks evaluate", description=description)
    tasks = parser.add_subparsers(dest="task", required=True)
    translation = tasks.add_parser("translation", help="sacreBLEU, chrF, BLEU by length")
    scored = translation.add_mutually_exclusive_group(required=True)
    scored.add_argument(
        "--checkpoint",
        nargs="+",
        type=model_reference,
        help="checkpoints, model folders or hf://ORG/NAME models to translate --src with, each "
        "scored on its own (or, with --ensemble, as one)",
    )
    scored.add_argument(
        "--hyp",
        type=text_file,
        help="translations to score instead, a line each, aligned with --src (what seqtasks "
        "translate --output, or --output here, wrote)",
    )
    translation.add_argument(
        "--src", required=True, type=text_file, help="the sources, one sentence a line"
    )
    translation.add_argument(
        "--ref", required=True, type=text_file, help="the reference translations, aligned"
    )
    add_beam_option(translation)
    add_stop_option(translation)
    add_max_tokens_option(translation)
    translation.add_argument(
        "--ensemble", action="store_true", help="score the checkpoints as one ensemble"
    )
    translation.add_argument(
        "--buckets",
        type=positive_int,
        nargs="+",
        default=[10, 20, 30],
        help="upper bounds of the source-length buckets, in words",
    )
    translation.add_argument("--length-plot", type=Path, help="save BLEU by length as a PNG")
    translation.add_argument("--output", type=Path, help="write the translations here")
    translation.add_argument("--device", type=device_name, default="auto", help=DEVICE)
    translation.add_argument("--json", action="store_true", help=JSON)

    parsing = tasks.add_parser("parsing", help="EVALB bracket scores (COLLINS.prm)")
    parsing.add_argument("--gold", required=True, type=Path, help="gold trees (a treebank file)")
    source = parsing.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--pred",
        type=Path,
        help="predicted trees to score instead, aligned with --gold: a treebank file, or one "
        "tree a line with an empty line for a sentence not parsed (as seqtasks parse writes)",
    )
    source.add_argument(
        "--checkpoint",
        type=model_reference,
        help="a parser to run on the gold words (a checkpoint, model folder or hf://ORG/NAME)",
    )
    add_beam_option(parsing)
    add_stop_option(parsing)
    parsing.add_argument(
        "--buckets",
        type=positive_int,
        nargs="+",
        default=[10, 20, 30, 40],
        help="upper bounds of the sentence-length buckets, in words",
    )
    parsing.add_argument("--output", type=Path, help="write the checkpoint's trees here")
    parsing.add_argument("--device", type=device_name, default="auto", help=DEVICE)
    parsing.add_argument("--json", action="store_true", help=JSON)

    captioning = tasks.add_parser("captioning", help="BLEU-1…4, CIDEr-D, METEOR; shapes scores")
    captioned = captioning.add_mutually_exclusive_group(required=True)
    captioned.add_argument(
        "--checkpoint",
        type=model_reference,
        help="a checkpoint, model folder or hf://ORG/NAME to caption the split's images with",
    )
    captioned.add_argument(
        "--pred",
        type=Path,
        help="captions to score instead: JSON lines {\"image\", \"caption\"} (what seqtasks "
        "caption --out, or --output here, wrote), matched to the split's images by path or name",
    )
    captioning.add_argument(
        "--source",
        required=True,
        type=Path,
        help="the captioned images: a folder with captions.txt (data_prep/captions.py's, or the "
        "shapes world's, e.g. data/shapes), or a Karpathy split .json",
    )
    captioning.add_argument("--split", default="test", help="the split to score (default: test)")
    captioning.add_argument("--image-dir", type=Path, help="where the images are, if elsewhere")
    captioning.add_argument(
        "--val-images",
        type=non_negative_int,
        help="split sizes for a source without splits",
    )
    captioning.add_argument(
        "--test-images", type=non_negative_int, help="the same, for the test split"
    )
    add_beam_option(captioning)
    add_stop_option(captioning)
    captioning.add_argument("--batch-size", type=positive_int, default=32, help="images per batch")
    captioning.add_argument(
        "--no-meteor", dest="meteor", action="store_false", help="skip METEOR (Java, ~20 s)"
    )
    captioning.add_argument(
        "--nearest-neighbour", action="store_true", help="also score the nearest-neighbour baseline"
    )
    captioning.add_argument("--output", type=Path, help="write the captions here (JSON lines)")
    captioning.add_argument("--device", type=device_name, default="auto", help=DEVICE)
    captioning.add_argument("--json", action="store_true", help=JSON)

    args = parser.parse_args(argv)
    buckets = getattr(args, "buckets", None)
    if buckets is not None and buckets != sorted(set(buckets)):
        tasks.choices[args.task].error(
            f"argument --buckets: must increase, got {' '.join(map(str, buckets))}"
        )
    if args.task == "translation":
        args.groups = translation_groups(args)
        if args.hyp and (args.output or args.ensemble or args.length_plot):
            tasks.choices[args.task].error(
                "argument --hyp: scores a file of translations; --output, --ensemble and "
                "--length-plot are for --checkpoint"
            )
    if args.task == "captioning" and args.pred and (args.output or args.nearest_neighbour):
        tasks.choices[args.task].error(
            "argument --pred: scores a file of captions; --output and --nearest-neighbour are "
            "for --checkpoint"
        )
    check_outputs(tasks.choices[args.task], outputs_of(args), inputs_of(args))
    return args
