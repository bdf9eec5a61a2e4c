"""Translation prints sacreBLEU (cased, detokenised, 13a) with its signature, chrF, the
lower-cased BLEU some papers report, and BLEU per source-length bucket (Bahdanau et al. 2015,
Fig. 2). With --json the last line is one JSON object (the first checkpoint's figures at top
level, every checkpoint's under "models"). With --ensemble the checkpoints are scored as one
ensemble (their log-probabilities averaged at every step; `seqtasks.load`).

    seqtasks evaluate translation --checkpoint best.ckpt \\
        --src data/multi30k/test_2016_flickr.de --ref data/multi30k/test_2016_flickr.en --beam 5
    seqtasks evaluate translation --checkpoint attn.ckpt plain.ckpt --src … --ref … \\
        --length-plot bleu_by_length.png      # compare models by source length
    seqtasks evaluate translation --checkpoint a.ckpt b.ckpt c.ckpt --ensemble --src … --ref …
    seqtasks evaluate translation --hyp hyp.en --src … --ref …   # a file of translations
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

import seqtasks
from seqtasks.cli.arguments import (
    Scored,
    add_max_tokens_option,
    given,
    text_file,
)
from seqtasks.cli.reports import fail, write_outputs
from seqtasks.data.text import read_parallel

HELP = "sacreBLEU, chrF, BLEU by length"
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


def group_name(group: list[Path]) -> Path:
    """What the report names a model: its checkpoint, or the members joined by " + "."""
    return Path(" + ".join(map(str, group)))


def inputs(args: argparse.Namespace) -> dict[str, list[Path] | Path | None]:
    return {
        "--checkpoint": args.checkpoint,
        "--src": args.src,
        "--ref": args.ref,
        "--hyp": args.hyp,
    }


def outputs(args: argparse.Namespace) -> dict[str, list[Path] | Path | None]:
    from seqtasks.translation.report import output_paths  # sacrebleu: after parsing

    names = [group_name(group) for group in args.groups]
    written = output_paths(args.output, names) if args.output else None
    return {"--output": written, "--length-plot": args.length_plot}


def evaluate(args: argparse.Namespace) -> int:
    from seqtasks.io.checkpoint_files import CheckpointError
    from seqtasks.translation.bleu import BleuBucket
    from seqtasks.translation.report import output_paths, translation_lines, translation_report

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


def score_translations(args: argparse.Namespace) -> int:
    """`evaluate translation --hyp FILE`: the report of a file of translations, as for a
    checkpoint's (without a beam)."""
    from seqtasks.data.text import read_lines
    from seqtasks.translation.report import translation_lines, translation_report

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
