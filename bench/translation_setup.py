"""What bench/translation_train.py and bench/translation_decode.py share: ours built from a config
as `seqtasks fit` builds it, the tutorial-style reference registered for its decoder family, and
the ours-against-reference table they print.

Adding a reference for another decoder family: write bench/reference_X.py with
`build_like(task)`, `make_batch(...)`, `batch_loss(...)`, `SUMMARY` and optionally
`decoding_like(task)` (see reference_rnn.py, reference_transformer.py) and register it in
REFERENCES; the ours-side measurement needs no change.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import resource
import sys
import warnings
from pathlib import Path
from types import ModuleType

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the reference_* modules

# Decoder class name -> module in bench/ providing build_like / make_batch / batch_loss.
REFERENCES = {"BahdanauDecoder": "reference_rnn", "TransformerDecoder": "reference_transformer"}


def add_common_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default="configs/translation/transformer.yaml")
    p.add_argument("--data", default="data/multi30k")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-reference", action="store_true", help="measure ours only")
    p.add_argument("--json", action="store_true", help="end with one JSON line")


def parse(p: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Arguments before `--`; those after it go to the config, as `seqtasks fit` takes them."""
    argv = sys.argv[1:] if argv is None else list(argv)
    split = argv.index("--") if "--" in argv else len(argv)
    args = p.parse_args(argv[:split])
    args.overrides = argv[split + 1 :]
    for name in ("config", "data", "checkpoint"):
        if hasattr(args, name):
            setattr(args, name, resolve(getattr(args, name)))
    return args


def resolve(path: str | None) -> str | None:
    """A path as given if it exists from here, else relative to the repository root."""
    if path is None or Path(path).exists() or not (ROOT / path).exists():
        return path
    return str(ROOT / path)


def build_from_config(config: str, data_dir: str, overrides: list[str] = ()):
    """(task, datamodule, gradient clip value) exactly as `seqtasks fit --config` builds them,
    with `overrides` (command-line options of `seqtasks fit`) applied."""
    from seqtasks.cli.main import SeqtasksCLI

    cli = SeqtasksCLI(
        subclass_mode_model=True,
        subclass_mode_data=True,
        save_config_callback=None,
        run=False,
        args=["--config", config, "--data.init_args.data_dir", data_dir,
              "--trainer.logger", "false", "--trainer.enable_progress_bar", "false",
              *overrides],
    )  # fmt: skip
    clip = cli.trainer.gradient_clip_val
    algorithm = cli.trainer.gradient_clip_algorithm or "norm"
    if clip and algorithm != "norm":
        raise SystemExit(f"gradient_clip_algorithm={algorithm} is not supported by the benchmark")
    return cli.model, cli.datamodule, float(clip or 0.0)


def setup(args: argparse.Namespace):
    """Threads, seed and quiet loggers set; (task, datamodule, clip) of the config."""
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    import lightning  # noqa: F401  (it sets its loggers' levels on import; quiet them after)

    for name in ("lightning.pytorch", "lightning.fabric"):
        logging.getLogger(name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", module=r"lightning(\..*)?$")
    warnings.filterwarnings("ignore", message=".*nested tensors is in prototype")
    warnings.filterwarnings("ignore", message=".*mismatched key_padding_mask")
    task, datamodule, clip = build_from_config(args.config, args.data, args.overrides)
    log(
        f"model: {Path(args.config).stem} ({architecture(task)}); torch {torch.__version__}, "
        f"{torch.get_num_threads()} thread(s), OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}"
    )
    return task, datamodule, clip


def architecture(task) -> str:
    return f"{type(task.encoder).__name__} + {type(task.decoder).__name__}"


def reference_module(task, args: argparse.Namespace) -> ModuleType | None:
    """The reference module registered for the task's decoder, or None (said why)."""
    decoder = type(task.decoder).__name__
    if args.no_reference:
        log("reference skipped (--no-reference)")
    elif decoder not in REFERENCES:
        log(f"no reference registered for {decoder}: ours only")
    else:
        return importlib.import_module(REFERENCES[decoder])
    return None


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def n_params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def log(msg: str) -> None:
    print(msg, flush=True)


def ratio(a, b):
    return None if a is None or b in (None, 0) else a / b


def fmt(x, digits=1) -> str:
    if x is None:
        return "-"
    if isinstance(x, int):
        return f"{x:,}"
    return f"{x:,.{digits}f}"


def print_table(rows: list[tuple[str, object, object, int]]) -> None:
    """Rows of (name, ours, reference, digits), with the ratio ours / reference."""
    log("")
    width = max(len(r[0]) for r in rows)
    log(f"{'':{width}}  {'ours':>14}  {'reference':>14}  {'ours/ref':>9}")
    for name, ours, ref, digits in rows:
        r = ratio(ours, ref) if isinstance(ours, (int, float)) else None
        log(f"{name:{width}}  {fmt(ours, digits):>14}  {fmt(ref, digits):>14}  "
            f"{(f'{r:.2f}x' if r is not None else '-'):>9}")  # fmt: skip
