"""A translation model on a parallel test set: sacreBLEU (cased, detokenised, 13a) with its
signature, chrF, the lower-cased BLEU some papers quote, and BLEU by source length."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

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
    """The scores of `hypotheses` (a checkpoint's translations of `sources`)."""
    scores = score_corpus(hypotheses, references)
    lowercase = score_corpus(hypotheses, references, lowercase=True)
    by_length = bleu_by_source_length(sources, hypotheses, references, buckets)
    return {
        "checkpoint": str(checkpoint),
        "bleu": scores.bleu,
        "chrf": scores.chrf,
        "signature": scores.bleu_signature,
        "chrf_signature": scores.chrf_signature,
        "bleu_lowercase": lowercase.bleu,
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
        "source words   sentences   BLEU",
    ]
    for bucket in (BleuBucket(**fields) for fields in report["by_length"]):
        lines.append(f"{bucket.label:>12}   {bucket.sentences:>9}   {bucket.bleu:5.2f}")
    return lines
