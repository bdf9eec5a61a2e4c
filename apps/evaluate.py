"""Score trained models the way their field does.

    python apps/evaluate.py translation --checkpoint best.ckpt \\
        --src data/multi30k/test_2016_flickr.de --ref data/multi30k/test_2016_flickr.en --beam 5
    python apps/evaluate.py translation --checkpoint attn.ckpt plain.ckpt --src … --ref … \\
        --length-plot bleu_by_length.png      # compare models by source length

Translation prints sacreBLEU (cased, detokenised, 13a) with its signature, chrF, the lower-cased
BLEU some papers report, and BLEU per source-length bucket (Bahdanau et al. 2015, Fig. 2).
With --json the last line is one JSON object (the first checkpoint's figures at top level,
every checkpoint's under "models").
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from seqtasks.checkpoints import CheckpointError, load_task, resolve_device
from seqtasks.data.text import read_parallel
from seqtasks.files import write_atomic
from seqtasks.metrics.bleu import bleu_by_source_length, score_corpus
from seqtasks.plots import plot_bleu_by_length
from seqtasks.tasks.translation import TranslationTask


def evaluate_translation(args: argparse.Namespace) -> int:
    try:
        sources, references = read_parallel(args.src, args.ref)
        models = [
            (path, load_task(path, TranslationTask, "translation", args.device))
            for path in args.checkpoint
        ]
    except (CheckpointError, FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    stems = [path.stem for path, _ in models]
    unique = len(set(stems)) == len(stems)
    reports, curves = [], {}
    for path, model in models:
        results = model.translate(sources, beam_size=args.beam, max_tokens=args.max_tokens)
        hypotheses = [nbest[0].text for nbest in results]
        if args.output:
            out = args.output if len(models) == 1 else args.output.with_suffix(f".{path.stem}")
            write_atomic(out, "".join(h + "\n" for h in hypotheses))
        scores = score_corpus(hypotheses, references)
        lowercase = score_corpus(hypotheses, references, lowercase=True)
        buckets = bleu_by_source_length(sources, hypotheses, references, args.buckets)
        name = path.stem if unique else str(path)
        curves[name] = [(b.label, b.bleu) for b in buckets]
        print(f"== {path} (beam {args.beam}, {scores.sentences} sentences)")
        print(f"BLEU = {scores.bleu:.2f}   {scores.bleu_signature}")
        print(f"chrF = {scores.chrf:.2f}   {scores.chrf_signature}")
        print(f"BLEU lower-cased = {lowercase.bleu:.2f}")
        print("source words   sentences   BLEU")
        for bucket in buckets:
            print(f"{bucket.label:>12}   {bucket.sentences:>9}   {bucket.bleu:5.2f}")
        reports.append(
            {
                "checkpoint": str(path),
                "bleu": scores.bleu,
                "chrf": scores.chrf,
                "signature": scores.bleu_signature,
                "chrf_signature": scores.chrf_signature,
                "bleu_lowercase": lowercase.bleu,
                "sentences": scores.sentences,
                "beam": args.beam,
                "by_length": [asdict(b) for b in buckets],
            }
        )
    if args.length_plot:
        print(f"plot: {plot_bleu_by_length(curves, args.length_plot)}")
    if args.json:
        print(json.dumps(reports[0] | {"models": reports}))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    tasks = parser.add_subparsers(dest="task", required=True)
    translation = tasks.add_parser("translation", help="sacreBLEU, chrF, BLEU by length")
    translation.add_argument("--checkpoint", required=True, nargs="+", type=Path)
    translation.add_argument("--src", required=True, type=Path)
    translation.add_argument("--ref", required=True, type=Path)
    translation.add_argument("--beam", type=int, default=5)
    translation.add_argument("--max-tokens", type=int, default=8000)
    translation.add_argument(
        "--buckets",
        type=int,
        nargs="+",
        default=[10, 20, 30],
        help="upper bounds of the source-length buckets, in words",
    )
    translation.add_argument("--length-plot", type=Path, help="save BLEU by length as a PNG")
    translation.add_argument("--output", type=Path, help="write the translations here")
    translation.add_argument("--device", default="auto")
    translation.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    args.device = resolve_device(args.device)
    return evaluate_translation(args)


if __name__ == "__main__":
    sys.exit(main())
