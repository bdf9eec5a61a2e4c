"""Predicted trees against gold ones: EVALB's summary (COLLINS.prm conventions,
`seqtasks.parsing.parseval`), F1 by sentence length, and what the trees' preterminals are."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from nltk import Tree

from seqtasks.parsing import parseval
from seqtasks.parsing.linearisation import XX


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
