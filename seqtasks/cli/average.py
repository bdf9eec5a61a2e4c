"""Average the weights of several checkpoints of one model into one checkpoint.

    seqtasks average ckpts/step*.ckpt --out averaged.ckpt
    seqtasks average runs/x/lightning_logs/version_0/checkpoints \\
        --last 5 --out averaged.ckpt          # the 5 checkpoints with the highest global step

Averaging the last few checkpoints of a run usually scores a little better than the last one
alone (Vaswani et al. 2017 average the last 5 or 20). Floating-point tensors are averaged in
float64 and cast back; integer buffers, hyperparameters, vocabularies and the training state
come from the newest checkpoint. Checkpoints of another task or model (any setting of its
specification but those only training reads: `num_heads: a.ckpt 2, b.ckpt 4`), vocabulary or
architecture, or of a newer seqtasks, are refused before anything is written, naming the file.
The output is written atomically and loads like any checkpoint (`seqtasks translate
--checkpoint averaged.ckpt`, `seqtasks test --ckpt_path …`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from seqtasks.cli.arguments import CommandParser, check_outputs, positive_int
from seqtasks.io.files import open_atomic


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = CommandParser(prog="seqtasks average", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "checkpoints", nargs="+", type=Path, help="checkpoint files, or folders of *.ckpt files"
    )
    parser.add_argument(
        "--out", "--output", required=True, type=Path, help="the averaged checkpoint"
    )
    parser.add_argument(
        "--last",
        type=positive_int,
        metavar="K",
        help="average only the K with the highest global step",
    )
    args = parser.parse_args(argv)
    try:
        args.paths = expand(args.checkpoints)
    except ValueError as error:
        parser.error(f"argument checkpoints: {error}")
    check_outputs(parser, {"--out": args.out}, {"a checkpoint to average": args.paths})
    return args


def expand(paths: list[Path]) -> list[Path]:
    """Files as given; a folder gives its *.ckpt files (not the hidden temporary ones).

    Raises:
        ValueError: for a model folder (no training state to average), or a folder without
            checkpoints.
    """
    found: list[Path] = []
    for path in paths:
        if (path / "config.json").is_file():
            raise ValueError(
                f"{path} is a model folder: average takes checkpoints (.ckpt), which keep the "
                "training state an averaged checkpoint goes on from"
            )
        if path.is_dir():
            inside = sorted(p for p in path.glob("*.ckpt") if not p.name.startswith("."))
            if not inside:
                raise ValueError(f"{path} is a folder without checkpoints (*.ckpt)")
            found += inside
        else:
            found.append(path)
    return found


def newest(paths: list[Path], k: int) -> list[Path]:
    """The `k` checkpoints with the highest global step, oldest first; of several at one step
    (last.ckpt beside the step's own file) only the first named counts."""
    from seqtasks.io.checkpoint_files import read_checkpoint

    by_step: dict[int, Path] = {}
    for path in paths:
        by_step.setdefault(read_checkpoint(path, mmap=True).get("global_step", 0), path)
    return [by_step[step] for step in sorted(by_step)[-k:]]


def main(argv: list[str] | None = None) -> int:
    """Write the average; 0, or 2 for checkpoints that cannot be averaged."""
    args = parse_args(argv)
    import torch  # after the arguments

    from seqtasks.io.checkpoint_files import CheckpointError
    from seqtasks.model_files.averaging import average_checkpoints

    try:
        paths = args.paths
        if args.last is not None:
            paths = newest(paths, args.last)
        averaged = average_checkpoints(paths)
    except CheckpointError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    with open_atomic(args.out) as f:
        torch.save(averaged, f)
    print(f"averaged {len(paths)} checkpoints (step {averaged.get('global_step')}) into {args.out}")
    for path in paths:
        print(f"  {path}")
    return 0
