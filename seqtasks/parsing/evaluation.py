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
from collections.abc import Callable
from pathlib import Path

from seqtasks.cli.arguments import Scored

RUN = ".report.evaluate"  # what scores, imported once the arguments are read
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
