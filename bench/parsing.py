"""Parsing speed of a checkpoint: sentences per second on a treebank split, greedy and beam.

    python bench/parsing.py --checkpoint CKPT [--gold data/ptb/dev.mrg] [--beams 1 10]
        [--threads 2] [--max-tokens 2000] [--json]

One process with --threads threads; the model is loaded once and warmed up on 20 sentences.
For each beam size every sentence of --gold (its words, traces left out) is parsed through
`seqtasks.parsing.parser.Parser.parse`, in length-sorted batches of at most --max-tokens padded
words, exactly as `apps/evaluate.py parsing --checkpoint` parses them; the time covers encoding,
constrained search and building the trees. Also reported: the F1 of those trees (EVALB, gold
tags) and their share of malformed (repaired) outputs. Run it on an otherwise idle machine; it
sets OMP_WAIT_POLICY=PASSIVE unless told otherwise. With --json the last line is one JSON
object.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402
from precision import PRECISIONS, inference_precision  # noqa: E402

import seqtasks  # noqa: E402
from seqtasks.io.checkpoint_files import CheckpointError  # noqa: E402
from seqtasks.parsing.parseval import score_corpus  # noqa: E402
from seqtasks.parsing.trees import NONE_TAG, TreebankError, read_treebank  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True, type=Path)
    p.add_argument("--gold", default="data/ptb/dev.mrg", type=Path)
    p.add_argument("--beams", type=int, nargs="+", default=[1, 10])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--max-tokens", type=int, default=2000, help="padded words per batch")
    p.add_argument(
        "--precision",
        default="32",
        choices=PRECISIONS,
        help="bf16: matrix products in bfloat16 (autocast)",
    )
    p.add_argument("--json", action="store_true", help="end with one JSON line")
    args = p.parse_args(argv)
    if min(args.beams) < 1 or args.threads < 1:
        p.error("need beams >= 1 and --threads >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    try:
        golds = read_treebank(args.gold)
        model = seqtasks.load(args.checkpoint, device="cpu", task="parsing")
    except (CheckpointError, FileNotFoundError, TreebankError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    leaves = [[(w, t) for w, t in g.pos() if t != NONE_TAG] for g in golds]
    words = [[w for w, _ in pairs] for pairs in leaves]
    tags = [[t for _, t in pairs] for pairs in leaves]
    n_words = sum(map(len, words))
    with inference_precision("cpu", args.precision):
        model.parse(words[:20], beam=max(args.beams), max_tokens=args.max_tokens)  # warm-up
    print(
        f"{args.checkpoint}: {len(words)} sentences, {n_words} words, {args.threads} threads, "
        f"precision {args.precision}"
    )
    print("beam   sentences/s   words/s      F1   malformed %")
    results = []
    for beam in args.beams:
        start = time.perf_counter()
        with inference_precision("cpu", args.precision):
            parses = model.parse(words, beam=beam, tags=tags, max_tokens=args.max_tokens)
        seconds = time.perf_counter() - start
        f1 = score_corpus(golds, [p.tree for p in parses]).all.f1
        malformed = 100.0 * sum(p.repairs > 0 for p in parses) / len(parses)
        results.append(
            {
                "beam": beam,
                "seconds": seconds,
                "sentences_per_s": len(words) / seconds,
                "words_per_s": n_words / seconds,
                "f1": f1,
                "malformed": malformed,
            }
        )
        print(
            f"{beam:>4}   {len(words) / seconds:11.1f}   {n_words / seconds:7.0f}   "
            f"{f1:6.2f}   {malformed:11.2f}"
        )
    if args.json:
        print(
            json.dumps(
                {
                    "checkpoint": str(args.checkpoint),
                    "threads": args.threads,
                    "precision": args.precision,
                    "results": results,
                }
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
