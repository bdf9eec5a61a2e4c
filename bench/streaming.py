"""Streaming from binary shards against the in-memory path: preparation speed, resident memory
on a corpus of millions of pairs, and training throughput.

    python bench/streaming.py generate --out /tmp/stream2m --pairs 2000000 --seed 0
    python bench/streaming.py prepare --corpus /tmp/stream2m --threads 1 2
    python bench/streaming.py train --data /tmp/stream2m --steps 300      # RSS while training
    python bench/streaming.py scan --data /tmp/stream2m                   # one epoch of batches
    python bench/streaming.py scan --data /tmp/stream2m --in-memory       # the same, in memory
    python bench/streaming.py compare --data data/multi30k --shard-dir /tmp/m30k_shards

generate: a synthetic parallel corpus that looks like Multi30k: each pair copies the word counts
  of a random Multi30k training pair (so lengths and their source–target correlation are
  real) and fills both sides with words drawn by their Multi30k frequency; deterministic from
  --seed. Beside train.{de,en} it copies the sentencepiece models and the val/test files of
  --data, so it is a `TranslationData` folder.
prepare: runs `data_prep/shards.py` on it (into CORPUS/shards, once per --threads value) and
  reports lines/s, wall time including start-up, and the child's peak RSS.
train: fits --config (default the Transformer's shard config) for --warmup + --steps optimiser
  steps with Lightning, no validation, and records after every step VmRSS, VmHWM, RssAnon and
  RssFile (/proc/self/status) and the real target tokens/s over the --steps steps;
  --activation-checkpointing turns it on in the encoder and decoder.
scan: iterates every training batch of one epoch (no model) and records the same memory
  figures; --in-memory loads the split with `TranslationData` instead.
compare: alternates `train` runs of --config-memory and --config (same model, seed, batches:
  the shard path yields the in-memory path's batches) on --data for --rounds rounds, each in its
  own process, and reports tokens/s of both and their ratio (median over rounds).

Every measurement runs in a child process of its own, on --threads torch threads, with
OMP_WAIT_POLICY=PASSIVE; with --json the last stdout line is one JSON object.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MEMORY_FIELDS = ("VmRSS", "VmHWM", "RssAnon", "RssFile")
LANGS = ("de", "en")


def memory_mib() -> dict[str, float]:
    """VmRSS, VmHWM (peak RSS), RssAnon and RssFile of this process, in MiB."""
    text = Path("/proc/self/status").read_text()
    return {
        field: int(re.search(rf"^{field}:\s+(\d+) kB", text, re.M).group(1)) / 1024
        for field in MEMORY_FIELDS
    }


def slope(values: list[float]) -> float:
    """Least-squares growth of `values` per step."""
    return float(np.polyfit(np.arange(len(values)), values, 1)[0])


def child(args: list[str], threads: int) -> dict:
    """`python bench/streaming.py ARGS --json` in a fresh process; its JSON line."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OMP_WAIT_POLICY="PASSIVE")
    command = [sys.executable, __file__, *args, "--threads", str(threads), "--json"]
    result = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


# ---- generate ----------------------------------------------------------------------------------
def generate(args: argparse.Namespace) -> dict:
    from seqtasks.data.text import read_lines

    data, out = Path(args.data), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sides = {lang: [line.split() for line in read_lines(data / f"train.{lang}")] for lang in LANGS}
    counts = {lang: np.array([len(words) for words in sides[lang]]) for lang in LANGS}
    vocab, probs = {}, {}
    for lang in LANGS:
        frequency = Counter(word for words in sides[lang] for word in words)
        vocab[lang] = np.array(list(frequency), dtype=object)
        probs[lang] = np.array(list(frequency.values()), dtype=np.float64)
        probs[lang] /= probs[lang].sum()
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    files = {lang: open(out / f"train.{lang}", "w", encoding="utf-8") for lang in LANGS}
    with files["de"], files["en"]:
        for first in range(0, args.pairs, 100_000):
            templates = rng.integers(0, len(sides["de"]), min(100_000, args.pairs - first))
            for lang in LANGS:
                n = counts[lang][templates]  # (chunk,) words per sentence
                words = vocab[lang][rng.choice(len(vocab[lang]), int(n.sum()), p=probs[lang])]
                ends = np.cumsum(n)
                lines = (" ".join(words[e - k : e]) for e, k in zip(ends.tolist(), n.tolist()))
                files[lang].write("".join(f"{line[:1].upper()}{line[1:]}\n" for line in lines))
    for name in [f"spm.{lang}.model" for lang in LANGS] + [
        f"{split}.{lang}" for split in ("val", "test_2016_flickr") for lang in LANGS
    ]:
        shutil.copyfile(data / name, out / name)
    sizes = {lang: (out / f"train.{lang}").stat().st_size / 2**20 for lang in LANGS}
    return {"pairs": args.pairs, "seconds": time.perf_counter() - start, "mib": sizes}


