"""How `bench/peers.py` runs each system: training for a number of steps, reading its per-step
clock, and beam search, each in a child process whose peak memory (`ru_maxrss` of that child
alone, from `os.wait4`) is its own."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent

# OpenNMT-py's log line of a step (report_every: 1): its time and "bsz: src/tgt/sents", the
# mean tokens of the steps it reports (here one: that step's real target tokens, EOS included).
ONMT_STEP = re.compile(
    r"^\[(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) INFO\] Step\s+(?P<step>\d+)/.*?"
    r"bsz:\s*\d+/\s*(?P<tgt>\d+)/"
)


@dataclass
class Run:
    """A finished child: its stdout and stderr, and its peak resident memory in MB."""

    stdout: str
    stderr: str
    peak_mb: float


def run(cmd: list[str], cwd: Path, threads: int, env: dict[str, str] | None = None) -> Run:
    """Run `cmd` to the end with `threads` threads and passive OpenMP waiting; raise with the
    tail of its output if it fails."""
    full_env = {**os.environ, "OMP_NUM_THREADS": str(threads), "OMP_WAIT_POLICY": "PASSIVE",
                "MKL_NUM_THREADS": str(threads), **(env or {})}  # fmt: skip
    out, err = cwd / ".child.out", cwd / ".child.err"
    with open(out, "w") as stdout, open(err, "w") as stderr:
        child = subprocess.Popen(cmd, cwd=cwd, env=full_env, stdout=stdout, stderr=stderr)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
    result = Run(out.read_text(), err.read_text(), usage.ru_maxrss / 1024.0)
    if child.returncode != 0:
        raise RuntimeError(
            f"{' '.join(map(str, cmd))} failed ({child.returncode}):\n{result.stderr[-3000:]}"
        )
    return result


def rate(steps: list[tuple[float, int]], warmup: int) -> float:
    """Real target tokens a second over the steps after the first `warmup`: the tokens of steps
    warmup+1 … n over the time from the end of step `warmup` to the end of step n."""
    if len(steps) <= warmup + 1:
        raise ValueError(f"{len(steps)} steps timed, need more than warmup + 1 = {warmup + 1}")
    start = steps[warmup - 1][0] if warmup else steps[0][0]
    timed = steps[warmup:] if warmup else steps[1:]
    return sum(tokens for _, tokens in timed) / (steps[-1][0] - start)


def onmt_steps(log: str) -> list[tuple[float, int]]:
    """(time, target tokens) of each step in an OpenNMT-py log written with report_every 1."""
    steps = []
    for line in log.splitlines():
        match = ONMT_STEP.match(line)
        if match:
            when = datetime.strptime(match["time"], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            steps.append((when, int(match["tgt"])))
    return steps


def seqtasks_fit(data: Path, folder: Path, callbacks: list[dict], *options: str) -> list[str]:
    """`seqtasks fit` of configs/translation/transformer.yaml on `data`, into `folder`, with no
    time limit, no validation and only `callbacks`; `options` go to the command line."""
    return [sys.executable, "-m", "seqtasks", "fit",
            "--config", str(ROOT / "configs/translation/transformer.yaml"),
            "--data.init_args.data_dir", str(data), "--trainer.max_time", "null",
            "--trainer.limit_val_batches", "0", "--trainer.num_sanity_val_steps", "0",
            "--trainer.default_root_dir", str(folder), "--trainer.callbacks",
            json.dumps(callbacks), *options]  # fmt: skip


def clocked_fit(
    data: Path, folder: Path, steps: int, warmup: int, threads: int, *options: str
) -> dict:
    """`seqtasks_fit` for `steps` optimiser steps in `folder` (`options` added), timed by
    bench/peers_clock.py: real target tokens/s after `warmup` steps, peak MB, steps, and the
    model it keeps."""
    folder.mkdir(parents=True, exist_ok=True)
    clock = folder / "steps.json"
    callback = {
        "class_path": "peers_clock.StepClock",
        "init_args": {"path": str(clock), "checkpoint": str(folder / "model.ckpt")},
    }
    cmd = seqtasks_fit(data, folder, [callback], "--trainer.max_steps", str(steps),
                       "--trainer.logger", "false", "--trainer.enable_checkpointing", "false",
                       *options)  # fmt: skip
    child = run(cmd, folder, threads, {"PYTHONPATH": str(BENCH)})
    clocked = [tuple(step) for step in json.loads(clock.read_text())]
    return {"tokens_per_s": rate(clocked, warmup), "peak_mb": child.peak_mb,
            "steps": len(clocked), "model": str(folder / "model.ckpt")}  # fmt: skip


@dataclass
class Systems:
    """Where things are: the OpenNMT-py environment, the data, the working folder."""

    onmt_bin: Path
    data: Path
    work: Path
    threads: int

    def train_seqtasks(self, name: str, steps: int, warmup: int) -> dict:
        """`seqtasks fit` of the config, `steps` optimiser steps, no validation; the model kept."""
        return clocked_fit(self.data, self.work / name, steps, warmup, self.threads)

    def train_opennmt(self, name: str, steps: int, warmup: int) -> dict:
        """`onmt_train` of bench/opennmt/transformer.yaml for `steps` steps, a line a step."""
        folder = self.work / name
        folder.mkdir(parents=True, exist_ok=True)
        cmd = [str(self.onmt_bin / "onmt_train"), "-config", "transformer.yaml",
               "-train_steps", str(steps), "-report_every", "1", "-save_checkpoint_steps",
               str(steps), "-save_model", str(folder / "model")]  # fmt: skip
        child = run(cmd, self.work, self.threads)
        clocked = onmt_steps(child.stderr)  # its step lines go to stderr, not to -log_file
        return {"tokens_per_s": rate(clocked, warmup), "peak_mb": child.peak_mb,
                "steps": len(clocked), "model": str(folder / f"model_step_{steps}.pt")}  # fmt: skip

    def decode(self, system: str, model: str, source: Path, out: Path, beam: int,
               compute_type: str = "float32", max_length: int = 250,
               stop: str | None = None) -> dict:  # fmt: skip
        """Beam search of `source` (raw text for seqtasks, pieces for the others): seconds,
        sentences, output tokens, peak MB; the output pieces in `out`. `stop`: seqtasks'
        stopping rule (its model's own if None)."""
        if system == "opennmt":
            cmd = [str(self.onmt_bin / "onmt_translate"), "-model", model, "-src", str(source),
                   "-output", str(out), "-beam_size", str(beam), "-batch_type", "tokens",
                   "-batch_size", "2000", "-max_length", str(max_length), "-report_time",
                   "-gpu", "-1"]  # fmt: skip
            # OpenNMT-py 3.5.1 pickles its options in the checkpoint: torch >= 2.6 refuses them
            child = run(cmd, self.work, self.threads, {"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"})
            report = child.stdout + child.stderr
            per_s = re.search(r"Tokens per second: ([\d.]+)", report)
            total = re.search(r"Total translation time \(s\): ([\d.]+)", report)
            if per_s is None or total is None:
                raise RuntimeError(f"no time report in onmt_translate's output:\n{report[-2000:]}")
            lines = out.read_text(encoding="utf-8").splitlines()
            tokens = sum(len(line.split()) for line in lines)
            # its tokens/s has more digits than its total time (0.1 s), unless nothing came out
            seconds = tokens / float(per_s[1]) if tokens else max(float(total[1]), 0.05)
            result = {"seconds": seconds, "sentences": len(lines), "tokens": tokens}
        else:
            cmd = [sys.executable, str(BENCH / "peers_decode.py"), system, model, str(source),
                   str(out), "--beam", str(beam), "--threads", str(self.threads),
                   "--compute-type", compute_type, "--max-length", str(max_length)]  # fmt: skip
            if stop is not None:
                cmd += ["--stop", stop]
            child = run(cmd, self.work, self.threads)
            result = json.loads(child.stdout.strip().splitlines()[-1])
        return {**result, "peak_mb": child.peak_mb,
                "sentences_per_s": result["sentences"] / result["seconds"],
                "tokens_per_s": result["tokens"] / result["seconds"]}  # fmt: skip
