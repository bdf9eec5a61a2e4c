"""Translation prints sacreBLEU (cased, detokenised, 13a) with its signature, chrF, the
lower-cased BLEU some papers report, exact match (the % of translations equal to their
reference line: the dates task's validation metric), and BLEU per source-length bucket
(Bahdanau et al. 2015, Fig. 2). With --json the last line is one JSON object (the first
checkpoint's figures at top level, every checkpoint's under "models"; scores to 6 decimals).
With --ensemble the checkpoints are scored as one ensemble (their log-probabilities averaged
at every step; `seqtasks.load`). While it works it says how far it has got on stderr.

    seqtasks evaluate translation --checkpoint best.ckpt \\
        --src data/multi30k/test_2016_flickr.de --ref data/multi30k/test_2016_flickr.en --beam 5
    seqtasks evaluate translation --checkpoint attn.ckpt plain.ckpt --src … --ref … \\
        --length-plot bleu_by_length.png      # compare models by source length
    seqtasks evaluate translation --checkpoint a.ckpt b.ckpt c.ckpt --ensemble --src … --ref …
    seqtasks evaluate translation --hyp hyp.en --src … --ref …   # a file of translations
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from seqtasks.cli.arguments import Scored, add_max_tokens_option, text_file

RUN = ".report.evaluate"  # what scores, imported once the arguments are read
HELP = "sacreBLEU, chrF, exact match, BLEU by length"
SCORED = Scored(
    "checkpoints, model folders or hf://ORG/NAME models to translate --src with, each scored "
    "on its own (or, with --ensemble, as one)",
    "--hyp",
    text_file,
    "translations to score instead, a line each, aligned with --src (what seqtasks translate "
    "--output, or --output here, wrote)",
    several=True,
)
BUCKETS = ([10, 20, 30], "source")
OUTPUT = "write the translations here"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Its own options (`seqtasks.cli.evaluate` adds the shared ones)."""
    parser.add_argument(
        "--src", required=True, type=text_file, help="the sources, one sentence a line"
    )
    parser.add_argument(
        "--ref", required=True, type=text_file, help="the reference translations, aligned"
    )
    add_max_tokens_option(parser)
    parser.add_argument(
        "--ensemble", action="store_true", help="score the checkpoints as one ensemble"
    )
    parser.add_argument("--length-plot", type=Path, help="save BLEU by length as a PNG")


def check(args: argparse.Namespace, error: Callable[[str], None]) -> None:
    """Set `args.groups`, the checkpoints of each model to score: each on its own, or all as
    one ensemble (none when a --hyp file is scored); refuse what --hyp cannot do."""
    if args.checkpoint is None:
        args.groups = []
    else:
        args.groups = [args.checkpoint] if args.ensemble else [[p] for p in args.checkpoint]
    if args.hyp and (args.output or args.ensemble or args.length_plot):
        error(
            "argument --hyp: scores a file of translations; --output, --ensemble and "
            "--length-plot are for --checkpoint"
        )


def inputs(args: argparse.Namespace) -> dict[str, list[Path] | Path | None]:
    return {
        "--checkpoint": args.checkpoint,
        "--src": args.src,
        "--ref": args.ref,
        "--hyp": args.hyp,
    }


def outputs(args: argparse.Namespace) -> dict[str, list[Path] | Path | None]:
    from seqtasks.translation.report import group_name, output_paths  # sacrebleu: after parsing

    names = [group_name(group) for group in args.groups]
    written = output_paths(args.output, names) if args.output else None
    return {"--output": written, "--length-plot": args.length_plot}
