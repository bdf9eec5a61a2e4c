"""Starting the inference workers: the server serves once every worker has set up, or, when one
cannot (a model that does not load there, no memory left on its device, a `--max-length` over
what the model reads), stops every process it started and ends with that worker's reason.

LitServe's own start (`LitServer.verify_worker_status`) goes on as soon as ANY worker is ready,
so an endpoint whose worker failed would be served by nothing, and it waits for ever when no
worker was started at all; what a worker failed on is only in that worker's traceback. Here an
endpoint's `setup` hands its reason to `report_setup_failure`, which sends it to the main
process through a queue the server gives every endpoint before it starts them. Meanwhile the
server says what is loading, and once it answers, that it is ready (`startup`).
"""

from __future__ import annotations

import logging
import multiprocessing
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from multiprocessing.process import BaseProcess
from multiprocessing.queues import SimpleQueue
from typing import Any

import litserve as ls
from litserve.utils import WorkerSetupStatus

from seqtasks.serving.startup import Startup

POLL_SECONDS = 0.05


class WorkerSetupError(RuntimeError):
    """A worker could not set up, so the server does not serve (the message says why)."""


class CheckedServer(ls.LitServer):
    """A LitServer that serves only once all its workers are ready, and otherwise stops its
    processes and raises WorkerSetupError (KeyboardInterrupt too stops them all); with a
    `startup`, it says what is loading meanwhile, and when it is ready."""

    startup: Startup | None = None

    def run(self, host: str, port: int, **kwargs: Any) -> None:
        self.address = (host, port)
        self.setup_failures: SimpleQueue = multiprocessing.get_context("spawn").SimpleQueue()
        for endpoint in self.litapi_connector:
            endpoint.setup_failures = self.setup_failures
        super().run(host=host, port=port, **kwargs)

    def verify_worker_status(self) -> None:
        progress = None if self.startup is None else self.startup.loading
        try:
            wait_for_workers(self.workers_setup_status, self.inference_workers,
                             self.setup_failures, progress)  # fmt: skip
        except BaseException as error:
            reason = "keyboard_interrupt" if isinstance(error, KeyboardInterrupt) else "setup"
            self._perform_graceful_shutdown(self.transport_config.manager, {}, reason)
            raise

    def _start_server(self, *args: Any, **kwargs: Any) -> dict:
        """LitServe's start of the HTTP processes; then, in a thread of this process (started
        after they are forked), the ready line once /health answers (`Startup.announce`)."""
        servers = super()._start_server(*args, **kwargs)
        if self.startup is not None:
            threading.Thread(target=self.startup.announce, args=self.address, daemon=True).start()
        return servers


def wait_for_workers(
    statuses: Any,
    workers: Sequence[BaseProcess],
    failures: SimpleQueue | None,
    progress: Callable[[Mapping[str, Any]], None] | None = None,
) -> None:
    """Return once every worker's status (LitServe's shared dict) is READY, handing the
    statuses to `progress` at every look meanwhile (`Startup.loading`).

    Raises:
        WorkerSetupError: with the first reason reported through `failures`, as soon as a
            worker's setup failed or a worker process ended; or when there is no worker.
    """
    if not workers:
        raise WorkerSetupError("no worker was started: LitServe found no device to put one on")
    while True:
        current = dict(statuses.items())  # one look at LitServe's shared dict
        states = list(current.values())
        if states and all(state == WorkerSetupStatus.READY for state in states):
            return
        if progress is not None:
            progress(current)
        ended = [worker for worker in workers if not worker.is_alive()]
        if ended or WorkerSetupStatus.ERROR in states:
            if failures is not None and not failures.empty():
                raise WorkerSetupError(failures.get())
            code = ended[0].exitcode if ended else None
            raise WorkerSetupError(
                f"a worker ended while setting up (exit code {code}"
                + (", killed: out of memory?" if code is not None and code < 0 else "")
                + "); its log is above"
            )
        time.sleep(POLL_SECONDS)


def report_setup_failure(endpoint: ls.LitAPI, device: str, error: Exception) -> None:
    """Send the main process (through the endpoint's `setup_failures`, when it has one) why
    `endpoint` cannot set up on `device`. A ValueError (a checkpoint or setting that does not
    fit, `seqtasks.load`'s errors) says all in its message, so LitServe is kept from logging
    its traceback too; any other error's traceback stays in the log."""
    reason = " ".join(str(error).split())[:1000]
    if not isinstance(error, ValueError):
        reason = f"{type(error).__name__}: {reason}"
    failures = getattr(endpoint, "setup_failures", None)
    if failures is not None:
        failures.put(f"{endpoint.api_path} could not start on {device}: {reason}")
    if isinstance(error, ValueError):
        logging.getLogger("litserve.loops.loops").disabled = True  # this worker ends next
