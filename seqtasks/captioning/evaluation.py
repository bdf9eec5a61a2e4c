"""Captioning prints corpus BLEU-1…4 and CIDEr-D on the coco-caption conventions (×100, see
`seqtasks.captioning.metrics`), METEOR when pycocoevalcap and Java are there, and on the shapes
world exact match, truthfulness and the attention hit rate (`seqtasks.captioning.judgements`).
With --nearest-neighbour it also scores the baseline that gives each image the first training
caption of the training image whose pooled backbone feature is most similar (cosine). With
--json the last line is one JSON object: bleu1…bleu4, cider, meteor, images,
images_unreadable, … An image that cannot be read is named on stderr and the others are scored:
the first line of the report then says that the scores cover only part of the split, and the
exit status is 1. With --pred the captions are those of a file that `seqtasks caption` (or
--output here) wrote, a record an image; an image it could not read counts as above, one it has
no record of is refused (the attention hit rate needs the model's attention, so it is left out).

    seqtasks evaluate captioning --checkpoint best.ckpt --source data/flickr8k --split test
    seqtasks evaluate captioning --checkpoint best.ckpt --source data/shapes --split holdout
    seqtasks evaluate captioning --pred captions.jsonl --source data/flickr8k --split test
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

import seqtasks
from seqtasks.cli.arguments import (
    Scored,
    given,
    non_negative_int,
    positive_int,
)
from seqtasks.cli.reports import fail, write_outputs

HELP = "BLEU-1…4, CIDEr-D, METEOR; shapes scores"


SCORED = Scored(
    "a checkpoint, model folder or hf://ORG/NAME to caption the split's images with",
    "--pred",
    Path,
    'captions to score instead: JSON lines {"image", "caption"} (what seqtasks caption --out, '
    "or --output here, wrote), matched to the split's images by path or name",
)
OUTPUT = "write the captions here (JSON lines)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Its own options (`seqtasks.cli.evaluate` adds the shared ones)."""
    parser.add_argument(
        "--source",
        required=True,
        type=Path,
        help="the captioned images: a folder with captions.txt (data_prep/captions.py's, or the "
        "shapes world's, e.g. data/shapes), or a Karpathy split .json",
    )
    parser.add_argument("--split", default="test", help="the split to score (default: test)")
    parser.add_argument("--image-dir", type=Path, help="where the images are, if elsewhere")
    parser.add_argument(
        "--val-images",
        type=non_negative_int,
        help="split sizes for a source without splits",
    )
    parser.add_argument("--test-images", type=non_negative_int, help="the same, for the test split")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="images per batch")
    parser.add_argument(
        "--no-meteor", dest="meteor", action="store_false", help="skip METEOR (Java, ~20 s)"
    )
    parser.add_argument(
        "--nearest-neighbour", action="store_true", help="also score the nearest-neighbour baseline"
    )


def check(args: argparse.Namespace, error: Callable[[str], None]) -> None:
    """Refuse what --pred cannot do."""
    if args.pred and (args.output or args.nearest_neighbour):
        error(
            "argument --pred: scores a file of captions; --output and --nearest-neighbour are "
            "for --checkpoint"
        )


def inputs(args: argparse.Namespace) -> dict[str, list[Path] | Path | None]:
    """What the run reads; for a caption source folder, every file in it and in its images/
    folder (captions.txt, splits, the images), which no output may overwrite."""
    folders = [args.source, args.source / "images", args.image_dir]
    files = [p for folder in folders if folder and folder.is_dir() for p in folder.iterdir()]
    return {"--checkpoint": args.checkpoint, "--pred": args.pred, "--source": [args.source, *files]}


def outputs(args: argparse.Namespace) -> dict[str, list[Path] | Path | None]:
    return {"--output": args.output}


def evaluate(args: argparse.Namespace) -> int:
    """Score the captions of every image of the split that can be read. An image that cannot
    is named on stderr and left out: the scores then cover only the rest, which the report says
    on its first line and in its JSON (`images_unreadable`), and the exit status is 1."""
    from seqtasks.captioning.captions import read_captions
    from seqtasks.captioning.report import (
        caption_images,
        captioning_report,
        nearest_neighbour,
        read_predicted_captions,
    )
    from seqtasks.io.checkpoint_files import CheckpointError

    search = given(beam=args.beam, stop=args.stop)
    try:
        sizes = given(val_images=args.val_images, test_images=args.test_images)
        splits = read_captions(args.source, args.image_dir, **sizes)
        if args.split not in splits:
            raise ValueError(f"{args.source} has no split '{args.split}' (it has {sorted(splits)})")
        if args.nearest_neighbour and "train" not in splits:
            raise ValueError(f"{args.source} has no training split for the baseline")
        split = splits[args.split]
        if args.pred:
            images, captions, unreadable = read_predicted_captions(args.pred, split, args.split)
            for error in unreadable.values():
                fail(error)
        else:
            model = seqtasks.load(args.checkpoint, args.device, task="captioning")
            settings = model.search_settings(**search)
    except (CheckpointError, OSError, ValueError) as error:
        return fail(error)
    if not args.pred:
        # on the shapes world, the attention hit rate reads a model's attention, if it has any
        hits = model.gives_attention and all(image.scene is not None for image in split)
        images, captions, unreadable = caption_images(
            model, split, args.batch_size, settings.beam, hits, fail, settings.stop
        )
    if not images:
        return fail(f"none of the {len(split)} images of the split can be read")
    baseline, unscored = None, 0
    if args.nearest_neighbour:

        def left_out(error: str) -> None:
            print(f"warning: nearest-neighbour baseline: {error}; left out", file=sys.stderr)

        try:
            baseline = nearest_neighbour(model, splits["train"], images, args.batch_size, left_out)
        except ValueError as error:  # the model's captions and scores are still worth having
            unscored = fail(f"nearest-neighbour baseline: {error}; the model's scores follow")
    scores, lines = captioning_report(images, captions, args.meteor, baseline)
    if args.pred:
        report = {"pred_file": str(args.pred), "split": args.split}
        heading = f"== {args.pred} on {args.source}, {args.split} split"
    else:
        report = {"checkpoint": str(args.checkpoint), "split": args.split, "beam": settings.beam,
                  "stop": settings.stop}  # fmt: skip
        heading = f"== {args.checkpoint} on {args.source}, {args.split} split, beam {settings.beam}"
    report |= scores | {"images_unreadable": [str(path) for path in unreadable]}
    if unreadable:
        warning = (
            f"WARNING: scores over {len(images)} of the {len(split)} images of the split: "
            f"{len(unreadable)} could not be read (named on stderr). Do not compare them with "
            "scores over the whole split."
        )
        print(warning)
        print(warning, file=sys.stderr)
    print(heading)
    print(f"images = {len(images)}" + (f" of {len(split)}" if unreadable else ""))
    print("\n".join(lines))
    if args.json:
        print(json.dumps(report))
    if args.output:
        said = {image.path: caption.text for image, caption in zip(images, captions)}
        records = [
            {"image": str(i.path), "caption": said[i.path]}
            if i.path in said
            else {"image": str(i.path), "error": unreadable[i.path]}
            for i in split
        ]
        write_outputs({args.output: "".join(json.dumps(r) + "\n" for r in records)})
    return 1 if unreadable or unscored else 0
