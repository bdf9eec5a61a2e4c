"""Does the resident set of a process reading shards stay flat on a corpus of millions of pairs,
through an epoch of batches and through training?

    python bench/streaming_memory.py scan --data /tmp/stream2m [--in-memory]   # one epoch, no model
    python bench/streaming_memory.py train --data /tmp/stream2m --steps 300
        [--activation-checkpointing]                                           # RSS while training

scan: iterates every training batch of one epoch (no model) and records VmRSS, VmHWM, RssAnon and
  RssFile (/proc/self/status) after setup and every 500 batches, and pairs/s; --in-memory loads
  the split with `TranslationData` (--config-memory) instead of the shards (--config).
train: fits --config for --warmup + --steps optimiser steps with Lightning, no validation, and
  records the same figures after every step, their growth per 100 steps and where the peak
  fell, and the real target tokens/s over the --steps steps; --activation-checkpointing turns it
  on in the encoder and decoder. bench/streaming_speed.py runs it on both paths.

A corpus of millions: bench/streaming_corpus.py, then data_prep/shards.py (or
bench/streaming_prepare.py). Runs on --threads torch threads; with --json the last stdout line
is one JSON object.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

MEMORY_FIELDS = ("VmRSS", "VmHWM", "RssAnon", "RssFile")


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


def build(
    config: str,
    data: str,
    shard_dir: str | None,
    max_tokens: int | None,
    activation_checkpointing: bool = False,
):
    """(task, datamodule, gradient clip value) as `seqtasks fit --config` builds them."""
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


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("train", "scan"):
        c = commands.add_parser(name)
        c.add_argument("--data", required=True, help="data_dir: models, val/test, train text")
        c.add_argument("--shard-dir", default=None, help="default: DATA/shards")
        c.add_argument("--config", default="configs/translation/transformer_shards.yaml")
        c.add_argument("--config-memory", default="configs/translation/transformer.yaml")
        c.add_argument("--max-tokens", type=int, default=None, help="default: the config's")
        c.add_argument("--threads", type=int, default=2, help="torch threads")
        c.add_argument("--json", action="store_true", help="end with one JSON line")
    train_args = commands.choices["train"]
    train_args.add_argument("--steps", type=int, default=300)
    train_args.add_argument("--warmup", type=int, default=5)
    train_args.add_argument("--precision", default="32-true", help="Lightning's precision")
    train_args.add_argument("--activation-checkpointing", action="store_true",
                            help="recompute Transformer layers in the backward pass")  # fmt: skip
    commands.choices["scan"].add_argument("--in-memory", action="store_true",
                                          help="TranslationData instead of the shards")  # fmt: skip
    args = parser.parse_args(argv)
    if args.command == "train" and (args.steps < 2 or args.warmup < 1):
        parser.error("need --steps >= 2 and --warmup >= 1")
    result = {"train": train, "scan": scan}[args.command](args)
    print(json.dumps(result) if args.json else json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
