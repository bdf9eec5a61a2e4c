"""Training measurements of bench/gpu.py: a timed loop that waits for the device only at its
ends, a pass that waits between phases to split the step, the matrix-product FLOPs of a step,
and the device's matrix-product rate to set them against."""

from __future__ import annotations

import dataclasses
import statistics
import time
import warnings
from collections.abc import Iterator
from typing import Any

import torch
from lightning.fabric.utilities.apply_func import move_data_to_device
from torch import Tensor
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.optim import Optimizer
from torch.optim.lr_scheduler import ReduceLROnPlateau
from torch.utils.flop_counter import FlopCounterMode
from translation_train import cycle_loader  # epochs reshuffled as in fit

from seqtasks.data.tokenizer import PAD_ID
from seqtasks.tasks.base import EncoderDecoderTask

PHASES = ("data", "forward", "backward", "optimizer")


def synchronize(device: torch.device) -> None:
    """Wait for the work queued on `device` (a CPU has none queued)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def inputs_of(batch: Any) -> Tensor:
    """What the encoder reads: (B, S) source tokens, or (B, 3, H, W) images, or (B, C, h, w)
    cached feature maps."""
    for name in ("src", "images", "features"):
        if getattr(batch, name, None) is not None:
            return getattr(batch, name)
    raise TypeError(f"{type(batch).__name__} holds no inputs")


class Step:
    """One optimiser step as Lightning's automatic optimisation takes it, without the Trainer:
    `training_step`'s loss (`teacher_forced`, `loss`; logging left out), under bfloat16
    autocast for bf16-mixed; backward; clipping by norm at `clip` (0: none); the optimiser and
    scheduler of `configure_optimizers` (a ReduceLROnPlateau steps after validation, so never
    here)."""

    def __init__(self, task: EncoderDecoderTask, clip: float, bf16: bool, device: torch.device):
        self.task, self.clip, self.bf16, self.device = task, clip, bf16, device
        config = task.configure_optimizers()
        if isinstance(config, Optimizer):
            self.optimizer, self.scheduler = config, None
        else:
            self.optimizer = config["optimizer"]
            self.scheduler = config["lr_scheduler"]["scheduler"]
        if isinstance(self.scheduler, ReduceLROnPlateau):
            self.scheduler = None
        self.params = [p for group in self.optimizer.param_groups for p in group["params"]]

    def load(self, batches: Iterator) -> tuple[Any, int, int]:
        """The next batch on the device (copied as Lightning copies it: non-blocking from pinned
        memory on a GPU), its real (non-pad) target tokens and its examples, counted on the
        host before the copy."""
        batch = next(batches)
        tokens, examples = int((batch.tgt_out != PAD_ID).sum()), len(batch)
        return move_data_to_device(batch, self.device), tokens, examples

    def forward(self, batch: Any) -> Tensor:
        with torch.autocast(self.device.type, torch.bfloat16, enabled=self.bf16):
            memory, output = self.task.teacher_forced(batch)
            return self.task.loss(output, batch.tgt_out, memory.mask)

    def update(self) -> None:
        if self.clip:
            torch.nn.utils.clip_grad_norm_(self.params, self.clip)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.scheduler is not None:
            self.scheduler.step()

    def __call__(self, batches: Iterator) -> tuple[Tensor, int, int, float]:
        """A whole step: (its loss, its tokens, its examples, seconds spent loading its batch)."""
        start = time.perf_counter()
        batch, tokens, examples = self.load(batches)
        loading = time.perf_counter() - start
        loss = self.forward(batch)
        loss.backward()
        self.update()
        return loss.detach(), tokens, examples, loading


def timed_loop(step: Step, batches: Iterator, steps: int, warmup: int) -> dict[str, Any]:
    """`warmup` steps, then `steps` timed ones with the device waited for only before and after
    them, as training runs. `host_data_share`: of the timed wall time, the share the host spent
    fetching and copying batches (on a GPU it overlaps queued device work)."""
    losses = [step(batches)[0] for _ in range(warmup)]
    synchronize(step.device)
    tokens = examples = 0
    loading = 0.0
    start = time.perf_counter()
    for _ in range(steps):
        loss, n, e, seconds = step(batches)
        losses.append(loss)
        tokens, examples, loading = tokens + n, examples + e, loading + seconds
    synchronize(step.device)
    seconds = time.perf_counter() - start
    return {
        "steps": steps,
        "warmup": warmup,
        "tokens": tokens,
        "examples": examples,
        "seconds": seconds,
        "tokens_per_s": tokens / seconds,
        "examples_per_s": examples / seconds,
        "s_per_step": seconds / steps,
        "mean_batch_tokens": tokens / steps,
        "host_data_share": loading / seconds,
        "loss_first": float(losses[0]),
        "loss_last": float(losses[-1]),
    }


def split_pass(step: Step, batches: Iterator, steps: int) -> dict[str, Any]:
    """`steps` more steps with the device waited for after each phase, so that each phase's
    wall time is its own: data (fetching, collating, copying to the device), forward,
    backward, optimiser (clipping, step, zeroing, scheduler). The waits cost time of their own:
    this pass is slower than `timed_loop`."""
    spent = dict.fromkeys(PHASES, 0.0)
    tokens = 0
    for _ in range(steps):
        marks = [time.perf_counter()]
        batch, n, _ = step.load(batches)
        synchronize(step.device)
        marks.append(time.perf_counter())
        loss = step.forward(batch)
        synchronize(step.device)
        marks.append(time.perf_counter())
        loss.backward()
        synchronize(step.device)
        marks.append(time.perf_counter())
        step.update()
        synchronize(step.device)
        marks.append(time.perf_counter())
        tokens += n
        for phase, begin, end in zip(PHASES, marks, marks[1:]):
            spent[phase] += end - begin
    total = sum(spent.values())
    return {
        "steps": steps,
        "tokens": tokens,
        "tokens_per_s": tokens / total,
        "ms_per_step": {phase: 1e3 * s / steps for phase, s in spent.items()},
        "share": {phase: s / total for phase, s in spent.items()},
    }


def trimmed(batch: Any) -> Any:
    """The batch padded only to its longest source and target, as today's collation pads it:
    padding beyond that (to a multiple of 8, to length buckets) is not useful work."""
    target = int((batch.tgt_out != PAD_ID).sum(dim=1).max())
    cut = {"tgt_in": batch.tgt_in[:, :target], "tgt_out": batch.tgt_out[:, :target]}
    if getattr(batch, "src_mask", None) is not None:
        source = int(batch.src_mask.sum(dim=1).max())
        cut.update(src=batch.src[:, :source], src_mask=batch.src_mask[:, :source])
    return dataclasses.replace(batch, **cut)


def count_flops(step: Step, loader: Any, n: int) -> dict[str, Any]:
    """Useful matrix-product FLOPs of forward + backward over the first `n` batches of
    `loader`, counted by `torch.utils.flop_counter` as bench/step_anatomy.py counts them (in
    float32, attention on the math kernel so that its products are seen; cuDNN and oneDNN off
    so that LSTMs run as products it sees) on the batches `trimmed` to their longest sequences,
    per real target token. Run it before compiling; the gradients are dropped, the optimiser
    does not step."""
    tokens, shapes, batches = 0, [], cycle_loader(loader)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # mkldnn.flags warns about Intel GPUs' TF32
        with (
            FlopCounterMode(display=False) as counter,
            sdpa_kernel(SDPBackend.MATH),
            torch.backends.cudnn.flags(enabled=False),
            torch.backends.mkldnn.flags(enabled=False),
        ):
            for _ in range(n):
                batch, t, _ = step.load(batches)
                batch = trimmed(batch)
                memory, output = step.task.teacher_forced(batch)
                step.task.loss(output, batch.tgt_out, memory.mask).backward()
                tokens += t
                shapes.append([*inputs_of(batch).shape, batch.tgt_in.size(1)])
    step.optimizer.zero_grad(set_to_none=True)
    flops = counter.get_total_flops()
    return {"flops": flops, "tokens": tokens, "per_token": flops / tokens, "batches": shapes}


def matmul_rate(device: torch.device, dtype: torch.dtype, n: int, repeats: int = 5) -> float:
    """FLOP/s of an n × n by n × n `torch.mm` in `dtype` on `device`: the median of `repeats`
    timings of a few products each, after one untimed product."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    products = 10 if device.type == "cuda" else 2
    torch.mm(a, b)
    synchronize(device)
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(products):
            torch.mm(a, b)
        synchronize(device)
        rates.append(2.0 * n**3 * products / (time.perf_counter() - start))
    return statistics.median(rates)


