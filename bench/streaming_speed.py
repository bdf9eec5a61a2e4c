"""Does training read from shards as fast as from memory?

    python bench/streaming_speed.py --data data/multi30k [--shard-dir DATA/shards] [--rounds 2]
        [--steps 300] [--warmup 5] [--threads 2] [--max-tokens N] [--precision 32-true]
        [--activation-checkpointing] [--json]

Alternates `bench/streaming_memory.py train` runs of --config-memory (`TranslationData`) and
--config (`ShardedTranslationData`: same model, seed and batches, since the shard path yields
the in-memory path's batches) on --data for --rounds rounds, each in a fresh process on
--threads torch threads with OMP_WAIT_POLICY=PASSIVE, and reports the tokens/s of both (per
wall and per CPU second), their ratio (median over rounds, and per round) and whether both paths
trained the same target tokens. Shards first: `python data_prep/shards.py --source DATA`. With
--json the last stdout line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRAIN = Path(__file__).resolve().parent / "streaming_memory.py"


def child(args: list[str], threads: int) -> dict:
    """`python bench/streaming_memory.py train ARGS --json` in a fresh process; its JSON line."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OMP_WAIT_POLICY="PASSIVE")
    command = [sys.executable, str(TRAIN), "train", *args, "--threads", str(threads), "--json"]
    result = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def compare(args: argparse.Namespace) -> dict:
    runs = {"memory": [], "shards": []}
    common = ["--data", args.data, "--steps", str(args.steps), "--warmup", str(args.warmup)]
    common += ["--precision", args.precision]
    if args.max_tokens:
        common += ["--max-tokens", str(args.max_tokens)]
    if args.activation_checkpointing:
        common += ["--activation-checkpointing"]
    shard_dir = ["--shard-dir", args.shard_dir] if args.shard_dir else []
    for _ in range(args.rounds):
        runs["memory"].append(child(["--config", args.config_memory, *common], args.threads))
        runs["shards"].append(child(["--config", args.config, *shard_dir, *common], args.threads))
        print(
            f"memory {runs['memory'][-1]['tokens_per_s']:.0f}  "
            f"shards {runs['shards'][-1]['tokens_per_s']:.0f} tokens/s",
            flush=True,
        )
    median = {k: statistics.median(r["tokens_per_s"] for r in v) for k, v in runs.items()}
    median_cpu = {k: statistics.median(r["tokens_per_cpu_s"] for r in v) for k, v in runs.items()}
    pairs = list(zip(runs["memory"], runs["shards"]))
    return {
        "tokens_per_s": median,
        "ratio_shards_to_memory": median["shards"] / median["memory"],
        "ratio_per_round": [s["tokens_per_s"] / m["tokens_per_s"] for m, s in pairs],
        "same_tokens": [m["tokens"] == s["tokens"] for m, s in pairs],
        "tokens_per_cpu_s": median_cpu,
        "cpu_ratio_shards_to_memory": median_cpu["shards"] / median_cpu["memory"],
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="data_dir: models, val/test, train text")
    p.add_argument("--shard-dir", default=None, help="default: DATA/shards")
    p.add_argument("--config", default="configs/translation/transformer_shards.yaml")
    p.add_argument("--config-memory", default="configs/translation/transformer.yaml")
    p.add_argument("--max-tokens", type=int, default=None, help="default: the config's")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--threads", type=int, default=2, help="torch threads")
    p.add_argument("--precision", default="32-true", help="Lightning's precision")
    p.add_argument("--activation-checkpointing", action="store_true",
                   help="recompute Transformer layers in the backward pass")  # fmt: skip
    p.add_argument("--json", action="store_true", help="end with one JSON line")
    args = p.parse_args(argv)
    if args.steps < 2 or args.warmup < 1:
        p.error("need --steps >= 2 and --warmup >= 1")
    result = compare(args)
    print(json.dumps(result) if args.json else json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
