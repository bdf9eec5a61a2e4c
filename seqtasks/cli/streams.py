"""The edges of a command: its standard streams and the files it writes, which can fail after
its work is done. One way for every command (`at_the_edges`):

- a reader that goes away (`seqtasks translate … | head -1`) ends the command quietly with
  status 141, as a Unix tool killed by SIGPIPE ends (128 + 13);
- a write that fails (a full disk, `>/dev/full`, a read-only or vanished place) ends it with one
  `error:` line naming what could not be written, and status 1; a file written atomically
  (`seqtasks.io.files.open_atomic`) is then as it was before;
- a closed standard input or output (`<&-`, `>&-`) is said before any work, in one line, with
  status 2, by the commands that read or write it (`require_stdin`, `require_stdout`); a closed
  standard error sends the messages nowhere rather than into the output;
- Ctrl-C ends it with `interrupted` and status 130 (128 + SIGINT), not a traceback of wherever
  the signal landed; an output file written atomically is left as it was.

Nothing here imports torch, so that a command can say these things at once.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable
from typing import Any

BROKEN_PIPE = 141  # the status a shell gives a command SIGPIPE ended
INTERRUPTED = 130  # the status a shell gives a command SIGINT (Ctrl-C) ended

# Write errors of the place written to, not of the command: said in one line, status 1.
WRITE_ERRORS = {
    errno.ENOSPC,
    errno.EDQUOT,
    errno.EFBIG,
    errno.EIO,
    errno.EROFS,
    errno.EBADF,
    errno.ENXIO,
    errno.ESTALE,
}


class StreamError(Exception):
    """A standard stream a command needs is closed: `error: <message>`, status 2."""


def closed(stream: Any) -> bool:
    """Whether `stream` is None (the process started with it closed) or closed since."""
    return stream is None or getattr(stream, "closed", False)


def require_stdin(option: str | None = "--input FILE") -> None:
    """Raise a StreamError if standard input is closed, before the command reads (or works);
    the message names `option`, the command's way to read a file instead."""
    if closed(sys.stdin):
        instead = f"give {option}, or " if option else ""
        raise StreamError(f"standard input is closed (<&-): {instead}pipe the text in (< FILE)")


def require_stdout(option: str | None = "--output FILE") -> None:
    """Raise a StreamError if standard output is closed, before the command works; the message
    names `option`, the command's way to write a file instead."""
    if closed(sys.stdout):
        instead = f"give {option}, or " if option else ""
        raise StreamError(f"standard output is closed (>&-): {instead}send it to a file (> FILE)")


def write_stdout(text: str) -> None:
    """Write `text` to standard output whole, or raise (BrokenPipeError when the reader went
    away, an OSError when the place is full). Written through the binary stream in a loop:
    with PYTHONUNBUFFERED set, `sys.stdout.write` hands a pipe a single write, and what the
    pipe does not take at once is dropped without an error."""
    stream = sys.stdout
    buffer = getattr(stream, "buffer", None)
    if buffer is None:  # a text stream put in its place (a test's capture): it takes all
        stream.write(text)
        return
    stream.flush()
    data = memoryview(text.encode(stream.encoding or "utf-8", stream.errors or "strict"))
    while data:
        written = buffer.write(data)  # a raw stream may take only part of it
        data = data[len(data) if written is None else written :]
    buffer.flush()


def _quiet_stdout() -> None:
    """Point standard output at /dev/null, so that Python's flush at exit does not fail on the
    pipe or the full disk again (and print 'Exception ignored … BrokenPipeError')."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (AttributeError, OSError, ValueError):  # a replaced or closed stream: nothing to do
        pass


def _say(message: str) -> None:
    if not closed(sys.stderr):
        try:
            print(f"error: {message}", file=sys.stderr)
            sys.stderr.flush()
        except OSError:  # standard error itself cannot be written: the status says it
            pass


def at_the_edges(command: Callable[[], int]) -> int:
    """Run `command` (a command's `main`, its exit status) and flush its output, ending as the
    module's docstring says when a stream or file at its edge fails."""
    if closed(sys.stderr):
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (for the rest of the process)
    try:
        status = command()
        if not closed(sys.stdout):
            sys.stdout.flush()
        return status
    except BrokenPipeError:
        _quiet_stdout()
        return BROKEN_PIPE
    except KeyboardInterrupt:
        try:
            print("interrupted", file=sys.stderr)
        except OSError:
            pass
        return INTERRUPTED
    except StreamError as error:
        _say(str(error))
        return 2
    except OSError as error:
        if error.errno not in WRITE_ERRORS:
            raise
        if error.filename is None:  # standard output: what it still holds goes nowhere
            _quiet_stdout()
        where = error.filename or "standard output"
        _say(f"cannot write {where}: {error.strerror or error}")
        return 1
