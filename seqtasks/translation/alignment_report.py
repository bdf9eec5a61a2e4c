"""`seqtasks evaluate alignment`: a translation model's word alignments of given sentence pairs
(or a file of alignments) against gold ones, by alignment error rate, precision and recall."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path
from typing import Any

import seqtasks
from seqtasks.cli.report_progress import ReportProgress
from seqtasks.cli.reports import fail, json_line, write_outputs
from seqtasks.data.text import read_lines, read_parallel
from seqtasks.io.checkpoint_files import CheckpointError
from seqtasks.translation.alignment import (
    GoldAlignment,
    Link,
    read_links,
    score_alignments,
    write_links,
)


def read_alignments(path: Path) -> list[GoldAlignment]:
    """A Pharaoh file, a line a sentence; a ValueError naming the file and line of an item that
    is not a link."""
    return [read_links(line, f"{path}:{n}") for n, line in enumerate(read_lines(path), start=1)]


def evaluate(args: argparse.Namespace) -> int:
    """Align --src with --tgt by the model (or read --alignments), score against --gold and
    print the report (the progress on stderr)."""
    try:
        gold = read_alignments(args.gold)
        progress = ReportProgress("evaluate alignment")
        if args.alignments is not None:
            predicted: list[set[Link]] = [set(a.possible) for a in read_alignments(args.alignments)]
            named = {"alignments_file": str(args.alignments)}
        else:
            sources, targets = read_parallel(args.src, args.tgt)
            with progress.stage(f"loading {args.checkpoint}"):
                model = seqtasks.load(args.checkpoint, args.device, "translation")
            with progress.stage(f"aligning {len(sources):,} sentence pairs"):
                found = model.align(
                    sources,
                    targets,
                    target_units=args.target_units,
                    layer=args.alignment_layer,
                    heads=args.alignment_heads,
                )
                predicted = [set(a.links) for a in found]
            named = {
                "checkpoint": str(args.checkpoint),
                "alignment_layer": args.alignment_layer,  # None: the penultimate (Garg et al.)
                "alignment_heads": args.alignment_heads,  # None: all
            }
        if len(predicted) != len(gold):
            given = args.alignments or args.src
            raise ValueError(
                f"{args.gold} has {len(gold)} lines but {given} has {len(predicted)}: give the "
                "gold alignment of each sentence pair, a line each"
            )
        scores = score_alignments(predicted, gold)
    except (CheckpointError, FileNotFoundError, IndexError, ValueError) as error:
        return fail(error)
    report: dict[str, Any] = named | {"gold": str(args.gold)} | asdict(scores)
    if args.output:
        report["output"] = str(args.output)
    print("\n".join(report_lines(report)))
    if args.json:
        print(json_line(report))
    if args.output:
        write_outputs({args.output: "".join(write_links(p) + "\n" for p in predicted)})
    return 0


def report_lines(report: dict[str, Any]) -> list[str]:
    """The report as printed."""
    scored = report.get("checkpoint") or report["alignments_file"]
    lines = [f"== {scored} against {report['gold']} ({report['sentences']} sentence pairs)"]
    if "checkpoint" in report:
        layer, heads = report["alignment_layer"], report["alignment_heads"]
        where = "the penultimate layer (Garg et al. 2019)" if layer is None else f"layer {layer}"
        if heads is None:
            which = "all heads averaged"
        elif len(heads) == 1:
            which = f"head {heads[0]}"
        else:
            which = f"heads {','.join(map(str, heads))} averaged"
        lines.append(f"read from the cross-attention of {where}, {which}")
    if "output" in report:
        lines.append(f"alignments written to {report['output']}")
    return lines + [
        f"AER = {report['aer']:.2f}   precision = {report['precision']:.2f}   "
        f"recall = {report['recall']:.2f}",
        f"links: {report['predicted']} predicted, {report['sure']} sure and "
        f"{report['possible']} possible in the gold",
    ]
