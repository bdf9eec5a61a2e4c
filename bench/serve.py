"""Throughput and latency of `seqtasks serve` for translation, against one offline call.

    python bench/serve.py --checkpoint CKPT --source data/multi30k/test_2016_flickr.de
        [--sentences 1000] [--clients 1 8 32] [--per-request 1] [--beam 5]
        [--max-batch-size 32] [--batch-timeout 0.01] [--workers-per-device 1]
        [--url http://127.0.0.1:PORT] [--json]

1. Offline reference: the first --sentences lines of --source translated by
   `seqtasks.load(CKPT).translate(lines, beam=...)` in one call, in this process, before the
   server starts (so the two never share the cores).
2. The server: `python -m seqtasks serve CKPT` with the batching options given, started in a
   subprocess (or --url, a server already running), warmed up with a few requests.
3. For each number of clients: that many threads, each with its own keep-alive HTTP connection,
   take requests of --per-request lines from one queue of the same lines until all are sent;
   sentences/s is lines / wall time, latency is per request (mean, p50, p95). Every answer is
   compared with the offline translation of its lines.

Requests carry the key of LIT_SERVER_API_KEY (X-API-Key) when it is set, as the server it
starts (or the --url one) then needs.

With --json the last stdout line is one JSON object.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import http.client  # noqa: E402
import json  # noqa: E402
import queue  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import urllib.parse  # noqa: E402
from pathlib import Path  # noqa: E402


def offline(checkpoint: str, lines: list[str], beam: int) -> tuple[list[str], float]:
    """The translations of `lines` from one `Translator.translate` call, and its seconds."""
    import seqtasks

    translator = seqtasks.load(checkpoint, device="cpu")
    translator.translate(lines[:8], beam=beam)  # warm-up
    start = time.perf_counter()
    texts = [t.text for t in translator.translate(lines, beam=beam)]
    return texts, time.perf_counter() - start


def start_server(args: argparse.Namespace) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [sys.executable, "-m", "seqtasks", "serve", args.checkpoint, "--port", str(port)]
    command += ["--max-batch-size", str(args.max_batch_size)]
    command += ["--batch-timeout", str(args.batch_timeout)]
    command += ["--workers-per-device", str(args.workers_per_device)]
    command += ["--max-sentences", str(max(64, args.per_request)), "--log-level", "warning"]
    process = subprocess.Popen(command, start_new_session=True)
    return process, f"http://127.0.0.1:{port}"


def wait_until_healthy(url: str, process: subprocess.Popen | None, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise SystemExit(f"error: the server ended with status {process.returncode}")
        try:
            if request(connect(url), "GET", "/health")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.25)
    raise SystemExit(f"error: no healthy server at {url} after {timeout:.0f} s")


def connect(url: str) -> http.client.HTTPConnection:
    parts = urllib.parse.urlsplit(url)
    return http.client.HTTPConnection(parts.hostname, parts.port, timeout=300)


def request(connection: http.client.HTTPConnection, method: str, path: str, body=None):
    """(status, body bytes) of one request on a keep-alive connection; with the server's key
    when LIT_SERVER_API_KEY is set (a server started with it needs it)."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"} if data is not None else {}
    if os.environ.get("LIT_SERVER_API_KEY"):
        headers["X-API-Key"] = os.environ["LIT_SERVER_API_KEY"]
    connection.request(method, path, data, headers)
    response = connection.getresponse()
    return response.status, response.read()


def load(url: str, lines: list[str], clients: int, per_request: int, beam: int) -> dict:
    """Send `lines` in requests of `per_request` from `clients` threads; speed and latency."""
    jobs: queue.Queue = queue.Queue()
    for first in range(0, len(lines), per_request):
        jobs.put((first, lines[first : first + per_request]))
    latencies: list[float] = []
    answers: dict[int, list[str]] = {}
    failures: list[str] = []
    lock = threading.Lock()

    def client() -> None:
        connection = connect(url)
        while True:
            try:
                first, sentences = jobs.get_nowait()
            except queue.Empty:
                return
            start = time.perf_counter()
            status, body = request(
                connection, "POST", "/translate", {"sentences": sentences, "beam": beam}
            )
            elapsed = time.perf_counter() - start
            with lock:
                latencies.append(elapsed)
                if status == 200:
                    answers[first] = [t["text"] for t in json.loads(body)["results"]]
                else:
                    failures.append(f"{status}: {body[:200]!r}")

    threads = [threading.Thread(target=client) for _ in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - start
    texts = [text for first in sorted(answers) for text in answers[first]]
    latencies.sort()
    return {
        "clients": clients,
        "sentences": len(lines),
        "seconds": seconds,
        "sentences_per_s": len(lines) / seconds,
        "latency_mean_ms": 1000 * statistics.fmean(latencies),
        "latency_p50_ms": 1000 * latencies[len(latencies) // 2],
        "latency_p95_ms": 1000 * latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))],
        "failures": failures,
        "texts": texts,
    }


def stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True, help="a translation checkpoint")
    parser.add_argument("--source", required=True, help="sentences to translate, one a line")
    parser.add_argument("--sentences", type=int, default=1000, help="the first N lines")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--per-request", type=int, default=1, help="sentences per request")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--max-batch-size", type=int, default=32)
    parser.add_argument("--batch-timeout", type=float, default=0.01)
    parser.add_argument("--workers-per-device", type=int, default=1)
    parser.add_argument("--url", help="a server already running on CHECKPOINT (none started)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    lines = Path(args.source).read_text(encoding="utf-8").splitlines()[: args.sentences]

    reference, offline_seconds = offline(args.checkpoint, lines, args.beam)
    process, url = (None, args.url) if args.url else start_server(args)
    try:
        wait_until_healthy(url, process)
        warm = connect(url)
        for line in lines[:4]:
            request(warm, "POST", "/translate", {"sentences": [line], "beam": args.beam})
        levels = [load(url, lines, n, args.per_request, args.beam) for n in args.clients]
    finally:
        if process is not None:
            stop(process)

    print(
        f"{len(lines)} sentences of {args.source}, beam {args.beam}, {args.per_request} per "
        f"request; server: --max-batch-size {args.max_batch_size} --batch-timeout "
        f"{args.batch_timeout} --workers-per-device {args.workers_per_device}"
    )
    print(f"offline, one translate() call: {len(lines) / offline_seconds:.1f} sentences/s")
    print("clients  sentences/s  mean ms  p50 ms  p95 ms  same as offline")
    for level in levels:
        same = sum(a == b for a, b in zip(level.pop("texts"), reference))
        level["same_as_offline"] = same
        print(
            f"{level['clients']:>7}  {level['sentences_per_s']:>11.1f}  "
            f"{level['latency_mean_ms']:>7.0f}  {level['latency_p50_ms']:>6.0f}  "
            f"{level['latency_p95_ms']:>6.0f}  {same}/{len(lines)}"
            + (f"  ({len(level['failures'])} failed)" if level["failures"] else "")
        )
    result = {
        "sentences": len(lines),
        "beam": args.beam,
        "per_request": args.per_request,
        "max_batch_size": args.max_batch_size,
        "batch_timeout": args.batch_timeout,
        "workers_per_device": args.workers_per_device,
        "offline_sentences_per_s": len(lines) / offline_seconds,
        "levels": levels,
    }
    if args.json:
        print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
