"""Score trained models the way their field does.

    python apps/evaluate.py translation --checkpoint best.ckpt \\
        --src data/multi30k/test_2016_flickr.de --ref data/multi30k/test_2016_flickr.en --beam 5
    python apps/evaluate.py translation --checkpoint attn.ckpt plain.ckpt --src … --ref … \\
        --length-plot bleu_by_length.png      # compare models by source length

Translation prints sacreBLEU (cased, detokenised, 13a) with its signature, chrF, the lower-cased
BLEU some papers report, and BLEU per source-length bucket (Bahdanau et al. 2015, Fig. 2).
With --json the last line is one JSON object (the first checkpoint's figures at top level,
every checkpoint's under "models").

    python apps/evaluate.py parsing --gold data/ptb/dev.mrg --pred predicted.mrg
    python apps/evaluate.py parsing --checkpoint best.ckpt --gold data/ptb/dev.mrg --beam 10

Parsing prints EVALB's summary (COLLINS.prm conventions, see `seqtasks.metrics.parseval`) for
a file of predicted trees (one per line or spread over lines), or for a checkpoint that parses
the gold trees' words (traces left out), with the preterminals the model writes: POS tags, or
XX as in Vinyals et al. The punctuation EVALB deletes is decided by the gold tags, so the
brackets score the same either way, and the report says which it was (tagging accuracy only
for tags). Then F1 by sentence length and, for a checkpoint, the share of outputs that had to
be repaired (`malformed`, 0 with constrained decoding). With --json the last line is one JSON
object: recall, precision, f1, f1_le40, complete_match, preterminals, matched, gold, test
(bracket counts), sentences, errors, …

    python apps/evaluate.py captioning --checkpoint best.ckpt --source data/flickr8k --split test
    python apps/evaluate.py captioning --checkpoint best.ckpt --source data/shapes --split holdout

Captioning prints corpus BLEU-1…4 and CIDEr-D on the coco-caption conventions (×100, see
`seqtasks.metrics.captioning`), METEOR when pycocoevalcap and Java are there, and on the shapes
world exact match, truthfulness and the attention hit rate (`seqtasks.metrics.shapes`). With
--nearest-neighbour it also scores the baseline that gives each image the first training caption
of the training image whose pooled backbone feature is most similar (cosine). With --json the
last line is one JSON object: bleu1…bleu4, cider, meteor, images, images_unreadable, … An image
that cannot be read is named on stderr and the others are scored: the first line of the report
then says that the scores cover only part of the split, and the exit status is 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

import torch

from seqtasks.cli.arguments import non_negative_int, positive_int, text_file
from seqtasks.data.captions import (
    TEST_IMAGES,
    VAL_IMAGES,
    CaptionedImage,
    load_images,
    read_captions,
)
from seqtasks.data.text import read_parallel
from seqtasks.io.checkpoint_files import CheckpointError, load_task, resolve_device
from seqtasks.io.files import write_atomic
from seqtasks.io.plots import plot_bleu_by_length
from seqtasks.metrics import parseval
from seqtasks.metrics.bleu import bleu_by_source_length, score_corpus
from seqtasks.metrics.captioning import score_captions
from seqtasks.metrics.shapes import judge, summarise
from seqtasks.parsing.linearisation import XX
from seqtasks.parsing.trees import NONE_TAG, TreebankError, read_treebank, to_line
from seqtasks.tasks.captioning import CaptioningTask
from seqtasks.tasks.parsing import ParsingTask
from seqtasks.tasks.translation import TranslationTask


def output_paths(output: Path, checkpoints: list[Path]) -> list[Path]:
    """Where each checkpoint's translations go: `output` itself for one checkpoint; for several,
    `output` with the checkpoint's name before its suffix (hyp.txt -> hyp.best.txt), numbered by
    position when names repeat (two runs' last.ckpt: hyp.1-last.txt, hyp.2-last.txt)."""
    if len(checkpoints) == 1:
        return [output]
    stems = [path.stem for path in checkpoints]
    if len(set(stems)) < len(stems):
        stems = [f"{i}-{stem}" for i, stem in enumerate(stems, start=1)]
    return [output.with_name(f"{output.stem}.{stem}{output.suffix}") for stem in stems]


def evaluate_translation(args: argparse.Namespace) -> int:
    try:
        sources, references = read_parallel(args.src, args.ref)
        models = [
            (path, load_task(path, TranslationTask, "translation", args.device))
            for path in args.checkpoint
        ]
    except (CheckpointError, FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    stems = [path.stem for path, _ in models]
    unique = len(set(stems)) == len(stems)
    outputs = output_paths(args.output, args.checkpoint) if args.output else []
    reports, curves = [], {}
    for number, (path, model) in enumerate(models):
        results = model.translate(sources, beam_size=args.beam, max_tokens=args.max_tokens)
        hypotheses = [nbest[0].text for nbest in results]
        if outputs:
            write_atomic(outputs[number], "".join(h + "\n" for h in hypotheses))
        scores = score_corpus(hypotheses, references)
        lowercase = score_corpus(hypotheses, references, lowercase=True)
        buckets = bleu_by_source_length(sources, hypotheses, references, args.buckets)
        name = path.stem if unique else str(path)
        curves[name] = [(b.label, b.bleu) for b in buckets]
        print(f"== {path} (beam {args.beam}, {scores.sentences} sentences)")
        if outputs:
            print(f"translations written to {outputs[number]}")
        print(f"BLEU = {scores.bleu:.2f}   {scores.bleu_signature}")
        print(f"chrF = {scores.chrf:.2f}   {scores.chrf_signature}")
        print(f"BLEU lower-cased = {lowercase.bleu:.2f}")
        print("source words   sentences   BLEU")
        for bucket in buckets:
            print(f"{bucket.label:>12}   {bucket.sentences:>9}   {bucket.bleu:5.2f}")
        reports.append(
            {
                "checkpoint": str(path),
                "bleu": scores.bleu,
                "chrf": scores.chrf,
                "signature": scores.bleu_signature,
                "chrf_signature": scores.chrf_signature,
                "bleu_lowercase": lowercase.bleu,
                "sentences": scores.sentences,
                "beam": args.beam,
                "by_length": [asdict(b) for b in buckets],
            }
            | ({"output": str(outputs[number])} if outputs else {})
        )
    if args.length_plot:
        print(f"plot: {plot_bleu_by_length(curves, args.length_plot)}")
    if args.json:
        print(json.dumps(reports[0] | {"models": reports}))
    return 0


def evaluate_parsing(args: argparse.Namespace) -> int:
    try:
        golds = read_treebank(args.gold)
        if args.pred:
            preds = read_treebank(args.pred)
            if len(preds) != len(golds):
                raise ValueError(
                    f"{args.gold} has {len(golds)} trees but {args.pred} has {len(preds)}"
                )
        else:
            model = load_task(args.checkpoint, ParsingTask, "parsing", args.device)
    except (CheckpointError, FileNotFoundError, TreebankError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    report: dict = {"gold_file": str(args.gold)}
    if args.pred:
        report["pred_file"] = str(args.pred)
        malformed = None
    else:
        words = [[w for w, t in gold.pos() if t != NONE_TAG] for gold in golds]
        parses = model.parse(words, beam_size=args.beam)
        preds = [p.tree for p in parses]
        malformed = 100.0 * sum(p.repairs > 0 for p in parses) / max(len(parses), 1)
        report |= {"checkpoint": str(args.checkpoint), "beam": args.beam}
        if args.output:
            write_atomic(args.output, "".join(to_line(t) + "\n" for t in preds))

    scores = parseval.score_corpus(golds, preds)
    buckets = parseval.f1_by_length(scores, args.buckets)
    tagged = any(tag != XX for tree in preds if tree is not None for _, tag in tree.pos())
    print(parseval.summary(scores, tagged))
    print(f"\nPreterminals written = {'POS tags' if tagged else 'XX (no tagging accuracy)'}")
    if malformed is not None:
        print(f"\nMalformed output (repaired) = {malformed:6.2f} %")
    print("\nsentence length   sentences      F1")
    for bucket in buckets:
        print(f"{bucket.label:>15}   {bucket.sentences:>9}   {bucket.f1:6.2f}")
    every, short = scores.all, scores.short
    report |= {
        "recall": every.recall,
        "precision": every.precision,
        "f1": every.f1,
        "complete_match": every.complete_match,
        "preterminals": "tags" if tagged else "XX",
        "tagging_accuracy": every.tagging_accuracy if tagged else None,
        "matched": every.matched,
        "gold": every.gold,
        "test": every.test,
        "sentences": every.sentences,
        "valid": every.valid,
        "errors": every.errors,
        "skipped": every.skipped,
        "recall_le40": short.recall,
        "precision_le40": short.precision,
        "f1_le40": short.f1,
        "complete_match_le40": short.complete_match,
        "sentences_le40": short.sentences,
        "malformed": malformed,
        "by_length": [asdict(b) for b in buckets],
    }
    if args.json:
        print(json.dumps(report))
    return 0


def read_images(
    model: CaptioningTask, images: list[CaptionedImage]
) -> tuple[list[CaptionedImage], torch.Tensor | None, dict[Path, str]]:
    """The `images` that can be read, (B, 3, S, S) their pixels at the model's image size (None
    if there are none), and for each image that cannot be read, a message naming it."""
    readable, pixels, errors = load_images([image.path for image in images], model.image_size)
    return [images[i] for i in readable], pixels, {images[i].path: e for i, e in errors.items()}


@torch.no_grad()
def nearest_neighbour(
    model: CaptioningTask, train: list[CaptionedImage], test: list[CaptionedImage], batch: int
) -> list[str]:
    """For each test image, the first caption of the training image whose pooled backbone
    feature (the feature map averaged over the grid) is most similar by cosine. Training images
    that cannot be read are left out of the candidates, with a warning naming each."""

    def pooled(images: list[CaptionedImage]) -> tuple[list[CaptionedImage], torch.Tensor]:
        kept, features = [], []
        for start in range(0, len(images), batch):
            readable, pixels, errors = read_images(model, images[start : start + batch])
            for error in errors.values():
                print(f"warning: nearest-neighbour baseline: {error}; left out", file=sys.stderr)
            if pixels is not None:
                kept += readable
                features.append(model.encoder.extract(pixels.to(model.device)).mean((2, 3)))
        if not kept:
            raise ValueError("none of the training images can be read for the baseline")
        return kept, torch.nn.functional.normalize(torch.cat(features), dim=-1)  # (N, C)

    candidates, train_features = pooled(train)
    _, test_features = pooled(test)
    nearest = (test_features @ train_features.T).argmax(dim=1).tolist()
    return [candidates[j].captions[0] for j in nearest]


def evaluate_captioning(args: argparse.Namespace) -> int:
    """Score the captions of every image of the split that can be read. An image that cannot
    is named on stderr and left out: the scores then cover only the rest, which the report says
    on its first line and in its JSON (`images_unreadable`), and the exit status is 1."""
    try:
        model = load_task(args.checkpoint, CaptioningTask, "captioning", args.device)
        splits = read_captions(args.source, args.image_dir, args.val_images, args.test_images)
        if args.split not in splits:
            raise ValueError(f"{args.source} has no split '{args.split}' (it has {sorted(splits)})")
        if args.nearest_neighbour and "train" not in splits:
            raise ValueError(f"{args.source} has no training split for the baseline")
    except (CheckpointError, OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    split = splits[args.split]
    shapes = all(image.scene is not None for image in split)
    images, captions, unreadable = [], [], {}
    for start in range(0, len(split), args.batch_size):
        readable, pixels, errors = read_images(model, split[start : start + args.batch_size])
        for error in errors.values():
            print(f"error: {error}", file=sys.stderr)
        unreadable |= errors
        if pixels is not None:
            images += readable
            captions += model.caption(pixels, args.beam, return_attention=shapes)
    if not images:
        print(f"error: none of the {len(split)} images of the split can be read", file=sys.stderr)
        return 2
    baseline = None
    if args.nearest_neighbour:
        try:
            baseline = nearest_neighbour(model, splits["train"], images, args.batch_size)
        except ValueError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2

    references = [image.captions for image in images]
    scores = score_captions([c.text for c in captions], references, with_meteor=args.meteor)
    report = {"checkpoint": str(args.checkpoint), "split": args.split, "beam": args.beam}
    report |= asdict(scores)
    report["images_unreadable"] = [str(path) for path in unreadable]
    if unreadable:
        warning = (
            f"WARNING: scores over {len(images)} of the {len(split)} images of the split: "
            f"{len(unreadable)} could not be read (named on stderr). Do not compare them with "
            "scores over the whole split."
        )
        print(warning)
        print(warning, file=sys.stderr)
    print(f"== {args.checkpoint} on {args.source}, {args.split} split, beam {args.beam}")
    print(f"images = {scores.images}" + (f" of {len(split)}" if unreadable else ""))
    for n in range(1, 5):
        print(f"BLEU-{n} = {getattr(scores, f'bleu{n}'):.2f}")
    print(f"CIDEr-D = {scores.cider:.2f}")
    if args.meteor:
        meteor = (
            "not computed (needs pycocoevalcap and Java)"
            if scores.meteor is None
            else f"{scores.meteor:.2f}"
        )
        print(f"METEOR = {meteor}")
    if shapes:
        judged = summarise(
            [
                judge(c.words, image.captions, image.scene, c.attention, c.grid)
                for c, image in zip(captions, images)
            ]
        )
        report |= judged
        for name, value in judged.items():
            print(f"{name.replace('_', ' ')} = {value:.2f} %")
    if baseline is not None:
        nn_scores = score_captions(baseline, references)
        report["nearest_neighbour"] = asdict(nn_scores)
        print(f"nearest-neighbour baseline: BLEU-4 = {nn_scores.bleu4:.2f}")
        print(f"nearest-neighbour baseline: CIDEr-D = {nn_scores.cider:.2f}")
    if args.output:
        captioned = {image.path: caption.text for image, caption in zip(images, captions)}
        lines = [
            json.dumps(
                {"image": str(i.path), "caption": captioned[i.path]}
                if i.path in captioned
                else {"image": str(i.path), "error": unreadable[i.path]}
            )
            for i in split
        ]
        write_atomic(args.output, "".join(line + "\n" for line in lines))
    if args.json:
        print(json.dumps(report))
    return 1 if unreadable else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    tasks = parser.add_subparsers(dest="task", required=True)
    translation = tasks.add_parser("translation", help="sacreBLEU, chrF, BLEU by length")
    translation.add_argument("--checkpoint", required=True, nargs="+", type=Path)
    translation.add_argument("--src", required=True, type=text_file)
    translation.add_argument("--ref", required=True, type=text_file)
    translation.add_argument("--beam", type=positive_int, default=5)
    translation.add_argument("--max-tokens", type=positive_int, default=2000)
    translation.add_argument(
        "--buckets",
        type=positive_int,
        nargs="+",
        default=[10, 20, 30],
        help="upper bounds of the source-length buckets, in words",
    )
    translation.add_argument("--length-plot", type=Path, help="save BLEU by length as a PNG")
    translation.add_argument("--output", type=Path, help="write the translations here")
    translation.add_argument("--device", default="auto")
    translation.add_argument("--json", action="store_true")

    parsing = tasks.add_parser("parsing", help="EVALB bracket scores (COLLINS.prm)")
    parsing.add_argument("--gold", required=True, type=Path, help="gold trees")
    source = parsing.add_mutually_exclusive_group(required=True)
    source.add_argument("--pred", type=Path, help="predicted trees, aligned with --gold")
    source.add_argument("--checkpoint", type=Path, help="a parser to run on the gold words")
    parsing.add_argument("--beam", type=positive_int, default=10)
    parsing.add_argument(
        "--buckets",
        type=positive_int,
        nargs="+",
        default=[10, 20, 30, 40],
        help="upper bounds of the sentence-length buckets, in words",
    )
    parsing.add_argument("--output", type=Path, help="write the checkpoint's trees here")
    parsing.add_argument("--device", default="auto")
    parsing.add_argument("--json", action="store_true")

    captioning = tasks.add_parser("captioning", help="BLEU-1…4, CIDEr-D, METEOR; shapes scores")
    captioning.add_argument("--checkpoint", required=True, type=Path)
    captioning.add_argument(
        "--source", required=True, type=Path, help="a captions.txt folder or a Karpathy .json"
    )
    captioning.add_argument("--split", default="test")
    captioning.add_argument("--image-dir", type=Path, help="where the images are, if elsewhere")
    captioning.add_argument(
        "--val-images",
        type=non_negative_int,
        default=VAL_IMAGES,
        help="split sizes for a source without splits",
    )
    captioning.add_argument("--test-images", type=non_negative_int, default=TEST_IMAGES)
    captioning.add_argument("--beam", type=positive_int, default=3)
    captioning.add_argument("--batch-size", type=positive_int, default=32, help="images per batch")
    captioning.add_argument(
        "--no-meteor", dest="meteor", action="store_false", help="skip METEOR (Java, ~20 s)"
    )
    captioning.add_argument(
        "--nearest-neighbour", action="store_true", help="also score the nearest-neighbour baseline"
    )
    captioning.add_argument("--output", type=Path, help="write the captions here (JSON lines)")
    captioning.add_argument("--device", default="auto")
    captioning.add_argument("--json", action="store_true")

    args = parser.parse_args(argv)
    buckets = getattr(args, "buckets", None)
    if buckets is not None and buckets != sorted(set(buckets)):
        tasks.choices[args.task].error(
            f"argument --buckets: must increase, got {' '.join(map(str, buckets))}"
        )
    args.device = resolve_device(args.device)
    evaluate = {
        "translation": evaluate_translation,
        "parsing": evaluate_parsing,
        "captioning": evaluate_captioning,
    }[args.task]
    return evaluate(args)


if __name__ == "__main__":
    sys.exit(main())
