"""How fast does data_prep/shards.py turn a corpus into shards, and in how much memory?

    python bench/streaming_prepare.py --corpus /tmp/stream2m [--threads 1 2] [--json]

Runs `data_prep/shards.py` on CORPUS (into CORPUS/shards, once per --threads value:
sentencepiece's threads) and reports lines/s, the seconds of tokenising and writing, the wall
time including start-up, the child's peak RSS, the shards' size on disk, and for scale the peak
RSS of a process that only imports what it imports. A corpus of millions:
bench/streaming_corpus.py.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_measured(command: list[str]) -> tuple[str, float, float]:
    """Run `command`; (stdout, wall seconds, the child's own peak RSS in MiB)."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = process.stdout.read(), process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{stderr[-3000:]}")
    return stdout, time.perf_counter() - start, usage.ru_maxrss / 1024


def preparation_speed(stdout: str, lines: int) -> tuple[float, float]:
    """(seconds, lines/s) of tokenising and writing, from what data_prep/shards.py prints:
    "wrote DIR in 32.1 s (62,400 lines/s)". The rate is computed from the unrounded time, so
    it is the one to keep; the seconds are printed to 0.1 s only (0.0 for a small corpus)."""
    found = re.search(r" in ([\d.]+) s \(([\d,]+) lines/s\)", stdout)
    seconds, lines_per_s = float(found.group(1)), float(found.group(2).replace(",", ""))
    return (lines / lines_per_s if lines_per_s else seconds), lines_per_s


def prepare(corpus: str, threads_list: list[int]) -> dict:
    command = [sys.executable, "-c", "import seqtasks.translation.streaming.shards"]
    _, import_s, import_rss = run_measured(command)
    results = {"import_only": {"wall_s": import_s, "peak_rss_mib": import_rss}}
    for threads in threads_list:
        out = Path(corpus) / "shards"
        stdout, wall, peak = run_measured(
            [sys.executable, str(ROOT / "data_prep" / "shards.py"), "--source", corpus]
            + ["--out", str(out), "--threads", str(threads)]
        )
        print(stdout.strip(), flush=True)
        manifest = json.loads((out / "manifest.json").read_text())
        seconds, lines_per_s = preparation_speed(stdout, manifest["lines"])
        results[f"threads={threads}"] = {
            "lines": manifest["lines"],
            "pairs": manifest["pairs"],
            "shards": len(manifest["shards"]),
            "seconds": seconds,
            "lines_per_s": lines_per_s,
            "wall_s": wall,
            "peak_rss_mib": peak,
            "disk_mib": sum(p.stat().st_size for p in out.iterdir()) / 2**20,
        }
    return results


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", required=True, help="a TranslationData folder")
    p.add_argument("--threads", type=int, nargs="+", default=[1],
                   help="sentencepiece threads: one preparation per value")  # fmt: skip
    p.add_argument("--json", action="store_true", help="end with one JSON line")
    args = p.parse_args(argv)
    result = prepare(args.corpus, args.threads)
    print(json.dumps(result) if args.json else json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
