"""How fast does a translation config train, against a tutorial-style model of the same size?

    python bench/translation_train.py [--config configs/translation/transformer.yaml]
        [--data data/multi30k] [--steps 20] [--warmup 2] [--threads 2]
        [--train-precision 32|bf16-mixed] [--no-reference] [--json]
        [-- CONFIG OVERRIDES, e.g. --data.init_args.src_lang en --data.init_args.tgt_lang de]

One process, on the CPU with --threads threads: real (non-pad) target tokens/s over --steps
optimizer steps after --warmup steps, batch fetching and collation included.
  Ours: the model and DataModule built from the config by SeqtasksCLI, token-bucketed batches
    from `train_dataloader()`, `task.objective.token_loss`, the config's optimizer and gradient
    clipping, in a plain loop (no Trainer).
  Reference: the module registered for the config's decoder class (bench/translation_setup.py's
    REFERENCES: the tutorial-style model, same widths), batches of a fixed number of sentences
    in random order, that number chosen so that the average real target tokens per batch equals
    ours over an epoch; same loss, optimizer and clipping.
Peak RSS (ru_maxrss) after ours (which runs first) and for the whole process. A config with no
reference gets the ours-side figures only. With --json the last stdout line is one JSON object.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package
from translation_setup import (  # noqa: E402
    add_common_arguments,
    architecture,
    log,
    n_params,
    parse,
    peak_rss_mb,
    print_table,
    ratio,
    reference_module,
    setup,
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(p)
    p.add_argument("--steps", type=int, default=20, help="timed optimizer steps per model")
    p.add_argument("--warmup", type=int, default=2, help="untimed optimizer steps before them")
    p.add_argument("--train-precision", default="32", choices=["32", "bf16-mixed"],
                   help="bf16-mixed: forward passes under bfloat16 autocast, as Lightning's "
                   "flag of that name (ours and the reference alike)")  # fmt: skip
    args = parse(p, argv)
    if args.steps < 1 or args.warmup < 0:
        p.error("need --steps >= 1, --warmup >= 0")
    return args


def cycle_loader(loader) -> Iterator:
    """Batches of the DataLoader, epoch after epoch (set_epoch reshuffles as the Trainer does)."""
    epoch = 0
    while True:
        sampler = loader.batch_sampler
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)
        yield from loader
        epoch += 1


def random_batches(n_examples: int, batch_size: int, seed: int) -> Iterator[list[int]]:
    """Fixed-size batches of example indices in random order, reshuffled each epoch."""
    generator = torch.Generator().manual_seed(seed)
    while True:
        order = torch.randperm(n_examples, generator=generator).tolist()
        for start in range(0, n_examples - batch_size + 1, batch_size):
            yield order[start : start + batch_size]


def timed_steps(step, batches: Iterator, steps: int, warmup: int) -> dict:
    """Run warmup + steps calls of `step(batch) -> (loss, real tokens)`; time the last `steps`,
    batch fetching and collation included."""
    losses, tokens, start = [], 0, time.perf_counter()
    for i in range(warmup + steps):
        if i == warmup:
            tokens, start = 0, time.perf_counter()
        loss, n = step(next(batches))
        losses.append(loss)
        tokens += n
    seconds = time.perf_counter() - start
    return {
        "tokens": tokens,
        "seconds": seconds,
        "tokens_per_s": tokens / seconds,
        "s_per_step": seconds / steps,
        "first_loss": losses[0],
        "last_loss": losses[-1],
    }


def training_autocast(args) -> torch.autocast:
    """The forward pass's precision: float32, or bfloat16 autocast for --train-precision
    bf16-mixed (the backward pass runs outside it, as in Lightning)."""
    return torch.autocast("cpu", torch.bfloat16, enabled=args.train_precision == "bf16-mixed")


def train_ours(task, datamodule, clip: float, args) -> dict:
    from seqtasks.data.tokenizer import PAD_ID

    task.train()
    optimizer = task.optimizer(task.parameters())
    params = [p for p in task.parameters() if p.requires_grad]

    def step(batch):
        optimizer.zero_grad(set_to_none=True)
        with training_autocast(args):
            output = task(batch.src, batch.src_mask, batch.tgt_in)
            loss, _ = task.objective.token_loss(output.logits, batch.tgt_out)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(params, clip)
        optimizer.step()
        return loss.item(), int((batch.tgt_out != PAD_ID).sum())

    result = timed_steps(step, cycle_loader(datamodule.train_dataloader()), args.steps,
                         args.warmup)  # fmt: skip
    result["optimizer"] = type(optimizer).__name__
    return result


def train_reference(ref_module, reference, task, datamodule, clip: float, args) -> dict:
    from seqtasks.data.tokenizer import BOS_ID, EOS_ID, PAD_ID

    examples = datamodule.datasets["fit"].examples
    # Our batches over one epoch: their mean real target tokens (len + EOS) sets the reference's
    # sentences per batch (same mean tokens per batch = n_examples / n_batches sentences).
    n_batches = len(datamodule.train_dataloader().batch_sampler.batches)
    batch_size = max(1, round(len(examples) / n_batches))
    mean_tgt = sum(len(e.tgt) + 1 for e in examples) / len(examples)

    reference.train()
    optimizer = task.optimizer(reference.parameters())  # the config's optimizer, same settings
    params = list(reference.parameters())
    smoothing = float(getattr(task, "label_smoothing", 0.0))

    def step(indices):
        batch = [examples[i] for i in indices]
        src, trg = ref_module.make_batch([e.src for e in batch], [e.tgt for e in batch],
                                         PAD_ID, BOS_ID, EOS_ID)  # fmt: skip
        optimizer.zero_grad(set_to_none=True)
        with training_autocast(args):
            loss, n = ref_module.batch_loss(reference, src, trg, smoothing, PAD_ID)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(params, clip)
        optimizer.step()
        return loss.item(), n

    result = timed_steps(step, random_batches(len(examples), batch_size, args.seed), args.steps,
                         args.warmup)  # fmt: skip
    result.update(batch_sentences=batch_size, ours_batches_per_epoch=n_batches,
                  mean_batch_tokens=batch_size * mean_tgt)  # fmt: skip
    return result


def report(run: dict, who: str) -> None:
    log(f"  {who}: {run['tokens_per_s']:,.0f} real target tok/s, {run['s_per_step']:.2f} s/step, "
        f"loss {run['first_loss']:.3f} -> {run['last_loss']:.3f}")  # fmt: skip


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    task, datamodule, clip = setup(args)
    datamodule.setup("fit")
    ref_module = reference_module(task, args)
    reference = None
    if ref_module is not None:
        torch.manual_seed(args.seed)
        reference = ref_module.build_like(task)
    params, ref_params = n_params(task), (n_params(reference) if reference is not None else None)
    log(f"parameters: ours {params:,}" + (f", reference {ref_params:,} ({ref_module.SUMMARY})"
                                          if reference is not None else ""))  # fmt: skip
    log(f"training: {args.warmup} warm-up + {args.steps} timed steps each, gradient clip {clip}, "
        f"precision {args.train_precision}")  # fmt: skip
    ours = train_ours(task, datamodule, clip, args)
    report(ours, "ours")
    rss_ours = peak_rss_mb()
    ref = None
    if reference is not None:
        ref = train_reference(ref_module, reference, task, datamodule, clip, args)
        report(ref, "reference")
        log(f"  reference batches: {ref['batch_sentences']} sentences in random order (ours: "
            f"{ref['ours_batches_per_epoch']} token-bucketed batches an epoch; both average "
            f"{ref['mean_batch_tokens']:.0f} real target tokens a batch)")  # fmt: skip
    peak = peak_rss_mb()
    ref_tps = ref and ref["tokens_per_s"]
    print_table([
        ("parameters", params, ref_params, 0),
        ("train real target tokens/s", ours["tokens_per_s"], ref_tps, 1),
        ("train s/step", ours["s_per_step"], ref and ref["s_per_step"], 3),
    ])  # fmt: skip
    log(f"peak RSS: {rss_ours:,.0f} MB after ours, {peak:,.0f} MB for the whole process")
    result = {
        "model": Path(args.config).stem,
        "architecture": architecture(task),
        "config": args.config,
        "overrides": args.overrides,
        "train_tokens_per_s": ours["tokens_per_s"],
        "ref_train_tokens_per_s": ref_tps,
        "train_ratio": ratio(ours["tokens_per_s"], ref_tps),
        "peak_rss_mb_ours": rss_ours,
        "peak_rss_mb": peak,
        "params": params,
        "ref_params": ref_params,
        "ref_batch_sentences": ref and ref["batch_sentences"],
        "reference": ref_module and ref_module.__name__,
        "steps": args.steps,
        "warmup": args.warmup,
        "threads": args.threads,
        "train_precision": args.train_precision,
        "torch": torch.__version__,
    }
    if args.json:
        print(json.dumps(result), flush=True)
    return result


if __name__ == "__main__":
    main()
