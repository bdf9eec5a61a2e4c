"""Beam-5 decoding speed of a softmax-attention and a linear-attention Transformer, on short and
on long sources, in one process, interleaved.

    python bench/linear_attention.py --softmax CKPT --linear CKPT
        [--src data/multi30k/test_2016_flickr.de] [--sentences 200] [--long 100]
        [--rounds 3] [--threads 2] [--json]

Short: the first --sentences test sentences. Long: the same sentences joined in order into
sources of at least --long subwords each (a model trained on single captions translates them
as it can; what is measured is the cost per output token, so each model's output lengths are
printed beside its speed). Each (model, set) is decoded --rounds times after one untimed pass,
in the order softmax, linear, softmax, … ; output tokens/s are subwords, EOS not counted,
min/median/max. Then the cost of one incremental decoder step at growing prefix lengths
(--step-lengths), free of what each model chooses to output: the first --rows sources encoded,
decoder.step() run --max-steps times from BOS feeding back its argmax (end of sentence not
stopping it), milliseconds a step around each length (median of the 5 steps before it).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

import seqtasks  # noqa: E402
from seqtasks.data.tokenizer import BOS_ID, EOS_ID, PAD_ID  # noqa: E402


def long_sources(lines: list[str], tokenize, at_least: int) -> list[str]:
    """`lines` joined in order into sources of at least `at_least` subwords (the tail that
    cannot reach it is dropped)."""
    sources, current, length = [], [], 0
    for line in lines:
        current.append(line)
        length += len(tokenize(line))
        if length >= at_least:
            sources.append(" ".join(current))
            current, length = [], 0
    return sources


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--softmax", required=True)
    p.add_argument("--linear", required=True)
    p.add_argument("--src", type=Path, default=Path("data/multi30k/test_2016_flickr.de"))
    p.add_argument("--sentences", type=int, default=200)
    p.add_argument("--long", type=int, default=100, help="subwords a long source has at least")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rows", type=int, default=100, help="decoder rows of the step timing")
    p.add_argument("--step-lengths", type=int, nargs="+", default=[10, 50, 100, 200, 400])
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    models = {"softmax": seqtasks.load(args.softmax, "cpu"),
              "linear": seqtasks.load(args.linear, "cpu")}  # fmt: skip
    tokenizer = models["softmax"].task.src_tokenizer
    lines = args.src.read_text(encoding="utf-8").splitlines()[: args.sentences]
    sets = {"short": lines, "long": long_sources(lines, tokenizer.encode, args.long)}
    result: dict = {"threads": args.threads, "rounds": args.rounds, "sets": {}}
    for set_name, sources in sets.items():
        pieces = [len(tokenizer.encode(s)) for s in sources]
        print(f"{set_name}: {len(sources)} sources, {statistics.mean(pieces):.1f} subwords "
              f"(min {min(pieces)})", flush=True)  # fmt: skip
        speeds: dict[str, list[float]] = {name: [] for name in models}
        lengths = {}
        for round_ in range(args.rounds + 1):
            for name, model in models.items():
                start = time.perf_counter()
                outputs = model.translate(sources, beam=5)
                seconds = time.perf_counter() - start
                tokens = sum(len(o.tokens) for o in outputs)
                lengths[name] = tokens / len(outputs)
                if round_:  # the first pass warms up
                    speeds[name].append(tokens / seconds)
        result["sets"][set_name] = {}
        for name, values in speeds.items():
            spread = {"min": min(values), "median": statistics.median(values),
                      "max": max(values)}  # fmt: skip
            result["sets"][set_name][name] = {"tokens_per_s": spread,
                                              "mean_output_tokens": lengths[name]}  # fmt: skip
            print(f"  {name:<8} {spread['min']:7,.0f} / {spread['median']:7,.0f} / "
                  f"{spread['max']:7,.0f} output tokens/s, {lengths[name]:.1f} a sentence",
                  flush=True)  # fmt: skip
    result["step_ms"] = step_costs(models, lines[: args.rows], args.step_lengths)
    if args.json:
        print(json.dumps(result), flush=True)
    return result


@torch.inference_mode()
def step_costs(models: dict, sources: list[str], lengths: list[int]) -> dict[str, dict]:
    """Milliseconds of one decoder step at each prefix length in `lengths`, per model."""
    costs: dict[str, dict] = {}
    print(
        f"one decoder step, {len(sources)} rows, ms at prefix length "
        + " / ".join(map(str, lengths))
    )
    for name, model in models.items():
        task = model.task
        ids = [task.src_tokenizer.encode(s) + [EOS_ID] for s in sources]
        width = max(map(len, ids))
        src = torch.tensor([x + [PAD_ID] * (width - len(x)) for x in ids])
        state = task.decoder.start(task.encoder(src, src != PAD_ID))
        tokens = torch.full((len(sources),), BOS_ID)
        times = []
        for _ in range(max(lengths)):
            start = time.perf_counter()
            logits, state, _ = task.decoder.step(tokens, state)
            tokens = logits.argmax(-1)
            times.append(time.perf_counter() - start)
        costs[name] = {n: 1e3 * statistics.median(times[n - 5 : n]) for n in lengths}
        print(f"  {name:<8} " + " / ".join(f"{costs[name][n]:.2f}" for n in lengths), flush=True)
    return costs


if __name__ == "__main__":
    main()
