"""What masked-LM pre-training costs over its encoder's own training step: the same batches
through (a) the encoder's forward and backward alone (what any task pays for its encoder), and
(b) a whole `MaskedLMTask` step (BERT's corruption in the collate, the encoder, the output layer
over the chosen positions, the loss, the backward).

    python bench/pretraining.py [--config configs/pretraining/mlm.yaml] [--data data/monolingual]
        [--batches 8] [--max-tokens 4096] [--threads 2] [--repeats 3] [--json]

One process on the CPU, the model of --config (configs/pretraining/mlm.yaml unless given;
untrained: its cost does not depend on its weights). --batches training batches are drawn and
collated once for (a); for (b) the same examples are collated again each repeat, timed with
the step, since dynamic masking pays for its corruption every batch. A and B alternate
--repeats times and the fastest of each is reported, in source tokens a second; the issue's bar
is B ≥ 0.9 × A.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402
import yaml  # noqa: E402

from seqtasks.model_files.spec import ParsedSpec  # noqa: E402
from seqtasks.pretraining.data import MonolingualData  # noqa: E402
from seqtasks.pretraining.task import MaskedLMTask  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs/pretraining/mlm.yaml"


def build(config: Path, vocab_size: int) -> MaskedLMTask:
    spec = yaml.safe_load(config.read_text())["model"]
    spec["init_args"]["src_vocab_size"] = vocab_size
    return ParsedSpec(spec).build()


def encoder_pass(task: MaskedLMTask, batches: list) -> float:
    """Seconds of the encoder's forward and backward over `batches` (a stand-in loss)."""
    start = time.perf_counter()
    for batch in batches:
        task.zero_grad(set_to_none=True)
        task.encoder(batch.src, batch.src_mask).states.float().pow(2).mean().backward()
    return time.perf_counter() - start


def masked_lm_pass(task: MaskedLMTask, items: list, collate) -> float:
    """Seconds of whole masked-LM steps over `items`' batches, corruption included."""
    start = time.perf_counter()
    for examples in items:
        batch = collate(examples)
        task.zero_grad(set_to_none=True)
        task.loss(task.losses(batch)).backward()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=CONFIG)
    parser.add_argument("--data", type=Path, default=ROOT / "data/monolingual")
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)

    data = MonolingualData(str(args.data), max_tokens=args.max_tokens, num_workers=0)
    data.setup("fit")
    sampler = iter(data.train_dataloader().batch_sampler)
    dataset, collate = data.datasets["fit"], data.collate("fit")
    items = [[dataset[i] for i in next(sampler)] for _ in range(args.batches)]
    batches = [collate(examples) for examples in items]
    tokens = sum(int(b.src_mask.sum()) for b in batches)

    task = build(args.config, data.src_vocab_size).train()
    encoder_pass(task, batches[:1])  # warm-up: allocator, kernels
    masked_lm_pass(task, items[:1], collate)
    encoder, masked = [], []
    for _ in range(args.repeats):
        encoder.append(encoder_pass(task, batches))
        masked.append(masked_lm_pass(task, items, collate))
    found = {
        "config": str(args.config),
        "threads": args.threads,
        "batches": args.batches,
        "source_tokens": tokens,
        "encoder_tokens_per_s": round(tokens / min(encoder), 1),
        "masked_lm_tokens_per_s": round(tokens / min(masked), 1),
    }
    found["ratio"] = round(found["masked_lm_tokens_per_s"] / found["encoder_tokens_per_s"], 3)
    if args.json:
        print(json.dumps(found))
    else:
        print(
            f"{tokens:,} source tokens in {args.batches} batches, {args.threads} threads: "
            f"encoder forward+backward {found['encoder_tokens_per_s']:,.0f} tok/s; masked-LM "
            f"step {found['masked_lm_tokens_per_s']:,.0f} tok/s ({found['ratio']:.3f}×)"
        )


if __name__ == "__main__":
    main()