def training(
    step: Step,
    loader: Any,
    steps: int,
    warmup: int,
    split_steps: int,
    flops: dict[str, Any],
    rate: dict[str, Any],
    unit: str,
) -> dict[str, Any]:
    """The training figures of bench/gpu.py on `loader` (a DataLoader, read epoch after epoch):
    the timed loop, the split pass, and the share of `rate` (the device's matmul rate,
    `tflops`) that the timed loop reached with `flops` (`count_flops`); printed and returned."""
    batches = cycle_loader(loader)
    timed = timed_loop(step, batches, steps, warmup)
    split = split_pass(step, batches, split_steps)
    share = timed["tokens_per_s"] * flops["per_token"] / (rate["tflops"] * 1e12)
    print(
        f"  training: {timed['tokens_per_s']:,.0f} target tokens/s, "
        f"{timed['examples_per_s']:,.1f} {unit}/s, {1e3 * timed['s_per_step']:.1f} ms/step "
        f"({timed['mean_batch_tokens']:,.0f} tokens a batch), loss {timed['loss_first']:.3f} -> "
        f"{timed['loss_last']:.3f}; host fetching batches {100 * timed['host_data_share']:.0f} %"
    )
    phases = ", ".join(
        f"{phase} {ms:.1f} ms ({100 * split['share'][phase]:.0f} %)"
        for phase, ms in split["ms_per_step"].items()
    )
    print(
        f"  split ({split_steps} steps, a wait after each phase, so slower: "
        f"{split['tokens_per_s']:,.0f} tokens/s): {phases}"
    )
    print(
        f"  {flops['per_token'] / 1e6:.2f} MFLOP a target token (forward + backward); "
        f"{rate['dtype']} matmul ({rate['n']}²) {rate['tflops']:.2f} TFLOP/s; training reaches "
        f"{100 * share:.1f} % of it",
        flush=True,
    )
    return {"train": timed, "split": split, "flops": flops, "matmul": rate, "matmul_share": share}
