"""Decoding measurements of bench/gpu.py: inputs per second and output tokens per second of
greedy and beam search through the API that the apps use (`seqtasks.load(...).translate`,
`.parse`, `.caption`), on the first inputs of the config's test split."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import lightning as L
import torch
from gpu_profile import print_summary, profiled
from gpu_train import synchronize
from precision import inference_precision

import seqtasks
from seqtasks.captioning.task import CaptioningTask
from seqtasks.parsing.task import ParsingTask
from seqtasks.parsing.trees import NONE_TAG
from seqtasks.tasks.base import EncoderDecoderTask
from seqtasks.translation.task import TranslationTask

TASKS: dict[type, str] = {
    TranslationTask: "translation",
    ParsingTask: "parsing",
    CaptioningTask: "captioning",
}
UNITS = {"translation": "sentences", "parsing": "sentences", "captioning": "images"}
PROFILED = 256  # inputs of the profiled decoding pass: a trace of a few batches


def task_name(task: EncoderDecoderTask) -> str:
    for cls, name in TASKS.items():
        if isinstance(task, cls):
            return name
    raise SystemExit(f"bench/gpu.py measures translation, parsing and captioning, not {task}")


def save_checkpoint(task: EncoderDecoderTask, datamodule: Any, path: Path) -> Path:
    """`task` as `seqtasks.load` reads it: weights, hyperparameters and what its task's
    `setup` would have taken from `datamodule` (tokenisers, vocabularies, image size)."""
    name = task_name(task)
    if name == "translation":
        task.set_tokenizers(datamodule.src_tokenizer, datamodule.tgt_tokenizer)
    elif name == "parsing":
        task.set_vocabulary(datamodule.vocabulary)
    else:
        task.set_preprocessing(datamodule.tokenizer, datamodule.image_size)
    checkpoint = {
        "state_dict": {k: v.detach().cpu() for k, v in task.state_dict().items()},
        "hyper_parameters": dict(task.hparams),
        "pytorch-lightning_version": L.__version__,
    }
    task.on_save_checkpoint(checkpoint)
    torch.save(checkpoint, path)
    return path


def test_inputs(name: str, datamodule: Any, n: int) -> tuple[list[Any], str]:
    """The first `n` inputs of the test split (raw sentences, word lists, image paths), and the
    split's name; parsing falls back to the validation split when there is no test treebank
    (the shared WSJ sample has none)."""
    split = datamodule.splits["test"]
    if name == "translation":
        path = Path(datamodule.data_dir) / f"{split}.{datamodule.src_lang}"
        return path.read_text(encoding="utf-8").splitlines()[:n], split
    if name == "parsing":
        if not (Path(datamodule.data_dir) / f"{split}.mrg").is_file():
            split = datamodule.splits["validate"]
        trees = datamodule.read(split)[:n]
        return [[w for w, t in tree.pos() if t != NONE_TAG] for tree in trees], split
    return [image.path for image in datamodule.images[split][:n]], split


def run(model: Any, name: str, inputs: Any, beam: int, budget: int | None) -> list[list[str]]:
    """Decode `inputs` with `beam` (1: greedy); the output pieces of each best result (EOS not
    counted). `budget`: source tokens (images, for captioning) per batch; None: the API's
    default."""
    keyword = "batch_size" if name == "captioning" else "max_tokens"
    size = {} if budget is None else {keyword: budget}
    if name == "translation":
        return [t.tokens for t in model.translate(inputs, beam=beam, **size)]
    if name == "parsing":
        return [p.tokens for p in model.parse(inputs, beam=beam, **size)]
    return [c.words for c in model.caption(inputs, beam=beam, **size)]


def measure(
    checkpoint: Path,
    name: str,
    inputs: list[Any],
    beams: list[int],
    budget: int | None,
    precision: str,
    device: torch.device,
    profile: tuple[Path, str] | None = None,
) -> dict[str, Any]:
    """Per beam size, inputs/s and output tokens/s (EOS not counted) of decoding all `inputs`
    with the model of `checkpoint` on `device` in `precision` ("32" or "bf16"), after an
    untimed warm-up on the first 16. Captioning reads its images before the clock starts. In
    bf16, the same inputs are decoded again in float32, untimed: `same_as_fp32` is the share
    of outputs that are the same, piece for piece.
    `profile` (a folder, a name): then one more pass of the widest beam over the first
    PROFILED inputs, profiled (`gpu_profile.profiled`), its summary under "profile"."""
    model = seqtasks.load(str(checkpoint), device=str(device))
    if name == "captioning":
        inputs = model.read(inputs)
    results = {}
    with inference_precision(device, precision):
        for beam in beams:
            run(model, name, inputs[:16], beam, budget)
            synchronize(device)
            start = time.perf_counter()
            outputs = run(model, name, inputs, beam, budget)
            synchronize(device)
            seconds = time.perf_counter() - start
            tokens = sum(map(len, outputs))
            results[str(beam)] = {
                "seconds": seconds,
                "inputs_per_s": len(inputs) / seconds,
                "output_tokens": tokens,
                "tokens_per_s": tokens / seconds,
                "same_as_fp32": None,
            }
            if precision != "32":
                with torch.autocast(device.type, enabled=False):  # float32 inside bf16's
                    reference = run(model, name, inputs, beam, budget)
                same = sum(a == b for a, b in zip(outputs, reference, strict=True))
                results[str(beam)]["same_as_fp32"] = same / len(inputs)
        if profile is not None:
            folder, stem = profile
            widest, some = max(beams), inputs[:PROFILED]
            results["profile"] = profiled(lambda: run(model, name, some, widest, budget), device,
                                          folder, f"{stem}_beam{widest}")  # fmt: skip
            print_summary(results["profile"])
    return results


def decoding(
    task: EncoderDecoderTask,
    datamodule: Any,
    checkpoint: str | None,
    n: int,
    beams: list[int],
    budget: int | None,
    precision: str,
    device: torch.device,
    profile: tuple[Path, str] | None = None,
) -> dict[str, Any]:
    """`measure` on the first `n` test inputs with the model of `checkpoint`, or, without one,
    with `task` as it is (saved and loaded again: an untrained model); printed and returned.
    The device's peak memory counter is reset first."""
    name = task_name(task)
    inputs, split = test_inputs(name, datamodule, n)
    with tempfile.TemporaryDirectory() as folder:
        path = checkpoint or save_checkpoint(task, datamodule, Path(folder) / "model.ckpt")
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        runs = measure(Path(path), name, inputs, beams, budget, precision, device, profile)
    profiled_pass = runs.pop("profile", None)
    what = f"checkpoint {checkpoint}" if checkpoint else (
        "NOT TRAINED: the model after the steps above (outputs run longer than a trained "
        "model's; pass --checkpoint for the honest figure)")  # fmt: skip
    unit = UNITS[name]
    print(f"  decoding {len(inputs)} {unit} of {split} in {precision}, batches of "
          f"{budget or 'the API default size'}; {what}")  # fmt: skip
    for beam, run in runs.items():
        same = run["same_as_fp32"]
        print(
            f"    beam {beam}: {run['inputs_per_s']:,.1f} {unit}/s, "
            f"{run['tokens_per_s']:,.0f} output tokens/s ({run['output_tokens']:,} tokens)"
            + ("" if same is None else f"; outputs as in float32: {100 * same:.1f} %"),
            flush=True,
        )
    return {"checkpoint": checkpoint, "trained": checkpoint is not None, "split": split,
            "inputs": len(inputs), "budget": budget, "beams": runs,
            "profile": profiled_pass}  # fmt: skip
