"""Score trained models the way their field does.

    seqtasks evaluate translation --checkpoint best.ckpt \\
        --src data/multi30k/test_2016_flickr.de --ref data/multi30k/test_2016_flickr.en --beam 5
    seqtasks evaluate translation --checkpoint attn.ckpt plain.ckpt --src … --ref … \\
        --length-plot bleu_by_length.png      # compare models by source length
    seqtasks evaluate translation --checkpoint a.ckpt b.ckpt c.ckpt --ensemble --src … --ref …
    seqtasks evaluate translation --hyp hyp.en --src … --ref …   # a file of translations

Translation prints sacreBLEU (cased, detokenised, 13a) with its signature, chrF, the lower-cased
BLEU some papers report, and BLEU per source-length bucket (Bahdanau et al. 2015, Fig. 2).
With --json the last line is one JSON object (the first checkpoint's figures at top level,
every checkpoint's under "models"). With --ensemble the checkpoints are scored as one ensemble
(their log-probabilities averaged at every step; `seqtasks.load`).

    seqtasks evaluate parsing --gold data/ptb/dev.mrg --pred predicted.mrg
    seqtasks evaluate parsing --checkpoint best.ckpt --gold data/ptb/dev.mrg --beam 10

Parsing prints EVALB's summary (COLLINS.prm conventions, see `seqtasks.metrics.parseval`) for
a file of predicted trees (one per line or spread over lines; in a file of one tree a line, an
empty line is a sentence not parsed, as `seqtasks parse` writes one, counted as EVALB counts a
sentence it cannot score: an error sentence), or for a checkpoint, with its beam, that parses
the gold trees' words (traces left out), with the preterminals the model writes: POS tags, or
XX as in Vinyals et al. The punctuation EVALB deletes is decided by the gold tags, so the
brackets score the same either way, and the report says which it was (tagging accuracy only
for tags). Then F1 by sentence length and, for a checkpoint, the share of outputs that had to
be repaired (`malformed`, 0 with constrained decoding). With --json the last line is one JSON
object: recall, precision, f1, f1_le40, complete_match, preterminals, matched, gold, test
(bracket counts), sentences, errors, …

    seqtasks evaluate captioning --checkpoint best.ckpt --source data/flickr8k --split test
    seqtasks evaluate captioning --checkpoint best.ckpt --source data/shapes --split holdout
    seqtasks evaluate captioning --pred captions.jsonl --source data/flickr8k --split test

Captioning prints corpus BLEU-1…4 and CIDEr-D on the coco-caption conventions (×100, see
`seqtasks.metrics.captioning`), METEOR when pycocoevalcap and Java are there, and on the shapes
world exact match, truthfulness and the attention hit rate (`seqtasks.metrics.shapes`). With
--nearest-neighbour it also scores the baseline that gives each image the first training caption
of the training image whose pooled backbone feature is most similar (cosine). With --json the
last line is one JSON object: bleu1…bleu4, cider, meteor, images, images_unreadable, … An image
that cannot be read is named on stderr and the others are scored: the first line of the report
then says that the scores cover only part of the split, and the exit status is 1. With --pred
the captions are those of a file that `seqtasks caption` (or --output here) wrote, a record an
image; an image it could not read counts as above, one it has no record of is refused (the
attention hit rate needs the model's attention, so it is left out).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import seqtasks
from seqtasks.cli.arguments import given
from seqtasks.cli.streams import require_stdout
from seqtasks.data.text import read_parallel
from seqtasks.evaluation.arguments import group_name, parse_args
from seqtasks.io.files import write_atomic

# Each task's evaluation imports what needs torch, nltk or sacrebleu where it starts, once the
# arguments are parsed (`seqtasks.commands`).


def fail(error: Exception | str) -> int:
    """Say what is wrong on stderr; the status of a failed run."""
    print(f"error: {error}", file=sys.stderr)
    return 2


def evaluate_translation(args: argparse.Namespace) -> int:
    from seqtasks.evaluation.translation import output_paths, translation_lines, translation_report
    from seqtasks.io.checkpoint_files import CheckpointError
    from seqtasks.metrics.bleu import BleuBucket

    if args.hyp:
        return score_translations(args)
    search = given(beam=args.beam, stop=args.stop)
    try:
        sources, references = read_parallel(args.src, args.ref)
        models = [
            (group_name(group), seqtasks.load(group, args.device, "translation"))
            for group in args.groups
        ]
        settings = [model.search_settings(**search) for _, model in models]
    except (CheckpointError, FileNotFoundError, ValueError) as error:
        return fail(error)
    unique = len({path.stem for path, _ in models}) == len(models)
    outputs = output_paths(args.output, [path for path, _ in models]) if args.output else []
    reports, curves, written = [], {}, {}
    for number, ((path, model), setting) in enumerate(zip(models, settings)):
        results = model.translate(sources, max_tokens=args.max_tokens, **search)
        hypotheses = [best.text for best in results]
        report = translation_report(
            path, hypotheses, sources, references, setting.beam, args.buckets
        )
        report["stop"] = setting.stop
        if outputs:
            written[outputs[number]] = "".join(h + "\n" for h in hypotheses)
            report["output"] = str(outputs[number])
        print("\n".join(translation_lines(report)))
        reports.append(report)
        name = path.stem if unique else str(path)
        curves[name] = [(BleuBucket(**b).label, b["bleu"]) for b in report["by_length"]]
    if args.length_plot:
        from seqtasks.io.plots import plot_bleu_by_length

        print(f"plot: {plot_bleu_by_length(curves, args.length_plot)}")
    if args.json:
        print(json.dumps(reports[0] | {"models": reports}))
    write_outputs(written)
    return 0


def write_outputs(outputs: dict[Path, str]) -> None:
    """Write each file of `outputs` (whole or not at all), once the report is printed: a file
    that cannot be written (a full disk) then costs the file, not the scores, and ends the
    command with one line naming it (`seqtasks.cli.streams`)."""
    for path, text in outputs.items():
        write_atomic(path, text)


def score_translations(args: argparse.Namespace) -> int:
    """`evaluate translation --hyp FILE`: the report of a file of translations, as for a
    checkpoint's (without a beam)."""
    from seqtasks.data.text import read_lines
    from seqtasks.evaluation.translation import translation_lines, translation_report

    try:
        sources, references = read_parallel(args.src, args.ref)
        hypotheses = read_lines(args.hyp)
        if len(hypotheses) != len(sources):
            raise ValueError(
                f"{args.hyp} has {len(hypotheses)} lines but {args.src} has {len(sources)}: "
                "give the translations of --src, a line each"
            )
    except (FileNotFoundError, ValueError) as error:
        return fail(error)
    report = translation_report(args.hyp, hypotheses, sources, references, None, args.buckets)
    report = {"hyp_file": report.pop("checkpoint"), **report}
    del report["beam"]
    print("\n".join(translation_lines(report)))
    if args.json:
        print(json.dumps(report))
    return 0


