"""What `attention="all"` costs against a plain translation of the same sentence: nothing asked
(the fused kernels), `attention=True` (the search keeps its cross-attention), and "all" (every
attention by layer and head, read by one more teacher-forced pass with every module recording).

    python bench/every_attention.py --checkpoint CKPT [--words 30] [--beam 5] [--repeats 5]
        [--threads 2] [--json]

One process on the CPU. The sentence is the first line of Multi30k's German training text
with at least --words words (or, when none is that long, consecutive lines joined up to
--words). Each way is timed --repeats times, interleaved, and the fastest taken; the issue's
bar is "all" ≤ 2× plain.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

import seqtasks  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def sentence_of(path: Path, words: int) -> str:
    """The first line of at least `words` words, else consecutive lines joined to `words`."""
    lines = path.read_text(encoding="utf-8").splitlines()
    for line in lines:
        if len(line.split()) >= words:
            return " ".join(line.split()[:words])
    joined: list[str] = []
    for line in lines:
        joined += line.split()
        if len(joined) >= words:
            return " ".join(joined[:words])
    raise ValueError(f"{path} has fewer than {words} words")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--source", type=Path, default=ROOT / "data/multi30k/train.de")
    parser.add_argument("--words", type=int, default=30)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = seqtasks.load(args.checkpoint, device="cpu")
    sentence = sentence_of(args.source, args.words)
    ways = {"plain": False, "attention": True, "all": "all"}
    seconds: dict[str, list[float]] = {name: [] for name in ways}
    for asked in ways.values():  # warm-up
        model.translate([sentence], beam=args.beam, attention=asked)
    for _ in range(args.repeats):
        for name, asked in ways.items():
            start = time.perf_counter()
            (found,) = model.translate([sentence], beam=args.beam, attention=asked)
            seconds[name].append(time.perf_counter() - start)
    best = {name: min(times) for name, times in seconds.items()}
    report = {
        "words": len(sentence.split()),
        "output_pieces": len(found.tokens),
        "beam": args.beam,
        "threads": args.threads,
        **{f"{name}_s": round(value, 4) for name, value in best.items()},
        **{f"{name}_ratio": round(best[name] / best["plain"], 3) for name in ("attention", "all")},
    }
    if args.json:
        print(json.dumps(report))
    else:
        print(
            f"{report['words']} words → {report['output_pieces']} pieces, beam {args.beam}, "
            f"{args.threads} threads: plain {best['plain']:.3f} s, attention=True "
            f"{best['attention']:.3f} s ({report['attention_ratio']:.2f}×), attention='all' "
            f"{best['all']:.3f} s ({report['all_ratio']:.2f}×)"
        )


if __name__ == "__main__":
    main()