# ---- prepare -----------------------------------------------------------------------------------
def run_measured(command: list[str]) -> tuple[str, float, float]:
    """Run `command`; (stdout, wall seconds, the child's own peak RSS in MiB)."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = process.stdout.read(), process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{stderr[-3000:]}")
    return stdout, time.perf_counter() - start, usage.ru_maxrss / 1024


def preparation_speed(stdout: str, lines: int) -> tuple[float, float]:
    """(seconds, lines/s) of tokenising and writing, from what data_prep/shards.py prints:
    "wrote DIR in 32.1 s (62,400 lines/s)". The rate is computed from the unrounded time, so
    it is the one to keep; the seconds are printed to 0.1 s only (0.0 for a small corpus)."""
    found = re.search(r" in ([\d.]+) s \(([\d,]+) lines/s\)", stdout)
    seconds, lines_per_s = float(found.group(1)), float(found.group(2).replace(",", ""))
    return (lines / lines_per_s if lines_per_s else seconds), lines_per_s


def prepare(args: argparse.Namespace) -> dict:
    """data_prep/shards.py once per --threads value, and for scale the peak RSS of a process
    that only imports what it imports."""
    command = [sys.executable, "-c", "import seqtasks.data.streaming.shards"]
    _, import_s, import_rss = run_measured(command)
    results = {"import_only": {"wall_s": import_s, "peak_rss_mib": import_rss}}
    for threads in args.threads_list:
        out = Path(args.corpus) / "shards"
        stdout, wall, peak = run_measured(
            [sys.executable, str(ROOT / "data_prep" / "shards.py"), "--source", args.corpus]
            + ["--out", str(out), "--threads", str(threads)]
        )
        print(stdout.strip(), flush=True)
        manifest = json.loads((out / "manifest.json").read_text())
        seconds, lines_per_s = preparation_speed(stdout, manifest["lines"])
        results[f"threads={threads}"] = {
            "lines": manifest["lines"],
            "pairs": manifest["pairs"],
            "shards": len(manifest["shards"]),
            "seconds": seconds,
            "lines_per_s": lines_per_s,
            "wall_s": wall,
            "peak_rss_mib": peak,
            "disk_mib": sum(p.stat().st_size for p in out.iterdir()) / 2**20,
        }
    return results


# ---- train and scan (run in a child process) ---------------------------------------------------
def build(
    config: str,
    data: str,
    shard_dir: str | None,
    max_tokens: int | None,
    activation_checkpointing: bool = False,
):
    """(task, datamodule, trainer settings) as `seqtasks fit --config` builds them."""
    from seqtasks.cli.main import SeqtasksCLI

    overrides = ["--data.init_args.data_dir", data]
    if shard_dir:
        overrides += ["--data.init_args.shard_dir", shard_dir]
    if max_tokens:
        overrides += ["--data.init_args.max_tokens", str(max_tokens)]
    if activation_checkpointing:
        for part in ("encoder", "decoder"):
            overrides += [f"--model.init_args.{part}.init_args.activation_checkpointing", "true"]
    cli = SeqtasksCLI(
        subclass_mode_model=True,
        subclass_mode_data=True,
        save_config_callback=None,
        run=False,
        args=["--config", config, *overrides, "--trainer.logger", "false"],
    )
    return cli.model, cli.datamodule, cli.trainer.gradient_clip_val


def train(args: argparse.Namespace) -> dict:
    import lightning as L
    import torch

    from seqtasks.data.tokenizer import PAD_ID

    torch.set_num_threads(args.threads)
    model, datamodule, clip = build(
        args.config, args.data, args.shard_dir, args.max_tokens, args.activation_checkpointing
    )
    tokens, times, cpu_times, memory = [], [], [], []

    class Meter(L.Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            tokens.append(int((batch.tgt_out != PAD_ID).sum()))
            times.append(time.perf_counter())
            cpu_times.append(time.process_time())
            memory.append(memory_mib())

    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        max_steps=args.warmup + args.steps,
        gradient_clip_val=clip,
        precision=args.precision,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        use_distributed_sampler=False,
        callbacks=[Meter()],
    )
    trainer.fit(model, datamodule=datamodule)
    timed = slice(args.warmup, None)  # steps after the warm-up one ended
    seconds = times[-1] - times[args.warmup - 1]
    cpu_seconds = cpu_times[-1] - cpu_times[args.warmup - 1]  # all threads of this process
    rss = [m["VmRSS"] for m in memory]
    return {
        "data": type(datamodule).__name__,
        "pairs": len(datamodule.datasets["fit"]),
        "steps": len(times[timed]),
        "tokens": sum(tokens[timed]),
        "tokens_per_s": sum(tokens[timed]) / seconds,
        "s_per_step": seconds / len(times[timed]),
        "tokens_per_cpu_s": sum(tokens[timed]) / cpu_seconds,
        "cpu_s_per_step": cpu_seconds / len(times[timed]),
        "rss_mib_every_50_steps": rss[::50] + [rss[-1]],  # after steps 1, 51, 101, …, last
        "rss_growth_mib_per_100_steps": 100 * slope(rss[timed]),
        "peak_rss_mib": memory[-1]["VmHWM"],
        "peak_reached_at_step": 1 + [m["VmHWM"] for m in memory].index(memory[-1]["VmHWM"]),
        "last": memory[-1],
    }


def scan(args: argparse.Namespace) -> dict:
    config = args.config_memory if args.in_memory else args.config
    start, start_cpu = time.perf_counter(), time.process_time()
    _, datamodule, _ = build(config, args.data, None if args.in_memory else args.shard_dir, None)
    datamodule.setup("fit")
    setup_seconds, setup_cpu = time.perf_counter() - start, time.process_time() - start_cpu
    after_setup = memory_mib()
    samples, pairs = [], 0
    start, start_cpu = time.perf_counter(), time.process_time()
    for i, batch in enumerate(datamodule.train_dataloader()):
        pairs += len(batch)
        if i % 500 == 0:
            samples.append(memory_mib()["VmRSS"])
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - start_cpu
    return {
        "data": type(datamodule).__name__,
        "pairs": pairs,
        "setup_s": setup_seconds,
        "setup_cpu_s": setup_cpu,
        "epoch_s": seconds,
        "epoch_cpu_s": cpu_seconds,
        "pairs_per_s": pairs / seconds,
        "pairs_per_cpu_s": pairs / cpu_seconds,
        "after_setup": after_setup,
        "end": memory_mib(),
        "rss_samples_mib": samples,
    }


def compare(args: argparse.Namespace) -> dict:
    runs = {"memory": [], "shards": []}
    common = ["--data", args.data, "--steps", str(args.steps), "--warmup", str(args.warmup)]
    common += ["--precision", args.precision]
    if args.max_tokens:
        common += ["--max-tokens", str(args.max_tokens)]
    if args.activation_checkpointing:
        common += ["--activation-checkpointing"]
    for _ in range(args.rounds):
        runs["memory"].append(
            child(["train", "--config", args.config_memory, *common], args.threads)
        )
        shard_dir = ["--shard-dir", args.shard_dir] if args.shard_dir else []
        shards = ["train", "--config", args.config, *shard_dir, *common]
        runs["shards"].append(child(shards, args.threads))
        print(
            f"memory {runs['memory'][-1]['tokens_per_s']:.0f}  "
            f"shards {runs['shards'][-1]['tokens_per_s']:.0f} tokens/s",
            flush=True,
        )
    median = {k: statistics.median(r["tokens_per_s"] for r in v) for k, v in runs.items()}
    median_cpu = {k: statistics.median(r["tokens_per_cpu_s"] for r in v) for k, v in runs.items()}
    return {
        "tokens_per_s": median,
        "ratio_shards_to_memory": median["shards"] / median["memory"],
        "ratio_per_round": [
            s["tokens_per_s"] / m["tokens_per_s"] for m, s in zip(runs["memory"], runs["shards"])
        ],
        "same_tokens": [m["tokens"] == s["tokens"] for m, s in zip(runs["memory"], runs["shards"])],
        "tokens_per_cpu_s": median_cpu,
        "cpu_ratio_shards_to_memory": median_cpu["shards"] / median_cpu["memory"],
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    g = commands.add_parser("generate")
    g.add_argument("--out", required=True)
    g.add_argument(
        "--data", default="data/multi30k", help="Multi30k, as data_prep/multi30k.py wrote it"
    )
    g.add_argument("--pairs", type=int, default=2_000_000)
    g.add_argument("--seed", type=int, default=0)
    p = commands.add_parser("prepare")
    p.add_argument("--corpus", required=True)
    p.add_argument("--threads", dest="threads_list", type=int, nargs="+", default=[1],
                   help="sentencepiece threads: one preparation per value")  # fmt: skip
    for name in ("train", "scan", "compare"):
        c = commands.add_parser(name)
        c.add_argument("--data", required=True, help="data_dir: models, val/test, train text")
        c.add_argument("--shard-dir", default=None, help="default: DATA/shards")
        c.add_argument("--config", default="configs/translation/transformer_shards.yaml")
        c.add_argument("--config-memory", default="configs/translation/transformer.yaml")
        c.add_argument("--max-tokens", type=int, default=None, help="default: the config's")
        c.add_argument("--steps", type=int, default=300)
        c.add_argument("--warmup", type=int, default=5)
        c.add_argument("--rounds", type=int, default=2)
        c.add_argument("--in-memory", action="store_true", help="scan: TranslationData")
        c.add_argument("--threads", type=int, default=2, help="torch threads")
        c.add_argument("--precision", default="32-true", help="train: Lightning's precision")
        c.add_argument("--activation-checkpointing", action="store_true",
                       help="train: recompute Transformer layers in the backward pass")  # fmt: skip
    for c in commands.choices.values():
        c.add_argument("--json", action="store_true", help="end with one JSON line")
    args = parser.parse_args(argv)
    if args.command in ("train", "compare") and (args.steps < 2 or args.warmup < 1):
        parser.error("need --steps >= 2 and --warmup >= 1")
    result = {
        "generate": generate,
        "prepare": prepare,
        "train": train,
        "scan": scan,
        "compare": compare,
    }[args.command](args)
    if args.json:
        print(json.dumps(result))
    else:
        print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
