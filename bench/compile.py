"""`torch_compile: true` against eager: `seqtasks fit` of configs/translation/transformer.yaml,
each run in its own process, interleaved (eager, compiled, eager, …).

    python bench/compile.py [--data data/multi30k] [--work DIR] [--steps 60] [--warmup 20]
        [--rounds 2] [--threads 2]

Real target tokens/s over the steps after --warmup (which take the compilation), from each
step's end time (bench/peers_clock.py, as bench/peers.py measures training), the process's peak
RSS, and its wall time from start to exit (the compilation included).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from peers_systems import clocked_fit


def train(data: Path, folder: Path, steps: int, warmup: int, compiled: bool, threads: int) -> dict:
    """`clocked_fit` with `torch_compile` on or off, and its wall time."""
    start = time.perf_counter()
    option = ("--model.init_args.torch_compile", str(compiled).lower())
    result = clocked_fit(data, folder, steps, warmup, threads, *option)
    return result | {"wall_s": time.perf_counter() - start}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=Path("data/multi30k"))
    p.add_argument("--work", type=Path, help="default: a temporary folder")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="seqtasks-compile-") as scratch:
        work = args.work or Path(scratch)
        for r in range(args.rounds):
            for compiled in (False, True):
                name = "compiled" if compiled else "eager"
                result = train(args.data.resolve(), work / f"{name}_{r}", args.steps,
                               args.warmup, compiled, args.threads)  # fmt: skip
                print(f"round {r + 1} {name:<8}: {result['tokens_per_s']:,.0f} tgt tok/s after "
                      f"{args.warmup} steps, peak {result['peak_mb']:,.0f} MB, wall "
                      f"{result['wall_s']:.0f} s", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
