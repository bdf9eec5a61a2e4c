"""What `seqtasks serve` says while it starts, on stderr: what its workers are loading, at once
and then every PROGRESS_SECONDS while any worker is not ready, and one line once the server
answers, with the address it listens on and each task's models:

    seqtasks serve: loading translation (dates-model), parsing (wsj) in 2 worker processes
    seqtasks serve: still loading after 15 s: translation (dates-model): 0 of 1 workers ready
    seqtasks serve: ready on http://127.0.0.1:8000 (translation: dates-model; parsing: wsj)

Loading a model takes seconds to minutes, during which uvicorn has already said it is running
(it binds the port first) and LitServe says nothing. The ready line is written only once GET
/health has answered 200 from the HTTP process, so a person, or a script reading stderr, may
wait for it.
"""

from __future__ import annotations

import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from litserve.utils import WorkerSetupStatus

PROGRESS_SECONDS = 15.0
POLL_SECONDS = 0.1
PREFIX = "seqtasks serve: "


def say(line: str) -> None:
    """Write `line` to stderr at once (it may be a pipe, which Python buffers)."""
    print(PREFIX + line, file=sys.stderr, flush=True)


def address(host: str, port: int) -> str:
    """The URL of `host`:`port`, an IPv6 address in brackets."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def loopback(host: str, port: int) -> str:
    """The URL this machine reaches a server listening on `host`:`port` at."""
    return address({"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host), port)


@dataclass
class Startup:
    """What is said of one server's start: each task's model names (`names`) and endpoint path
    (`paths`), and the key its /health needs (None: an open server)."""

    names: dict[str, list[str]]
    paths: dict[str, str]
    key: str | None = None
    write: Callable[[str], None] = say
    every: float = PROGRESS_SECONDS
    clock: Callable[[], float] = time.monotonic
    _started: float | None = field(default=None, init=False)
    _said: float = field(default=0.0, init=False)

    def models(self, task: str) -> str:
        return " + ".join(self.names[task])

    def loading(self, statuses: Mapping[str, Any]) -> None:
        """Called as the workers set up, with LitServe's status of each ("translate_0": its
        endpoint's last path segment and number): say what they load, the first time, then
        what is not ready yet, once `every` seconds have passed since the last line."""
        now = self.clock()
        if self._started is None:
            self._started = self._said = now
            tasks = ", ".join(f"{task} ({self.models(task)})" for task in self.names)
            count = len(statuses)
            self.write(f"loading {tasks} in {count} worker process{'es' * (count != 1)}")
            return
        if now - self._said < self.every:
            return
        self._said = now
        task_of = {path.rsplit("/", 1)[-1]: task for task, path in self.paths.items()}
        ready: Counter[str] = Counter()
        total: Counter[str] = Counter()
        for worker, status in statuses.items():
            task = task_of.get(worker.rpartition("_")[0], "")
            total[task] += 1
            ready[task] += status == WorkerSetupStatus.READY
        waiting = "; ".join(
            f"{task} ({self.models(task)}): {ready[task]} of {total[task]} "
            f"worker{'s' * (total[task] != 1)} ready"
            for task in self.names
            if ready[task] < total[task]
        )
        if waiting:
            self.write(f"still loading after {now - self._started:.0f} s: {waiting}")

    def ready(self, url: str) -> None:
        """The one line saying the server answers at `url`, and with which models."""
        models = "; ".join(f"{task}: {self.models(task)}" for task in self.names)
        self.write(f"ready on {url} ({models})")

    def announce(self, host: str, port: int) -> None:
        """Ask GET /health, as a client would, until it answers 200; then say `ready`."""
        request = urllib.request.Request(
            loopback(host, port) + "/health",
            headers={} if self.key is None else {"X-API-Key": self.key},
        )
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        while True:
            try:
                with opener.open(request, timeout=5) as answer:
                    if answer.status == 200:
                        break
            except OSError:  # not listening yet, or 503 (urllib's errors are OSErrors)
                pass
            time.sleep(POLL_SECONDS)
        self.ready(address(host, port))
