"""Time to quality: train systems for the same wall-clock time on one machine and score each at
--marks minutes (test_2016_flickr, beam 5, sacreBLEU cased).

    python bench/peers_quality.py [--opennmt-venv ONMT_VENV] [--data data/multi30k] --work DIR
        [--systems seqtasks opennmt] [--minutes 30] [--marks 10 20 30] [--every 25]
        [--side-by-side | --one-at-a-time]

Systems: `seqtasks` (configs/translation/transformer.yaml), `seqtasks-linear` (the same with
`self_attention: linear` in encoder and decoder), `opennmt` (bench/opennmt/transformer.yaml).
Side by side (the default), all train at once, each pinned to its own core (`taskset`) with one
thread, so each has the same share of the machine; one at a time, each gets every core in turn.
Each saves its model every --every steps with no validation (OpenNMT-py validates rarely by
default; a config's own validation would cost seqtasks time the peer does not spend); a
checkpoint's time is its file's modification time less its process's start, start-up included.
At each mark the last checkpoint saved by then is scored (all cores, each system's own beam
search). Prints a table, and writes DIR/quality.json.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from peers import bleu, prepare  # noqa: E402
from peers_systems import BENCH, Systems, seqtasks_fit  # noqa: E402

LINEAR = ["--model.init_args.encoder.init_args.self_attention", "linear",
          "--model.init_args.decoder.init_args.self_attention", "linear"]  # fmt: skip


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--opennmt-venv", type=Path, help="OpenNMT-py's environment, for opennmt")
    p.add_argument("--data", type=Path, default=Path("data/multi30k"))
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--systems", nargs="+", default=["seqtasks", "opennmt"],
                   choices=["seqtasks", "seqtasks-linear", "opennmt"])  # fmt: skip
    p.add_argument("--minutes", type=float, default=30)
    p.add_argument("--marks", type=float, nargs="+", default=[10, 20, 30])
    p.add_argument("--every", type=int, default=25, help="steps between checkpoints")
    p.add_argument("--one-at-a-time", action="store_true")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="for scoring")
    p.add_argument("--sentences", type=int, default=1000, help="test sentences scored")
    args = p.parse_args(argv)
    if max(args.marks) > args.minutes:
        p.error(f"a mark ({max(args.marks):g}) after --minutes ({args.minutes:g})")
    if "opennmt" in args.systems and args.opennmt_venv is None:
        p.error("--systems opennmt needs --opennmt-venv (bash bench/opennmt/install.sh VENV)")
    return args


def command(system: str, folder: Path, args: argparse.Namespace) -> list[str]:
    if system == "opennmt":
        return [str(args.opennmt_venv / "bin/onmt_train"), "-config", "transformer.yaml",
                "-train_steps", "1000000", "-save_checkpoint_steps", str(args.every),
                "-keep_checkpoint", "-1", "-save_model", str(folder / "model")]  # fmt: skip
    saver = {"class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
             "init_args": {"dirpath": str(folder), "filename": "step{step}", "save_top_k": -1,
                           "every_n_train_steps": args.every,
                           "auto_insert_metric_name": False}}  # fmt: skip
    linear = LINEAR if system == "seqtasks-linear" else []
    return seqtasks_fit(args.data.resolve(), folder, [saver], "--trainer.max_epochs", "1000",
                        *linear)  # fmt: skip


def train(args: argparse.Namespace, systems: list[str]) -> dict[str, float]:
    """Start each system (pinned to a core of its own when side by side), stop all a minute
    after --minutes; their start times."""
    threads = 1 if not args.one_at_a_time else os.cpu_count() or 1
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
           "OMP_WAIT_POLICY": "PASSIVE", "PYTHONPATH": str(BENCH)}  # fmt: skip
    children, starts = {}, {}
    # a minute past the last mark: a checkpoint being written when a run is killed is never one
    # that is scored (OpenNMT-py does not write its checkpoints atomically)
    run_for = args.minutes * 60 + 60
    for core, system in enumerate(systems):
        folder = args.work / f"quality_{system}"
        folder.mkdir(parents=True, exist_ok=True)
        cmd = command(system, folder, args)
        if not args.one_at_a_time:
            cmd = ["taskset", "-c", str(core % (os.cpu_count() or 1)), *cmd]
        starts[system] = time.time()
        with open(folder / "train.out", "w") as out:
            children[system] = subprocess.Popen(cmd, cwd=args.work, env=env, stdout=out,
                                                stderr=subprocess.STDOUT)  # fmt: skip
        print(f"{system}: started, log in {folder / 'train.out'}", flush=True)
        if args.one_at_a_time:
            stop(children, run_for, starts[system])
    if not args.one_at_a_time:
        stop(children, run_for, min(starts.values()))
    return starts


def stop(children: dict[str, subprocess.Popen], seconds: float, start: float) -> None:
    """Kill what still runs `seconds` after `start`; fail if one ended before then."""
    while time.time() < start + seconds:
        ended = [name for name, child in children.items() if child.poll() is not None]
        if ended:
            raise RuntimeError(f"{ended} stopped early: see train.out in their folders")
        time.sleep(5)
    for child in children.values():
        if child.poll() is None:
            child.kill()
            child.wait()


def checkpoints(folder: Path, start: float) -> list[tuple[float, Path]]:
    found = [*folder.glob("model_step_*.pt"), *folder.glob("step*.ckpt")]
    return sorted((path.stat().st_mtime - start, path) for path in found)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    args.work = args.work.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    runner = prepare(args, opennmt="opennmt" in args.systems)
    starts = train(args, args.systems)
    scorer = Systems(runner.onmt_bin, runner.data, runner.work, args.threads)
    result: dict = {"minutes": args.minutes, "side_by_side": not args.one_at_a_time,
                    "systems": {}}  # fmt: skip
    for system in args.systems:
        saved = checkpoints(args.work / f"quality_{system}", starts[system])
        rows = []
        for mark in args.marks:
            by_then = [(t, path) for t, path in saved if t <= mark * 60]
            if not by_then:
                rows.append({"minutes": mark, "checkpoint": None})
                continue
            seconds, path = by_then[-1]
            kind = "opennmt" if system == "opennmt" else "seqtasks"
            source = args.work / ("test.de.sp" if kind == "opennmt" else "test.de")
            out = path.with_suffix(".test.en.sp")
            decoded = scorer.decode(kind, str(path), source, out, 5)
            score = bleu(out, args.work / "test.en", args.data / "spm.en.model")
            rows.append({"minutes": mark, "checkpoint": path.name, "saved_at_s": seconds,
                         "bleu": score, "sentences_per_s": decoded["sentences_per_s"]})  # fmt: skip
            print(f"{system} at {mark:g} min: {path.name} (saved at {seconds / 60:.1f} min), "
                  f"BLEU {score:.2f}", flush=True)  # fmt: skip
        result["systems"][system] = rows
    (args.work / "quality.json").write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
