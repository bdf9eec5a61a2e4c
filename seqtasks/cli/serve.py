"""`seqtasks serve CKPT [CKPT ...]`: the command line of the server (docs/serving.md).

The parser imports neither torch nor LitServe, so that `--help` answers at once: an option left
out is None, and `ServerSettings` and `Limits` give its default.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from seqtasks.cli.arguments import (
    CommandParser,
    given,
    model_reference,
    non_negative_int,
    positive_int,
)
from seqtasks.serving.access import KEY_VARIABLE

if TYPE_CHECKING:
    from seqtasks.serving.server import ServerSettings

HOSTS = ("127.0.0.1", "0.0.0.0", "::")  # what LitServe accepts


def seconds(text: str) -> float:
    """A number of seconds ≥ 0."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, got {text}")
    return value


def port_number(text: str) -> int:
    """A TCP port LitServe accepts (1024–65535), or 0: a free one, which the ready line names."""
    value = non_negative_int(text)
    if value != 0 and not 1024 <= value <= 65535:
        raise argparse.ArgumentTypeError(
            f"must be from 1024 to 65535, got {text} (or 0 for a free port)"
        )
    return value


def parser() -> argparse.ArgumentParser:
    p = CommandParser(
        prog="seqtasks serve",
        description="Serve checkpoints over HTTP with dynamic batching: POST /translate, /parse "
        "or /caption by the checkpoints' tasks (several of one task: an ensemble), GET /health.",
    )
    p.add_argument(
        "checkpoints",
        nargs="+",
        type=model_reference,
        metavar="MODEL",
        help="checkpoints, model folders or hf://ORG/NAME models to serve",
    )
    p.add_argument(
        "--port",
        type=port_number,
        default=8000,
        help="the TCP port (default: 8000; 0: a free one, named by the line saying it is ready)",
    )
    p.add_argument("--host", choices=HOSTS, default="127.0.0.1", help="0.0.0.0: every interface")
    p.add_argument(
        "--open",
        action="store_true",
        help=f"serve without an API key even though {KEY_VARIABLE} is set to nothing (a "
        f"server is open when {KEY_VARIABLE} is unset, and needs X-API-Key when it is set)",
    )
    p.add_argument("--device", help="auto (the default), cpu, cuda (every GPU), cuda:N or mps")
    p.add_argument(
        "--workers-per-device",
        type=positive_int,
        help="worker processes per device and endpoint, each with its own copy of the model "
        "(on a CPU the cores are shared out among them)",
    )
    p.add_argument(
        "--max-batch-size",
        type=positive_int,
        help="most requests one model call serves",
    )
    p.add_argument(
        "--batch-timeout",
        type=seconds,
        help="seconds a batch waits for more requests once its first has come",
    )
    p.add_argument(
        "--max-sentences",
        type=positive_int,
        help="sentences per request",
    )
    p.add_argument("--max-chars", type=positive_int, help="characters per sentence")
    p.add_argument(
        "--max-length",
        type=positive_int,
        help="source tokens per sentence: subwords (/translate) or words (/parse)",
    )
    p.add_argument(
        "--max-megapixels",
        type=positive_int,
        help="largest image /caption decodes, in millions of pixels (a larger one gets 413)",
    )
    p.add_argument(
        "--max-attention",
        type=positive_int,
        help="most attention weights one answer may carry (source × output pieces, summed "
        "over its sentences; default 1,000,000, ~6 MiB of JSON); a request that could ask more "
        "gets 413",
    )
    p.add_argument(
        "--max-payload-mb",
        type=positive_int,
        help="largest request body (an image upload), in MiB",
    )
    p.add_argument(
        "--timeout",
        type=seconds,
        help="seconds a request may wait in the queue before it gets 504",
    )
    p.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default="info",
        help="what the server logs (default: info)",
    )
    return p


def settings_of(args: argparse.Namespace, key: str | None = None) -> ServerSettings:
    """The server's settings: the options given, the defaults for the rest; `key` what
    requests must send (None: an open server)."""
    from seqtasks.serving.endpoint import Limits
    from seqtasks.serving.server import ServerSettings

    megapixels = args.max_megapixels
    limits = given(
        max_sentences=args.max_sentences,
        max_chars=args.max_chars,
        max_length=args.max_length,
        max_pixels=None if megapixels is None else megapixels * 10**6,
        max_attention=args.max_attention,
    )
    return ServerSettings(
        limits=Limits(**limits),
        key=key,
        **given(
            device=args.device,
            workers_per_device=args.workers_per_device,
            max_batch_size=args.max_batch_size,
            batch_timeout=args.batch_timeout,
            timeout=args.timeout,
            max_payload_mb=args.max_payload_mb,
        ),
    )


def main(argv: list[str] | None = None) -> int:
    """Run the server until interrupted; 0 then, 2 for bad arguments, a missing LitServe, a
    device that is not here, bad checkpoints, a port that is taken, or a worker that cannot set
    up. Meanwhile it says on stderr what is loading, and once it answers, that it is ready, on
    which address, with which models (`seqtasks.serving.startup`)."""
    args = parser().parse_args(argv)
    try:
        import litserve  # noqa: F401
    except ModuleNotFoundError:
        print("error: seqtasks serve needs LitServe: pip install litserve", file=sys.stderr)
        return 2
    from seqtasks.devices import check_device
    from seqtasks.io.checkpoint_files import CheckpointError
    from seqtasks.serving.access import ServerKeyError, server_key
    from seqtasks.serving.served import group_by_task
    from seqtasks.serving.server import build_server, free_port, run
    from seqtasks.serving.workers import WorkerSetupError

    try:
        key = server_key(os.environ, args.open)
    except ServerKeyError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    settings = settings_of(args, key)
    if settings.batch_timeout >= settings.timeout > 0:
        parser().error("--batch-timeout must be less than --timeout")
    if settings.batch_timeout == 0 and settings.max_batch_size > 1:
        parser().error(
            "--batch-timeout must be > 0 with --max-batch-size > 1: without one LitServe's "
            "batching loop polls its queue without pause, a whole core even when idle "
            "(--max-batch-size 1 serves one request at a time)"
        )
    try:
        check_device(settings.device)
        groups = group_by_task(args.checkpoints)
    except (CheckpointError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        server = build_server(groups, settings)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        port = free_port(args.host, args.port)
    except OSError as error:  # taken, or not one this user may listen on
        print(
            f"error: cannot listen on {args.host} port {args.port}: {error.strerror or error} "
            "(choose another --port, or --port 0 for a free one)",
            file=sys.stderr,
        )
        return 2
    print(
        f"serving {', '.join(groups)}: requests need the key of {KEY_VARIABLE} in X-API-Key"
        if key is not None
        else f"serving {', '.join(groups)} without an API key (set {KEY_VARIABLE} to need "
        "one): anyone who reaches this port can use it",
        file=sys.stderr,
    )
    try:
        run(server, args.host, port, args.log_level)
    except WorkerSetupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0
