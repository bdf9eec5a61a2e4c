"""Beam search's stopping rules side by side on one translator: the work each does, its speed,
and what it changes in the outputs.

    python bench/stopping.py --checkpoint CKPT [--src data/multi30k/test_2016_flickr.de]
        [--ref data/multi30k/test_2016_flickr.en] [--sentences 1000] [--beam 5]
        [--rounds 3] [--threads 2] [--json]

For each rule of `seqtasks.search.beam_search` ("exact", "heuristic"): the decoder rows it
computes (hypotheses × steps, summed over the steps; the work, free of the machine's mood), per
output token; sentences/s and output tokens/s (subwords, EOS not counted) over --rounds
interleaved passes after one untimed pass, min/median/max; BLEU (sacreBLEU, cased) against
--ref; and how many outputs differ from the exact rule's.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import sacrebleu  # noqa: E402
import torch  # noqa: E402

import seqtasks  # noqa: E402
from seqtasks.search import STOPS  # noqa: E402


def count_rows(translator: seqtasks.Translator) -> list[int]:
    """Wrap the decoder's `step` so that the rows of every call add up in the returned list's
    one element."""
    decoder, rows = translator.task.decoder, [0]
    step = decoder.step

    def counted(prev_tokens: torch.Tensor, state):  # noqa: ANN202
        rows[0] += prev_tokens.numel()
        return step(prev_tokens, state)

    decoder.step = counted
    return rows


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--src", type=Path, default=Path("data/multi30k/test_2016_flickr.de"))
    p.add_argument("--ref", type=Path, default=Path("data/multi30k/test_2016_flickr.en"))
    p.add_argument("--sentences", type=int, default=1000)
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    sources = args.src.read_text(encoding="utf-8").splitlines()[: args.sentences]
    references = args.ref.read_text(encoding="utf-8").splitlines()[: args.sentences]
    translator = seqtasks.load(args.checkpoint, device="cpu")
    rows = count_rows(translator)
    outputs, work, seconds = {}, {}, {stop: [] for stop in STOPS}
    for stop in STOPS:  # untimed: the outputs and the rows, and a warm start
        rows[0] = 0
        outputs[stop] = translator.translate(sources, beam=args.beam, stop=stop)
        work[stop] = rows[0]
    for _ in range(args.rounds):
        for stop in STOPS:
            start = time.perf_counter()
            translator.translate(sources, beam=args.beam, stop=stop)
            seconds[stop].append(time.perf_counter() - start)
    report = {"checkpoint": str(args.checkpoint), "sentences": len(sources), "beam": args.beam,
              "threads": args.threads, "rules": {}}  # fmt: skip
    print(f"beam {args.beam}, {len(sources)} sentences, {args.threads} threads, "
          f"{args.rounds} rounds (min / median / max)")  # fmt: skip
    for stop in STOPS:
        tokens = sum(len(t.tokens) for t in outputs[stop])
        speeds = sorted(tokens / s for s in seconds[stop])
        texts = [t.text for t in outputs[stop]]
        differ = sum(a != b.text for a, b in zip(texts, outputs["exact"]))
        report["rules"][stop] = {
            "decoder_rows": work[stop],
            "rows_per_output_token": work[stop] / (tokens + len(sources)),
            "sentences_per_s": statistics.median(len(sources) / s for s in seconds[stop]),
            "tokens_per_s": {
                "min": speeds[0],
                "median": statistics.median(speeds),
                "max": speeds[-1],
            },  # fmt: skip
            "output_tokens": tokens,
            "bleu": sacrebleu.corpus_bleu(texts, [references]).score,
            "differ_from_exact": differ,
        }
        r = report["rules"][stop]
        print(f"  {stop:<10} rows {work[stop]:,} ({r['rows_per_output_token']:.2f} an output "
              f"token, EOS counted) | {r['sentences_per_s']:.1f} sent/s | tokens/s "
              f"{speeds[0]:,.0f} / {r['tokens_per_s']['median']:,.0f} / {speeds[-1]:,.0f} | "
              f"BLEU {r['bleu']:.2f} | {differ} outputs differ from exact")  # fmt: skip
    if args.json:
        print(json.dumps(report), flush=True)
    return report


if __name__ == "__main__":
    main()
