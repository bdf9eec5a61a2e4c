"""Training and decoding speed of configs on one device (a GPU, or the CPU), each set against
the device's own matrix-product rate, measured in the same run.

    python bench/gpu.py --config CFG [--config "CFG2 --its.own overrides" ...] [--data DIR]
        [--max-tokens N] [--steps 30] [--warmup 5] [--split-steps N] [--flop-batches 2]
        [--device auto|cpu|cuda] [--precision bf16-mixed|32-true] [--checkpoint CK ...]
        [--beams 1 5] [--sentences 1000] [--decode-tokens N] [--decode-precision 32|bf16]
        [--threads N] [--profile DIR [--profile-steps 3]] [--json] [-- OVERRIDES FOR EVERY CONFIG]

Per config, model and DataModule are built as `seqtasks fit --config` builds them (SeqtasksCLI,
not run; the task is translation, parsing or captioning by its class), and on its real training
loader (pinned on a GPU, as the Trainer has it):
  1. training: --warmup steps, then --steps timed with the device waited for only at the ends
     (forward under bf16 autocast for bf16-mixed, backward, the trainer's gradient clipping, the
     optimiser and scheduler of `configure_optimizers`; no Trainer, no logging): real (non-pad)
     target tokens/s, and sentences/s (parsing) or images/s (captioning); then --split-steps
     more with a wait after each phase, splitting a step into data (fetch, collate, copy to
     the device), forward, backward and optimiser (slower than the timed loop by its waits);
  2. matrix products: FLOPs of forward + backward of --flop-batches real batches, padded only
     to their longest sequences (bench/step_anatomy.py's count; padding beyond that is waste)
     per real target token, and the share of the device's matmul rate (n × n `torch.mm` in
     the training's dtype: bfloat16 for bf16-mixed, float32 otherwise; measured once per dtype
     in this process) that the timed loop reached: tokens/s × FLOPs/token ÷ rate;
  3. peak device memory of training and of decoding (CUDA only; host peak RSS is printed);
  4. decoding: greedy and beam search (--beams) of the first --sentences inputs of the test
     split through `seqtasks.load(...)` and its translate / parse / caption, batches of the
     API's default size unless --decode-tokens (source tokens; images for captioning):
     inputs/s and output tokens/s. With no --checkpoint, the just-trained model is saved and
     loaded: an untrained model, whose outputs run longer than a trained one's.
  5. with --profile DIR: where the time goes (bench/gpu_profile.py): --profile-steps training
     steps after the timed loop, and one pass of the widest beam over the first 256 inputs,
     each a table and a trace in DIR and a summary in the JSON (time by kind of work, the top
     operators, and on a GPU the share of the wall time the device was busy).
The first --config is the baseline; each next one (optionally with overrides of its own in the
same quoted argument) is measured after it in this process and compared to it in a table of
ratios. What a CPU cannot measure is printed as "not measured on cpu: <why>" and is null in
JSON. With --json the last stdout line is one JSON object. Sets OMP_WAIT_POLICY=PASSIVE unless
told otherwise.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import resource  # noqa: E402
import shlex  # noqa: E402
import sys  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_decode import UNITS, decoding, task_name  # noqa: E402
from gpu_profile import print_summary, profiled  # noqa: E402
from gpu_train import Step, count_flops, matmul_rate, synchronize, training  # noqa: E402
from translation_setup import resolve  # noqa: E402
from translation_train import cycle_loader  # noqa: E402

from seqtasks.devices import check_device  # noqa: E402

PRECISIONS = {"bf16-mixed": torch.bfloat16, "32-true": torch.float32, "32": torch.float32}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", action="append", required=True,
                   help="a config, then optionally its own overrides, in one argument; repeat "
                   "to compare (the first is the baseline)")  # fmt: skip
    p.add_argument("--data", default=None, help="data_dir for every config (default: its own)")
    p.add_argument("--max-tokens", type=int, default=None, help="padded tokens per batch")
    p.add_argument("--steps", type=int, default=30, help="timed training steps")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps before them")
    p.add_argument("--split-steps", type=int, default=None, help="default: --steps")
    p.add_argument("--flop-batches", type=int, default=2)
    p.add_argument("--device", default="auto")
    p.add_argument("--precision", default=None, choices=["bf16-mixed", "32-true"],
                   help="default: the config's, else bf16-mixed (GPU), 32-true (CPU)")  # fmt: skip
    p.add_argument("--checkpoint", action="append", default=[],
                   help="trained model to decode with: once, or once per --config")  # fmt: skip
    p.add_argument("--beams", type=int, nargs="*", default=[1, 5], help="none: no decoding")
    p.add_argument("--sentences", type=int, default=1000, help="test inputs to decode")
    p.add_argument("--decode-tokens", type=int, default=None,
                   help="source tokens (captioning: images) per decoding batch; default: the "
                   "API's")  # fmt: skip
    p.add_argument("--decode-precision", default=None, choices=["32", "bf16"],
                   help="default: bf16 when training in bf16-mixed, else 32")  # fmt: skip
    p.add_argument("--matmul-size", type=int, default=None, help="default: 8192 GPU, 1024 CPU")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: torch's)")
    p.add_argument("--profile", type=Path, default=None,
                   help="write where the time goes here (bench/gpu_profile.py): training steps "
                   "and one decoding pass of the widest beam, per config")  # fmt: skip
    p.add_argument("--profile-steps", type=int, default=3, help="training steps profiled")
    p.add_argument("--json", action="store_true", help="end with one JSON line")
    argv = sys.argv[1:] if argv is None else list(argv)
    split = argv.index("--") if "--" in argv else len(argv)
    args = p.parse_args(argv[:split])
    args.overrides = argv[split + 1 :]
    args.split_steps = args.steps if args.split_steps is None else args.split_steps
    if (
        min(args.steps, args.flop_batches, args.sentences, args.profile_steps) < 1
        or args.warmup < 0
    ):
        p.error("need --steps, --flop-batches, --sentences, --profile-steps >= 1, --warmup >= 0")
    if len(args.checkpoint) not in (0, 1, len(args.config)):
        p.error("give --checkpoint once, or once per --config")
    args.checkpoint = [resolve(c) for c in args.checkpoint] or [None]
    args.checkpoint *= len(args.config) // len(args.checkpoint)  # one per config
    return args


def log(message: str) -> None:
    print(message, flush=True)


def build(config: str, overrides: list[str], device: torch.device):
    """(task, datamodule, the config's trainer precision or None, trainer) as `seqtasks fit`
    builds them, the trainer on `device`, without logger or progress bar, built but not run."""
    from seqtasks.cli.main import SeqtasksCLI

    accelerator = "gpu" if device.type == "cuda" else "cpu"
    cli = SeqtasksCLI(
        subclass_mode_model=True,
        subclass_mode_data=True,
        save_config_callback=None,
        run=False,
        args=["--config", config, "--trainer.logger", "false",
              "--trainer.enable_progress_bar", "false", "--trainer.accelerator", accelerator,
              "--trainer.devices", "1", *overrides],
    )  # fmt: skip
    trainer = cli.trainer
    clip_by = trainer.gradient_clip_algorithm or "norm"
    if clip_by != "norm" or trainer.accumulate_grad_batches != 1:
        raise SystemExit(f"{config}: the bench clips by norm and does not accumulate gradients")
    return cli.model, cli.datamodule, cli.config.trainer.precision, trainer


def peak_memory(device: torch.device) -> float | None:
    """Peak GB allocated on a CUDA device since the last reset; None on a CPU."""
    return torch.cuda.max_memory_allocated(device) / 1e9 if device.type == "cuda" else None


def measure_config(
    spec: str, number: int, args: argparse.Namespace, device: torch.device, rates: dict
) -> dict:
    """Every figure of one config (`spec`: its path, then its own overrides)."""
    config, *own = shlex.split(spec)
    overrides = list(args.overrides)  # then the bench's options, then the config's own
    if args.data:
        overrides += ["--data.init_args.data_dir", args.data]
    if args.max_tokens:
        overrides += ["--data.init_args.max_tokens", str(args.max_tokens)]
    overrides += own
    task, datamodule, configured, trainer = build(resolve(config), overrides, device)
    precision = args.precision or {"32": "32-true"}.get(configured, configured)
    precision = precision or ("bf16-mixed" if device.type == "cuda" else "32-true")
    if precision not in PRECISIONS:
        raise SystemExit(f"{config}: precision {precision} is not measured (bf16-mixed, 32-true)")
    name, unit = task_name(task), UNITS[task_name(task)]
    datamodule.trainer = trainer  # its loaders pin batches as the Trainer's would
    datamodule.setup("fit")
    task.to(device).train()
    clip = float(trainer.gradient_clip_val or 0.0)
    step = Step(task, clip, precision == "bf16-mixed", device)
    params = sum(p.numel() for p in task.parameters())
    log(f"[{number}] {spec} {' '.join(args.overrides)}".rstrip())
    log(
        f"  {name}: {type(task.encoder).__name__} + {type(task.decoder).__name__}, {params:,} "
        f"parameters, {precision}, {type(step.optimizer).__name__}, clip {clip}"
    )
    flops = count_flops(step, datamodule.train_dataloader(), args.flop_batches)
    task.configure_model()  # torch_compile, as the Trainer calls it (after counting: eager)
    dtype = PRECISIONS[precision]
    if dtype not in rates:  # once per dtype: the device's, whichever config runs
        n = args.matmul_size or (8192 if device.type == "cuda" else 1024)
        tflops = matmul_rate(device, dtype, n) / 1e12
        rates[dtype] = {"dtype": str(dtype).removeprefix("torch."), "n": n, "tflops": tflops}
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    figures = training(step, datamodule.train_dataloader(), args.steps, args.warmup,
                       args.split_steps, flops, rates[dtype], unit)  # fmt: skip
    memory = {"train": peak_memory(device), "decode": None}
    profiles: dict[str, Any] = {}
    stem = f"{number}_{Path(config).stem}"
    if args.profile:  # after the timed loop: the profiler's overhead stays out of its figures
        batches = cycle_loader(datamodule.train_dataloader())
        profiles["train"] = profiled(lambda: step(batches), device, args.profile,
                                     f"{stem}_train", args.profile_steps, warmup=1)  # fmt: skip
        print_summary(profiles["train"])
    decode_precision = args.decode_precision or ("bf16" if precision == "bf16-mixed" else "32")
    decode = None
    if args.beams:
        profile = (args.profile, stem) if args.profile else None
        decode = decoding(task, datamodule, args.checkpoint[number], args.sentences, args.beams,
                          args.decode_tokens, decode_precision, device, profile)  # fmt: skip
        memory["decode"] = peak_memory(device)
        if (decoded := decode.pop("profile")) is not None:
            profiles["decode"] = decoded
    not_measured = {}
    if device.type == "cuda":
        log(f"  peak device memory: training {memory['train']:.2f} GB" + (
            "" if decode is None else f", decoding {memory['decode']:.2f} GB"))  # fmt: skip
    else:
        not_measured = {
            "peak_memory_gb": f"not measured on {device.type}: there is no device memory "
            "apart from the host's (host_peak_rss_mb is the process's high-water mark)",
            "host_to_device": f"not measured on {device.type}: batches stay in host memory, "
            "so data is fetching and collating only",
        }  # fmt: skip
        for line in not_measured.values():
            log(f"  {line}")
    return {"config": config, "spec": spec, "overrides": overrides, "task": name, "unit": unit,
            "precision": precision, "parameters": params,
            "optimizer": type(step.optimizer).__name__, "clip": clip, **figures,
            "peak_memory_gb": memory if device.type == "cuda" else None, "decode": decode,
            "decode_precision": decode_precision if decode else None,
            "profile": profiles or None, "not_measured": not_measured}  # fmt: skip


def rows(run: dict) -> dict[str, float | None]:
    """The figures the comparison table shows, by row name."""
    out = {
        "train target tokens/s": run["train"]["tokens_per_s"],
        f"train {run['unit']}/s": run["train"]["examples_per_s"],
        "matmul share %": 100 * run["matmul_share"],
        "peak memory train GB": run["peak_memory_gb"] and run["peak_memory_gb"]["train"],
        "peak memory decode GB": run["peak_memory_gb"] and run["peak_memory_gb"]["decode"],
    }
    for beam, figures in (run["decode"] or {"beams": {}})["beams"].items():
        what = "greedy" if beam == "1" else f"beam-{beam}"
        out[f"{what} {run['unit']}/s"] = figures["inputs_per_s"]
        out[f"{what} output tokens/s"] = figures["tokens_per_s"]
    return out


def print_table(runs: list[dict]) -> None:
    """Each run's figures, and each later run's ratio to the first."""
    table = [rows(run) for run in runs]
    names = list(dict.fromkeys(name for row in table for name in row))
    width = max(map(len, names))
    log(f"\n{'':{width}}" + "".join(f"  {f'[{i}]':>12}" for i in range(len(runs)))
        + "".join(f"  {f'[{i}]/[0]':>8}" for i in range(1, len(runs))))  # fmt: skip
    for name in names:
        values = [row.get(name) for row in table]
        cells = "".join(f"  {'-' if v is None else f'{v:12,.1f}':>12}" for v in values)
        ratios = "".join(
            f"  {f'{v / values[0]:.2f}x' if v is not None and values[0] else '-':>8}"
            for v in values[1:]
        )
        log(f"{name:{width}}{cells}{ratios}")
    for i, run in enumerate(runs):
        log(f"[{i}] {run['spec']}")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    import lightning  # noqa: F401  (it sets its loggers' levels on import; quiet them after)

    for name in ("lightning.pytorch", "lightning.fabric"):
        logging.getLogger(name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", module=r"lightning(\..*)?$")
    device = torch.device(check_device(args.device))
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else (
        f"cpu, {torch.get_num_threads()} threads")  # fmt: skip
    log(f"{where}; torch {torch.__version__}; OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}")
    rates: dict = {}
    runs = []
    for number, spec in enumerate(args.config):
        runs.append(measure_config(spec, number, args, device, rates))
        gc.collect()  # the last config's model and data go before the next one's
        if device.type == "cuda":
            torch.cuda.empty_cache()
        synchronize(device)
    print_table(runs)
    host_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    log(f"host peak RSS of the process: {host_rss:,.0f} MB")
    result = {"device": where, "device_type": device.type, "torch": torch.__version__,
              "host_peak_rss_mb": host_rss, "runs": runs}  # fmt: skip
    if args.json:
        print(json.dumps(result), flush=True)
    return result


if __name__ == "__main__":
    main()
