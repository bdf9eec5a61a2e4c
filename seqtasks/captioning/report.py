"""A captioning model on a split: corpus BLEU-1…4 and CIDEr-D on the coco-caption conventions
(×100, `seqtasks.captioning.metrics`), METEOR when it can be computed, on the shapes world exact
match, truthfulness and the attention hit rate (`seqtasks.captioning.judgements`), and a
nearest-neighbour baseline to compare with; or a file of captions, scored the same way."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

import seqtasks
from seqtasks.captioning.captions import CaptionedImage, load_images, read_captions
from seqtasks.captioning.judgements import judge, summarise
from seqtasks.captioning.metrics import score_captions
from seqtasks.cli.arguments import given
from seqtasks.cli.report_progress import ReportProgress
from seqtasks.cli.reports import fail, json_line, write_outputs
from seqtasks.data.words import words
from seqtasks.io.checkpoint_files import CheckpointError

if TYPE_CHECKING:
    from seqtasks.captioning.captioner import Caption, Captioner


def read_images(
    model: Captioner, images: list[CaptionedImage]
) -> tuple[list[CaptionedImage], Tensor | None, dict[Path, str]]:
    """The `images` that can be read, (B, 3, S, S) their pixels at the model's image size (None
    if there are none), and for each image that cannot be read, a message naming it."""
    readable, pixels, errors = load_images([image.path for image in images], model.image_size)
    return [images[i] for i in readable], pixels, {images[i].path: e for i, e in errors.items()}


def caption_images(
    model: Captioner,
    images: Sequence[CaptionedImage],
    batch_size: int,
    beam: int | None,
    attention: bool,
    unreadable: Callable[[str], None],
    done: Callable[[int], None],
    stop: str | None = None,
) -> tuple[list[CaptionedImage], list[Caption], dict[Path, str]]:
    """Caption every image that can be read, `batch_size` at a time; those that cannot are
    passed to `unreadable` as they are found, and returned by path with the reason. `beam`
    and `stop` (beam search's stopping rule): the model's where None. `done` is told how many
    images each batch held, once it is captioned."""
    kept, captions, errors = [], [], {}
    for start in range(0, len(images), batch_size):
        batch = list(images[start : start + batch_size])
        readable, pixels, failed = read_images(model, batch)
        for error in failed.values():
            unreadable(error)
        errors |= failed
        if pixels is not None:
            kept += readable
            captions += model.caption(pixels, beam, attention=attention, stop=stop)
        done(len(batch))
    return kept, captions, errors


@torch.no_grad()
def nearest_neighbour(
    model: Captioner,
    train: list[CaptionedImage],
    test: list[CaptionedImage],
    batch: int,
    unreadable: Callable[[str], None],
    done: Callable[[int], None],
) -> list[str]:
    """For each test image, the first caption of the training image whose pooled backbone
    feature (the feature map averaged over the grid) is most similar by cosine. Training images
    that cannot be read are left out of the candidates (each passed to `unreadable`); `done` is
    told how many images each batch held, once its features are."""

    def pooled(images: list[CaptionedImage]) -> tuple[list[CaptionedImage], Tensor]:
        kept, features = [], []
        for start in range(0, len(images), batch):
            readable, pixels, errors = read_images(model, images[start : start + batch])
            for error in errors.values():
                unreadable(error)
            if pixels is not None:
                kept += readable
                features.append(model.task.encoder.extract(pixels.to(model.device)).mean((2, 3)))
            done(len(images[start : start + batch]))
        if not kept:
            raise ValueError("none of the training images can be read for the baseline")
        return kept, torch.nn.functional.normalize(torch.cat(features), dim=-1)  # (N, C)

    candidates, train_features = pooled(train)
    _, test_features = pooled(test)
    nearest = (test_features @ train_features.T).argmax(dim=1).tolist()
    return [candidates[j].captions[0] for j in nearest]


def read_predicted_captions(
    path: Path, split: Sequence[CaptionedImage], split_name: str
) -> tuple[list[CaptionedImage], list[Caption], dict[Path, str]]:
    """The captions `path` holds for the images of `split`, as `caption_images` returns a
    model's: JSON lines {"image", "caption"}, or {"image", "error"} for an image that could not be
    read, as `seqtasks caption` and `seqtasks evaluate captioning --output` write them. A record
    names its image by path, or by file name where that is one image of the split (a copy of the
    images elsewhere); records of images outside the split are passed over, so that the
    captions of a whole folder can be scored split by split.

    Raises:
        ValueError: naming the file and line, for a line that is not such a record and for two
            records of one image; naming an image, for an image of the split without a record.
    """
    from seqtasks.captioning.captioner import Caption  # Lightning: only once a file is scored

    by_path = {image.path.resolve(): image for image in split}
    by_name: dict[str, list[CaptionedImage]] = {}
    for image in split:
        by_name.setdefault(image.name, []).append(image)
    said: dict[Path, Caption] = {}
    unreadable: dict[Path, str] = {}
    where: dict[Path, int] = {}
    lines = path.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{number}: not a JSON record ({error.msg})") from None
        fields = {"caption", "error"} & set(record) if isinstance(record, dict) else set()
        if (
            len(fields) != 1
            or not isinstance(record.get("image"), str)
            or not isinstance(record[fields.pop()], str)
        ):
            raise ValueError(
                f'{path}:{number}: not a caption record: give {{"image": PATH, "caption": TEXT}}'
                ' (or "error" for an image that could not be read), as seqtasks caption writes'
            )
        named = Path(record["image"])
        image = by_path.get(named.resolve())
        if image is None and len(by_name.get(named.name, [])) == 1:
            image = by_name[named.name][0]
        if image is None:
            continue
        if image.path in where:
            raise ValueError(
                f"{path}:{number}: a second record of {image.path} (the first is on line "
                f"{where[image.path]})"
            )
        where[image.path] = number
        if "error" in record:
            unreadable[image.path] = record["error"]
        else:
            text = record["caption"]
            score = record.get("score")
            score = float(score) if isinstance(score, (int, float)) else math.nan
            said[image.path] = Caption(text, words(text), score)
    missing = [image.path for image in split if image.path not in where]
    if missing:
        raise ValueError(
            f"{path} has no caption for {len(missing)} of the {len(split)} images of the "
            f"{split_name} split (the first: {missing[0]}): caption every image of the split "
            "(seqtasks caption FOLDER --checkpoint CKPT --out FILE)"
        )
    kept = [image for image in split if image.path in said]
    return kept, [said[image.path] for image in kept], unreadable


def captioning_report(
    images: Sequence[CaptionedImage],
    captions: Sequence[Caption],
    meteor: bool,
    baseline: Sequence[str] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """The scores of `captions` (one per image), as data and as printed."""
    references = [image.captions for image in images]
    scores = score_captions([c.text for c in captions], references, with_meteor=meteor)
    report = asdict(scores)
    lines = [f"BLEU-{n} = {getattr(scores, f'bleu{n}'):.2f}" for n in range(1, 5)]
    lines.append(f"CIDEr-D = {scores.cider:.2f}")
    # how varied the captions are: self-critical training is known to narrow them
    distinct = len({c.text for c in captions})
    report["distinct_captions"] = 100 * distinct / len(captions)
    lines.append(
        f"distinct captions = {distinct} of {len(captions)} ({report['distinct_captions']:.2f} %)"
    )
    if meteor:
        found = scores.meteor
        shown = "not computed (needs pycocoevalcap and Java)" if found is None else f"{found:.2f}"
        lines.append(f"METEOR = {shown}")
    if all(image.scene is not None for image in images):
        judged = summarise(
            [
                judge(c.words, image.captions, image.scene, c.attention, c.grid)
                for c, image in zip(captions, images)
            ]
        )
        report |= judged
        lines += [f"{name.replace('_', ' ')} = {value:.2f} %" for name, value in judged.items()]
    if baseline is not None:
        nn_scores = score_captions(list(baseline), references)
        report["nearest_neighbour"] = asdict(nn_scores)
        lines.append(f"nearest-neighbour baseline: BLEU-4 = {nn_scores.bleu4:.2f}")
        lines.append(f"nearest-neighbour baseline: CIDEr-D = {nn_scores.cider:.2f}")
    return report, lines


def evaluate(args: argparse.Namespace) -> int:
    """Score the captions of every image of the split that can be read. An image that cannot
    is named on stderr and left out: the scores then cover only the rest, which the report says
    on its first line and in its JSON (`images_unreadable`), and the exit status is 1."""
    search = given(beam=args.beam, stop=args.stop)
    try:
        progress = ReportProgress(f"evaluate {args.task}")
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
            with progress.stage(f"loading {args.checkpoint}"):
                model = seqtasks.load(args.checkpoint, args.device, task="captioning")
            settings = model.search_settings(**search)
    except (CheckpointError, OSError, ValueError) as error:
        return fail(error)
    if not args.pred:
        # on the shapes world, the attention hit rate reads a model's attention, if it has any
        hits = model.gives_attention and all(image.scene is not None for image in split)
        start = f"decoding {len(split):,} images with {args.checkpoint} (beam {settings.beam})"
        with progress.stage(start, len(split), "images") as stage:
            images, captions, unreadable = caption_images(
                model, split, args.batch_size, settings.beam, hits, fail, stage.advance,
                settings.stop,
            )  # fmt: skip
    if not images:
        return fail(f"none of the {len(split)} images of the split can be read")
    baseline, unscored = None, 0
    if args.nearest_neighbour:

        def left_out(error: str) -> None:
            print(f"warning: nearest-neighbour baseline: {error}; left out", file=sys.stderr)

        train = splits["train"]
        count = len(train) + len(images)
        start = f"nearest-neighbour baseline: features of {count:,} images"
        try:
            with progress.stage(start, count, "images") as stage:
                baseline = nearest_neighbour(
                    model, train, images, args.batch_size, left_out, stage.advance
                )
        except ValueError as error:  # the model's captions and scores are still worth having
            unscored = fail(f"nearest-neighbour baseline: {error}; the model's scores follow")
    with progress.stage(f"scoring {len(captions):,} captions"):
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
        print(json_line(report))
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
