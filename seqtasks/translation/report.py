"""A translation model on a parallel test set: sacreBLEU (cased, detokenised, 13a) with its
signature, chrF, the lower-cased BLEU some papers quote, exact match (what the dates task is
validated by), and BLEU by source length."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import seqtasks
from seqtasks.cli.arguments import given
from seqtasks.cli.report_progress import ReportProgress, counting_batches
from seqtasks.cli.reports import fail, json_line, write_outputs
from seqtasks.data.text import read_lines, read_parallel
from seqtasks.io.checkpoint_files import CheckpointError
from seqtasks.translation.bleu import BleuBucket, bleu_by_source_length, score_corpus


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


def translation_report(
    checkpoint: Path,
    hypotheses: Sequence[str],
    sources: Sequence[str],
    references: Sequence[str],
    beam: int,
    buckets: Sequence[int],
) -> dict[str, Any]:
    """The scores of `hypotheses` (a checkpoint's translations of `sources`); exact match is
    the % of them equal to their reference line, as validation counts it."""
    scores = score_corpus(hypotheses, references)
    exact = sum(h == r for h, r in zip(hypotheses, references, strict=True))
    lowercase = score_corpus(hypotheses, references, lowercase=True)
    by_length = bleu_by_source_length(sources, hypotheses, references, buckets)
    return {
        "checkpoint": str(checkpoint),
        "bleu": scores.bleu,
        "chrf": scores.chrf,
        "signature": scores.bleu_signature,
        "chrf_signature": scores.chrf_signature,
        "bleu_lowercase": lowercase.bleu,
        "exact_match": 100.0 * exact / max(len(hypotheses), 1),
        "sentences": scores.sentences,
        "beam": beam,
        "by_length": [asdict(b) for b in by_length],
    }


def translation_lines(report: dict[str, Any]) -> list[str]:
    """The report as printed."""
    if "hyp_file" in report:
        lines = [f"== {report['hyp_file']} (translations, {report['sentences']} sentences)"]
    else:
        lines = [
            f"== {report['checkpoint']} (beam {report['beam']}, {report['sentences']} sentences)"
        ]
    if "output" in report:
        lines.append(f"translations written to {report['output']}")
    lines += [
        f"BLEU = {report['bleu']:.2f}   {report['signature']}",
        f"chrF = {report['chrf']:.2f}   {report['chrf_signature']}",
        f"BLEU lower-cased = {report['bleu_lowercase']:.2f}",
        f"exact match = {report['exact_match']:.2f} %",
        "source words   sentences   BLEU",
    ]
    for bucket in (BleuBucket(**fields) for fields in report["by_length"]):
        lines.append(f"{bucket.label:>12}   {bucket.sentences:>9}   {bucket.bleu:5.2f}")
    return lines


def group_name(group: list[Path]) -> Path:
    """What the report names a model: its checkpoint, or the members joined by " + "."""
    return Path(" + ".join(map(str, group)))


def evaluate(args: argparse.Namespace) -> int:
    """Translate --src with each model and print its report (the progress on stderr)."""
    if args.hyp:
        return score_translations(args)
    search = given(beam=args.beam, stop=args.stop)
    try:
        progress = ReportProgress(f"evaluate {args.task}")
        sources, references = read_parallel(args.src, args.ref)
        models = []
        for group in args.groups:
            name = group_name(group)
            with progress.stage(f"loading {name}"):
                models.append((name, seqtasks.load(group, args.device, "translation")))
        settings = [model.search_settings(**search) for _, model in models]
    except (CheckpointError, FileNotFoundError, ValueError) as error:
        return fail(error)
    unique = len({path.stem for path, _ in models}) == len(models)
    outputs = output_paths(args.output, [path for path, _ in models]) if args.output else []
    reports, curves, written = [], {}, {}
    for number, ((path, model), setting) in enumerate(zip(models, settings)):
        count = len(sources)
        start = f"decoding {count:,} sentences with {path} (beam {setting.beam})"
        with progress.stage(start, count, "sentences") as stage:
            with counting_batches(model.task.encoder, stage):
                results = model.translate(sources, max_tokens=args.max_tokens, **search)
        hypotheses = [best.text for best in results]
        with progress.stage("scoring"):
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
        print(json_line(reports[0] | {"models": reports}))
    write_outputs(written)
    return 0


def score_translations(args: argparse.Namespace) -> int:
    """`evaluate translation --hyp FILE`: the report of a file of translations, as for a
    checkpoint's (without a beam)."""
    try:
        sources, references = read_parallel(args.src, args.ref)
        hypotheses = read_lines(args.hyp)
        if len(hypotheses) != len(sources):
            raise ValueError(
                f"{args.hyp} has {len(hypotheses)} lines but {args.src} has {len(sources)}: "
                "give the translations of --src, a line each"
            )
        progress = ReportProgress(f"evaluate {args.task}")
    except (FileNotFoundError, ValueError) as error:
        return fail(error)
    with progress.stage(f"scoring {len(hypotheses):,} translations"):
        report = translation_report(args.hyp, hypotheses, sources, references, None, args.buckets)
    report = {"hyp_file": report.pop("checkpoint"), **report}
    del report["beam"]
    print("\n".join(translation_lines(report)))
    if args.json:
        print(json_line(report))
    return 0