def evaluate_parsing(args: argparse.Namespace) -> int:
    from seqtasks.evaluation.parsing import parsing_report
    from seqtasks.io.checkpoint_files import CheckpointError
    from seqtasks.parsing.trees import (
        NONE_TAG,
        TreebankError,
        read_predicted,
        read_treebank,
        to_line,
    )

    search = given(beam=args.beam, stop=args.stop)
    try:
        golds = read_treebank(args.gold)
        if not golds:
            raise ValueError(f"--gold {args.gold} holds no trees: nothing to score against")
        if args.pred:
            preds = read_predicted(args.pred, len(golds), str(args.gold))
        else:
            model = seqtasks.load(args.checkpoint, args.device, task="parsing")
            settings = model.search_settings(**search)
    except (CheckpointError, FileNotFoundError, TreebankError, ValueError) as error:
        return fail(error)
    source: dict = {"gold_file": str(args.gold)}
    malformed = None
    if args.pred:
        source["pred_file"] = str(args.pred)
        source["not_parsed"] = sum(tree is None for tree in preds)
        print(f"== {args.pred} against {args.gold}")
        if source["not_parsed"]:
            print(
                f"{source['not_parsed']} sentences not parsed (empty lines): error sentences, "
                "as EVALB counts a sentence it cannot score"
            )
    else:
        words = [[w for w, t in gold.pos() if t != NONE_TAG] for gold in golds]
        parses = model.parse(words, **search)
        preds = [p.tree for p in parses]
        malformed = 100.0 * sum(p.repairs > 0 for p in parses) / max(len(parses), 1)
        source |= {"checkpoint": str(args.checkpoint), "beam": settings.beam}
        source["stop"] = settings.stop
        print(f"== {args.checkpoint} on {args.gold} (beam {settings.beam}, {settings.stop} stop)")
    report, lines = parsing_report(golds, preds, args.buckets, malformed)
    print("\n".join(lines))
    if args.json:
        print(json.dumps(source | report))
    if args.output:
        write_outputs({args.output: "".join(to_line(t) + "\n" for t in preds)})
    return 0


def evaluate_captioning(args: argparse.Namespace) -> int:
    """Score the captions of every image of the split that can be read. An image that cannot
    is named on stderr and left out: the scores then cover only the rest, which the report says
    on its first line and in its JSON (`images_unreadable`), and the exit status is 1."""
    from seqtasks.data.captions import read_captions
    from seqtasks.evaluation.captioning import (
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
        shapes = all(image.scene is not None for image in split)
        images, captions, unreadable = caption_images(
            model, split, args.batch_size, settings.beam, shapes, fail, settings.stop
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


def main(argv: list[str] | None = None) -> int:
    """Score as the task asks; 0, 1 for scores over part of a captioning split, 2 for an
    input, checkpoint or setting that will not do."""
    args = parse_args(argv, __doc__.split("\n\n")[0])
    require_stdout(None)  # the report
    evaluate = {
        "translation": evaluate_translation,
        "parsing": evaluate_parsing,
        "captioning": evaluate_captioning,
    }[args.task]
    return evaluate(args)
