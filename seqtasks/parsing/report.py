"""Predicted trees against gold ones: EVALB's summary (COLLINS.prm conventions,
`seqtasks.parsing.parseval`), F1 by sentence length, and what the trees' preterminals are."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from nltk import Tree

import seqtasks
from seqtasks.cli.arguments import given
from seqtasks.cli.report_progress import ReportProgress, counting_batches
from seqtasks.cli.reports import fail, json_line, write_outputs
from seqtasks.io.checkpoint_files import CheckpointError
from seqtasks.parsing import parseval
from seqtasks.parsing.linearisation import XX
from seqtasks.parsing.trees import NONE_TAG, TreebankError, read_predicted, read_treebank, to_line


def parsing_report(
    golds: Sequence[Tree],
    preds: Sequence[Tree | None],
    buckets: Sequence[int],
    malformed: float | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """The scores of `preds` (None: a tree that could not be read), as data and as printed.
    The preterminals are those written (POS tags, or XX with no tagging accuracy);
    `malformed` is the % of a model's outputs that needed repair (None for a file)."""
    scores = parseval.score_corpus(golds, preds)
    by_length = parseval.f1_by_length(scores, buckets)
    tagged = any(tag != XX for tree in preds if tree is not None for _, tag in tree.pos())
    lines = [
        parseval.summary(scores, tagged),
        f"\nPreterminals written = {'POS tags' if tagged else 'XX (no tagging accuracy)'}",
    ]
    if malformed is not None:
        lines.append(f"\nMalformed output (repaired) = {malformed:6.2f} %")
    lines.append("\nsentence length   sentences      F1")
    lines += [f"{b.label:>15}   {b.sentences:>9}   {b.f1:6.2f}" for b in by_length]
    every, short = scores.all, scores.short
    report = {
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
        "by_length": [asdict(b) for b in by_length],
    }
    return report, lines


def evaluate(args: argparse.Namespace) -> int:
    """Score --pred, or the trees the model parses --gold's words into, against --gold (the
    progress on stderr)."""
    search = given(beam=args.beam, stop=args.stop)
    try:
        progress = ReportProgress(f"evaluate {args.task}")
        golds = read_treebank(args.gold)
        if not golds:
            raise ValueError(f"--gold {args.gold} holds no trees: nothing to score against")
        if args.pred:
            preds = read_predicted(args.pred, len(golds), str(args.gold))
        else:
            with progress.stage(f"loading {args.checkpoint}"):
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
        start = f"decoding {len(words):,} sentences with {args.checkpoint} (beam {settings.beam})"
        with progress.stage(start, len(words), "sentences") as stage:
            with counting_batches(model.task.encoder, stage):
                parses = model.parse(words, **search)
        preds = [p.tree for p in parses]
        malformed = 100.0 * sum(p.repairs > 0 for p in parses) / max(len(parses), 1)
        source |= {"checkpoint": str(args.checkpoint), "beam": settings.beam}
        source["stop"] = settings.stop
        print(f"== {args.checkpoint} on {args.gold} (beam {settings.beam}, {settings.stop} stop)")
    with progress.stage(f"scoring {len(preds):,} trees"):
        report, lines = parsing_report(golds, preds, args.buckets, malformed)
    print("\n".join(lines))
    if args.json:
        print(json_line(source | report))
    if args.output:
        write_outputs({args.output: "".join(to_line(t) + "\n" for t in preds)})
    return 0
