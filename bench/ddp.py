"""Does a 2-process DDP run train like one process with twice the batch?

    python bench/ddp.py [--config configs/translation/transformer.yaml] [--data data/multi30k]
        [--steps 300] [--max-tokens 1024] [--window 25] [--json]

Three runs of --steps optimizer steps on the CPU (gloo, one thread per process), each from the
same initial weights (the config's seed), with the config's model, optimiser, schedule, label
smoothing and gradient clipping, and no validation:

  ddp      2 processes, --max-tokens padded tokens a batch on each; DDP averages the gradients;
  single   1 process, 2 × --max-tokens a batch;
  control  as `single` with another data seed, so another batch order: how far two equally
           good runs drift apart, the yardstick for the distance between `ddp` and `single`.

Every step records the loss of the whole step: for `ddp`, the mean of the two ranks' per-token
losses (the objective whose gradient DDP applies) and, beside it, the loss per target token over
both ranks (what one process with the same examples would minimise). The curves are smoothed by
a moving mean over --window steps and compared: the mean absolute difference of the smoothed
curves, and the mean loss of the last --window steps. With --json the last stdout line is one
JSON object. `ddp` matches `single` within tolerance when its curve distance is at most twice
the control's and its final loss within 0.1 nats of `single`'s.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import lightning as L  # noqa: E402
import torch  # noqa: E402

from seqtasks.cli.main import SeqtasksCLI  # noqa: E402
from seqtasks.data.tokenizer import PAD_ID  # noqa: E402

RUNS = ("ddp", "single", "control")


class StepLoss(L.Callback):
    """Rank 0 keeps, per optimizer step, every rank's (loss, real target tokens, padded target
    tokens) and writes them to `path` as JSON when training ends, with the training time."""

    def __init__(self, path: Path):
        self.path = path
        self.steps: list[list[list[float]]] = []  # (steps, ranks, 3)
        self.start = 0.0

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.start = time.perf_counter()

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any, i: int
    ) -> None:
        loss = outputs["loss"].detach().float()
        real = (batch.tgt_out != PAD_ID).sum().to(loss)
        local = torch.stack([loss, real, loss.new_tensor(batch.tgt_out.numel())])
        every = pl_module.all_gather(local).reshape(-1, 3)  # (ranks, 3)
        if trainer.is_global_zero:
            self.steps.append(every.tolist())

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.is_global_zero:
            wall = time.perf_counter() - self.start
            self.path.write_text(json.dumps({"steps": self.steps, "wall_s": wall}))


def train(args: argparse.Namespace) -> None:
    """One run (`--run`), in this process; Lightning starts the second DDP process by running
    this script again with the same arguments."""
    torch.set_num_threads(1)
    devices = 2 if args.run == "ddp" else 1
    max_tokens = args.max_tokens * (1 if args.run == "ddp" else 2)
    cli = SeqtasksCLI(
        subclass_mode_model=True,
        subclass_mode_data=True,
        run=False,
        args=[
            "--config",
            args.config,
            f"--data.init_args.data_dir={args.data}",
            f"--data.init_args.max_tokens={max_tokens}",
            f"--data.init_args.seed={1 if args.run == 'control' else 0}",
            "--trainer.logger=false",
        ],
    )
    trainer = L.Trainer(
        accelerator="cpu",
        devices=devices,
        strategy="ddp" if devices > 1 else "auto",
        max_steps=args.steps,
        gradient_clip_val=cli.config.trainer.gradient_clip_val,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        use_distributed_sampler=False,  # the token-bucket sampler shards batches itself
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[StepLoss(Path(args.out))],
    )
    trainer.fit(cli.model, datamodule=cli.datamodule)


def smoothed(values: torch.Tensor, window: int) -> torch.Tensor:
    """Moving mean over the last `window` steps, from the first full window on."""
    return values.unfold(0, window, 1).mean(dim=1)


def compare(records: dict[str, dict], window: int) -> dict[str, Any]:
    curves, tokens_weighted, report = {}, None, {"runs": {}}
    for name, record in records.items():
        steps = torch.tensor(record["steps"])  # (steps, ranks, 3)
        loss, real, padded = steps.unbind(-1)  # (steps, ranks) each
        curves[name] = loss.mean(dim=1)  # what DDP's averaged gradient descends
        if name == "ddp":
            tokens_weighted = (loss * real).sum(dim=1) / real.sum(dim=1)
        report["runs"][name] = {
            "steps": len(steps),
            "s_per_step": record["wall_s"] / len(steps),
            "real_target_tokens_per_step": real.sum(dim=1).mean().item(),
            "padded_target_tokens_per_step": padded.sum(dim=1).mean().item(),
            "first_loss": curves[name][:window].mean().item(),
            "final_loss": curves[name][-window:].mean().item(),
        }
    smooth = {name: smoothed(curve, window) for name, curve in curves.items()}
    final = {name: run["final_loss"] for name, run in report["runs"].items()}
    report["curve_distance"] = {
        name: (smooth[name] - smooth["single"]).abs().mean().item() for name in ("ddp", "control")
    }
    report["final_difference"] = {
        name: abs(final[name] - final["single"]) for name in ("ddp", "control")
    }
    report["ddp_rank_mean_vs_token_mean"] = (curves["ddp"] - tokens_weighted).abs().mean().item()
    distance = report["curve_distance"]
    report["within_tolerance"] = (
        distance["ddp"] <= 2 * distance["control"] and report["final_difference"]["ddp"] <= 0.1
    )
    return report


def show(report: dict[str, Any], args: argparse.Namespace) -> None:
    print(
        f"{args.config}, {args.steps} steps; ddp: 2 processes × {args.max_tokens} tokens, "
        f"single/control: 1 process × {2 * args.max_tokens} tokens"
    )
    header = ("run", "s/step", "real tgt tok/step", "first loss", "final loss")
    print("{:8} {:>7} {:>18} {:>11} {:>11}".format(*header))
    for name, run in report["runs"].items():
        print(
            f"{name:8} {run['s_per_step']:7.2f} {run['real_target_tokens_per_step']:18.0f} "
            f"{run['first_loss']:11.3f} {run['final_loss']:11.3f}"
        )
    distance, final = report["curve_distance"], report["final_difference"]
    print(
        f"mean |smoothed curve − single's| over {args.window}-step windows: "
        f"ddp {distance['ddp']:.4f}, control {distance['control']:.4f}"
    )
    print(f"|final loss − single's|: ddp {final['ddp']:.4f}, control {final['control']:.4f}")
    print(
        f"ddp, mean |rank-mean loss − token-mean loss|: {report['ddp_rank_mean_vs_token_mean']:.4f}"
    )
    print(f"within tolerance: {report['within_tolerance']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="configs/translation/transformer.yaml")
    parser.add_argument("--data", default="data/multi30k")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--max-tokens", type=int, default=1024, help="per process, for ddp")
    parser.add_argument("--window", type=int, default=25)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--run", choices=RUNS, help=argparse.SUPPRESS)  # one run, internal
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        train(args)
        return
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    records = {}
    with tempfile.TemporaryDirectory(prefix="seqtasks_ddp_") as folder:
        for name in RUNS:
            out = Path(folder) / f"{name}.json"
            command = [sys.executable, __file__, *sys.argv[1:], "--run", name, "--out", str(out)]
            subprocess.run(command, env=env, check=True)
            records[name] = json.loads(out.read_text())
    report = compare(records, args.window)
    show(report, args)
    if args.json:
        print(json.dumps({"args": vars(args), **report}))


if __name__ == "__main__":
    main()
