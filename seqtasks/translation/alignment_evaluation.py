"""Word alignments scored against gold ones: alignment error rate, precision and recall with
sure and possible links (Och & Ney 2003), of a translation model's attention over given
sentence pairs (the decoder reads --tgt by teacher forcing and each target word is linked to the
source word it attends to most, its subwords' attention summed: `Translator.align`; the
cross-attention of --alignment-layer averaged over --alignment-heads, by default Garg et al.'s
penultimate layer and all its heads), or of a file of alignments. Alignments are in the
Pharaoh format, a sentence a line: `i-j` links source word i to target word j, counted from
0, words split at white space; gold files mark possible links `i?j` or `ipj` (every sure link
is also possible). With --json the last line is one JSON object (fractions to 6 decimals, and
the counts).

    seqtasks evaluate alignment --checkpoint best.ckpt --src test.de --tgt test.en \\
        --gold test.align --output model.align
    seqtasks evaluate alignment --alignments model.align --gold test.align
    seqtasks evaluate alignment --checkpoint best.ckpt --src test.de --tgt test.en \\
        --gold test.align --alignment-layer -1 --alignment-heads 0,3
    seqtasks evaluate alignment --checkpoint dates.ckpt --src data/dates/test.text \
        --tgt data/dates/test.iso --gold data/dates/test.align --target-units pieces
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from seqtasks.cli.arguments import Scored, text_file
from seqtasks.cli.attention_options import add_alignment_options

RUN = ".alignment_report.evaluate"  # what scores, imported once the arguments are read
HELP = "alignment error rate, precision and recall of attention's word alignments"
SCORED = Scored(
    "a checkpoint, model folder or hf://ORG/NAME whose attention aligns --src with --tgt",
    "--alignments",
    text_file,
    "alignments to score instead, in the Pharaoh format, a line each, aligned with --gold "
    "(what --output here wrote)",
)
OUTPUT = "write the model's alignments here, in the Pharaoh format"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Its own options (`seqtasks.cli.evaluate` adds the shared ones)."""
    parser.add_argument(
        "--gold", required=True, type=text_file, help="the gold alignments, a line each"
    )
    parser.add_argument("--src", type=text_file, help="the sources, one sentence a line")
    parser.add_argument(
        "--tgt", type=text_file, help="their translations, aligned: what the model aligns"
    )
    add_alignment_options(parser)


def check(args: argparse.Namespace, error: Callable[[str], None]) -> None:
    """A model aligns --src with --tgt; a file of alignments takes neither; no search runs."""
    if args.checkpoint is not None and (args.src is None or args.tgt is None):
        error("argument --checkpoint: give --src and --tgt, the sentence pairs to align")
    chosen = args.alignment_layer is not None or args.alignment_heads is not None
    if args.alignments is not None and (args.src or args.tgt or args.output or chosen):
        error(
            "argument --alignments: scores a file of alignments; --src, --tgt, --output and "
            "--alignment-layer/--alignment-heads are for --checkpoint"
        )
    if args.beam is not None or args.stop is not None:
        error(
            "argument --beam/--stop: alignments are read while the model reads --tgt, "
            "not from a search"
        )


def inputs(args: argparse.Namespace) -> dict[str, list[Path] | Path | None]:
    return {
        "--checkpoint": args.checkpoint,
        "--src": args.src,
        "--tgt": args.tgt,
        "--gold": args.gold,
        "--alignments": args.alignments,
    }


def outputs(args: argparse.Namespace) -> dict[str, list[Path] | Path | None]:
    return {"--output": args.output}
