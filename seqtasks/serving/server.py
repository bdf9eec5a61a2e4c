"""One LitServer for a set of checkpoints: grouped by task, each task gets its endpoint (several
checkpoints of one task are an ensemble), and the endpoints of the tasks not loaded answer 404
with a message saying what the server does serve. GET / is a page for the tasks served
(`page`).

The process model is LitServe's: this process reads the checkpoints' tasks, then starts one
HTTP process (uvicorn, FastAPI; it validates request bodies) and, for each endpoint, one
inference worker process per device × `workers_per_device`, each loading its own copy of the
model and serving the batches of its endpoint's queue. It serves once every worker has loaded
its model, and ends with the reason when one cannot (`workers`), saying meanwhile what is
loading and then that it is ready (`startup`); bodies FastAPI refuses are answered as
`validation` writes them, and plain-text answers end with a newline (`plain`).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import warnings
from collections.abc import Mapping
from dataclasses import dataclass

import litserve as ls
from fastapi.responses import JSONResponse

from seqtasks.devices import check_device
from seqtasks.registry import tasks
from seqtasks.serving import access, page, plain, validation
from seqtasks.serving.endpoint import Limits, ModelEndpoint, default_threads
from seqtasks.serving.served import Served, model_name
from seqtasks.serving.startup import Startup
from seqtasks.serving.workers import CheckedServer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerSettings:
    """How the server batches, where its workers run and who may use it (`seqtasks serve`'s
    options; `key`: what requests must send as X-API-Key, None for an open server)."""

    device: str = "auto"
    workers_per_device: int = 1
    max_batch_size: int = 32
    batch_timeout: float = 0.01
    limits: Limits = Limits()
    timeout: float = 30.0
    max_payload_mb: int = 20
    key: str | None = None


def accelerator(device: str) -> tuple[str, int | list[int] | str]:
    """LitServe's (accelerator, devices) for a seqtasks device name: "auto", "cpu", "cuda" or
    "gpu" (every GPU, a worker set on each), "cuda:N" (that GPU) or "mps".

    Raises:
        DeviceError: for an unknown name, or a device this machine does not have (LitServe
            would start no worker on it, and wait for one for ever).
    """
    kind, _, index = check_device(device).partition(":")
    if kind == "cpu":
        return "cpu", 1
    return kind, [int(index)] if index else "auto"


def build_server(
    groups: Mapping[str, Served | list[str]], settings: ServerSettings
) -> ls.LitServer:
    """A LitServer with one endpoint per task of `groups` (unknown tasks refused; a list of
    paths for a task is read as its models, with nothing more known of them), the page and its
    description of the models (`page`), behind `settings.key` (`access`), without FastAPI's
    generated docs pages; it says what it loads and when it is ready (`startup`)."""
    groups = {
        task: g if isinstance(g, Served) else Served(g, [model_name(p, p) for p in g])
        for task, g in groups.items()
    }
    unknown = sorted(set(groups) - set(tasks()))
    if unknown:
        raise ValueError(f"cannot serve {', '.join(unknown)} checkpoints")
    unserved = sorted(task for task in groups if tasks()[task].endpoint is None)
    if unserved:
        raise ValueError(
            f"cannot serve {', '.join(unserved)} checkpoints: the task declares no endpoint"
        )
    paths: dict[str, str] = {}
    for task in groups:
        path = endpoint(task).path
        if path in paths:  # an outside task's endpoint at a path another task serves
            raise ValueError(f"cannot serve {task} and {paths[path]} together: both answer {path}")
        paths[path] = task
    kind, devices = accelerator(settings.device)
    threads = default_threads(settings.workers_per_device) if kind == "cpu" else None
    with warnings.catch_warnings():  # with --max-batch-size 1, LitServe never batches: fine
        warnings.filterwarnings("ignore", "The LitServer has both batch and unbatch")
        apis = [
            endpoint(task)(
                served.paths,
                settings.limits,
                threads,
                max_batch_size=settings.max_batch_size,
                batch_timeout=settings.batch_timeout,
            )
            for task, served in groups.items()
        ]
    server = CheckedServer(
        apis,
        accelerator=kind,
        devices=devices,
        workers_per_device=settings.workers_per_device,
        timeout=settings.timeout,
        max_payload_size=settings.max_payload_mb * 1024 * 1024,
        model_metadata={task: served.names for task, served in groups.items()},
        disable_openapi_url=True,  # /docs and /redoc load scripts from a CDN
    )
    server.startup = Startup(
        {task: served.names for task, served in groups.items()},
        {task: endpoint(task).path for task in groups},
        settings.key,
    )
    add_missing_endpoints(server, groups)
    forms = {task: endpoint(task).form() for task in groups}
    page.install(server.app, page.describe(groups, settings.limits, forms))
    validation.install(server.app)
    plain.install(server.app)
    access.install(server.app, settings.key)
    return server


def add_missing_endpoints(server: ls.LitServer, groups: Mapping[str, Served]) -> None:
    """Routes for the endpoints of the tasks not loaded, answering 404 with what is served. A
    task whose endpoint cannot be imported (a broken package of someone else's) gets no route,
    with a warning, rather than stopping a server that does not serve it."""
    taken = {endpoint(task).path: task for task in groups}
    served = ", ".join(f"POST {path}" for path in taken)
    for task, entry in tasks().items():
        if task in groups or entry.endpoint is None:
            continue
        try:
            path = endpoint(task).path
        except Exception as error:  # its import failed: ImportError, or what its module raised
            log.warning("no route for the %s task: its endpoint %s cannot be imported (%s: %s)",
                        task, entry.endpoint, type(error).__name__, error)  # fmt: skip
            continue
        if path in taken:  # an outside task's path that an earlier task answers: never shadowed
            log.warning("no route for the %s task: %s is the %s task's", task, path, taken[path])
            continue
        taken[path] = task
        message = (
            f"this server has no {task} model, so no {path}: it serves {served}. "
            f"Start it with a {task} checkpoint to have {path}."
        )
        server.app.add_api_route(
            path, _not_found(message), methods=["POST"], include_in_schema=False
        )


def endpoint(task: str) -> type[ModelEndpoint]:
    """The endpoint class of `task` (`seqtasks.registry`)."""
    return tasks()[task].endpoint_class()


def _not_found(message: str):
    """An endpoint that answers every request with 404 and `message`."""

    async def not_found() -> JSONResponse:
        return JSONResponse({"detail": message}, status_code=404)

    return not_found


def free_port(host: str, port: int) -> int:
    """`port` once it is known to be free on `host`, or for 0 a free one the system picks
    (LitServe takes 1024–65535 only); an OSError if it is taken, before anything starts."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds it
        probe.bind((host, port))
        return probe.getsockname()[1]


def run(server: ls.LitServer, host: str, port: int, log_level: str = "info") -> None:
    """Serve on `host`:`port` (`free_port` says first whether it is free) until interrupted;
    WorkerSetupError if a worker cannot set up. SIGTERM (and SIGINT, which a shell ignores for
    background jobs) ends it the way Ctrl+C does, stopping the HTTP and worker processes too;
    the processes forked from this one inherit the handler and keep the default behaviour."""
    main_process = os.getpid()

    def interrupt(signum: int, frame: object) -> None:
        if os.getpid() != main_process:
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)
            return
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)
    try:
        server.run(
            host=host,
            port=port,
            num_api_servers=1,
            log_level=log_level,
            generate_client_file=False,
        )
    except KeyboardInterrupt:  # while the workers were starting: all stopped already
        pass
