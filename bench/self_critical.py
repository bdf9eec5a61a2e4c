"""What a self-critical step costs against what it is made of: K + 1 decodes of the batch (K
samples, the greedy output) and one teacher-forced forward and backward of the K samples.

    python bench/self_critical.py [--checkpoint CKPT] [--data data/multi30k] [--samples 5]
        [--batches 5] [--max-tokens 1024] [--threads 2] [--json]

One process on the CPU: the first --batches training batches of Multi30k (token-bucketed at
--max-tokens, as configs/translation/transformer_scst.yaml), through the model of
configs/translation/transformer.yaml (or --checkpoint's; untrained, its samples run to the
length limit, the slowest case). For each batch, timed apart and then together: greedy search,
sampling K per input, the teacher-forced forward + backward of the K samples, their rewards
(sentence BLEU), and the whole `self_critical_step` with its backward. Reported: seconds of
each summed over the batches, and the step's time over the sum of its parts (1.0: the step
costs its parts and nothing more).
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
from seqtasks.search.by_settings import limits  # noqa: E402
from seqtasks.search.single_path import greedy, sample  # noqa: E402
from seqtasks.tasks.self_critical import SelfCritical, self_critical_step, sequence_log_probs  # noqa: E402,E501
from seqtasks.translation.data import TranslationData  # noqa: E402
from seqtasks.translation.task import TranslationTask  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def build(checkpoint: Path | None, data: TranslationData) -> TranslationTask:
    if checkpoint is not None:
        return TranslationTask.load_from_checkpoint(checkpoint, map_location="cpu")
    config = yaml.safe_load((ROOT / "configs/translation/transformer.yaml").read_text())
    spec = config["model"]
    spec["init_args"] |= {
        "src_vocab_size": data.src_vocab_size,
        "tgt_vocab_size": data.tgt_vocab_size,
    }
    task = ParsedSpec(spec).build()
    task.set_tokenizers(data.src_tokenizer, data.tgt_tokenizer)
    return task


def time_batch(task: TranslationTask, batch, settings: SelfCritical) -> dict[str, float]:
    """Seconds of each part of a self-critical step on `batch`, and of the step itself."""
    k, seconds, rows = (
        settings.samples,
        {},
        torch.arange(len(batch)).repeat_interleave(settings.samples),
    )
    task.eval()
    memory = task.encode(batch)
    repeated = memory.index_select(rows)
    cut = limits(task.decoder, repeated, task.test_settings)
    with torch.no_grad():
        start = time.perf_counter()
        greedy(task.decoder, memory, limits(task.decoder, memory, task.test_settings))
        seconds["greedy"] = time.perf_counter() - start
        start = time.perf_counter()
        drawn = [n[0] for n in sample(task.decoder, repeated, cut)]
        seconds["samples"] = time.perf_counter() - start
    start = time.perf_counter()
    task.sequence_rewards("bleu", batch, drawn, k)
    seconds["rewards"] = time.perf_counter() - start
    task.zero_grad()
    start = time.perf_counter()
    again = task.encode(batch).index_select(rows)
    sequence_log_probs(task.decoder, again, drawn, None, cut).sum().backward()
    seconds["forward_backward"] = time.perf_counter() - start
    task.train()
    task.zero_grad()
    start = time.perf_counter()
    self_critical_step(task, batch, settings).loss.backward()
    seconds["step"] = time.perf_counter() - start
    return seconds


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", type=Path)
    p.add_argument("--data", type=Path, default=Path("data/multi30k"))
    p.add_argument("--samples", type=int, default=5)
    p.add_argument("--batches", type=int, default=5)
    p.add_argument("--max-tokens", type=int, default=1024)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    data = TranslationData(str(args.data), max_tokens=args.max_tokens)
    data.setup("fit")
    task = build(args.checkpoint, data).train()
    settings = SelfCritical.from_setting({"samples": args.samples}, task.rewards)
    batches = [b for b, _ in zip(data.train_dataloader(), range(args.batches))]
    seconds: dict[str, float] = {}
    for batch in batches:
        for name, value in time_batch(task, batch, settings).items():
            seconds[name] = seconds.get(name, 0.0) + value
    parts = sum(v for name, v in seconds.items() if name != "step")
    k = args.samples
    result = {
        "samples": k,
        "batches": len(batches),
        "seconds": seconds,
        # the step also rewards the greedy outputs: a K-th of the samples' reward time
        "step_over_parts": seconds["step"] / (parts + seconds["rewards"] / k),
    }
    for name, value in result["seconds"].items():
        print(f"{name:>17}: {value:7.2f} s")
    print(f"the step over its parts: {result['step_over_parts']:.2f}")
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
