"""Parsing prints EVALB's summary (COLLINS.prm conventions, see `seqtasks.parsing.parseval`) for
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

    seqtasks evaluate parsing --gold data/ptb/dev.mrg --pred predicted.mrg
    seqtasks evaluate parsing --checkpoint best.ckpt --gold data/ptb/dev.mrg --beam 10
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

import seqtasks
from seqtasks.cli.arguments import (
    Scored,
    given,
)
from seqtasks.cli.reports import fail, write_outputs

HELP = "EVALB bracket scores (COLLINS.prm)"
SCORED = Scored(
    "a parser to run on the gold words (a checkpoint, model folder or hf://ORG/NAME)",
    "--pred",
    Path,
    "predicted trees to score instead, aligned with --gold: a treebank file, or one tree a "
    "line with an empty line for a sentence not parsed (as seqtasks parse writes)",
)
BUCKETS = ([10, 20, 30, 40], "sentence")
OUTPUT = "write the checkpoint's trees here"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Its own options (`seqtasks.cli.evaluate` adds the shared ones)."""
    parser.add_argument("--gold", required=True, type=Path, help="gold trees (a treebank file)")


def check(args: argparse.Namespace, error: Callable[[str], None]) -> None:
    """Nothing beyond what the options say themselves."""


def inputs(args: argparse.Namespace) -> dict[str, list[Path] | Path | None]:
    return {"--checkpoint": args.checkpoint, "--gold": args.gold, "--pred": args.pred}


def outputs(args: argparse.Namespace) -> dict[str, list[Path] | Path | None]:
    return {"--output": args.output}


def evaluate(args: argparse.Namespace) -> int:
    from seqtasks.io.checkpoint_files import CheckpointError
    from seqtasks.parsing.report import parsing_report
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
