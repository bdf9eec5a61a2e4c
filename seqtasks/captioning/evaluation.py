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
from collections.abc import Callable
from pathlib import Path

from seqtasks.cli.arguments import Scored, non_negative_int, positive_int

RUN = ".report.evaluate"  # what scores, imported once the arguments are read
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
