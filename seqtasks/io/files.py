"""Writing files atomically: a crash or a full disk never leaves a truncated file where a good
one stood, because the data goes to a temporary file beside it that is renamed when complete.

Temporary files are hidden (`.NAME.HOST-PID.tmp`), name the process that writes them, and do not
end in the target's suffix, so a glob for `*.ckpt` or `*.png` never finds one; those a killed
process left behind are removed by `remove_stale_temporaries`, and so are the temporary folders
(`temporary_folder`) that a whole output folder is built in.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

# `.NAME.HOST-PID.tmp`, followed by NAME's suffix when written by `temporary_path` (another
# ENDING than tmp: `temporary_folder`); and the `.NAME.PID.tmp.SUFFIX` that versions before this
# one wrote (a glob for `*.SUFFIX` sees those).
_TEMPORARY = re.compile(
    r"^\.(?P<name>.+)\.(?P<host>[A-Za-z0-9-]+)-(?P<pid>\d+)\.(?P<ending>[a-z]+)(\.\w+)?$"
)
_OLD_TEMPORARY = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.tmp(?P<suffix>\.\w+)$")


def _host() -> str:
    """This machine's name as it appears in temporary file names (letters, digits, dashes)."""
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname()) or "localhost"


def _temporary_name(path: Path) -> str:
    return f".{path.name}.{_host()}-{os.getpid()}.tmp"


def temporary_path(path: Path) -> Path:
    """A hidden sibling of `path` to write and then rename into place (same folder, so the
    rename is atomic), ending in `path`'s suffix for writers that pick a format from it
    (matplotlib's `savefig`): `.NAME.HOST-PID.tmp.SUFFIX`."""
    return path.with_name(_temporary_name(path) + path.suffix)


@contextmanager
def open_atomic(path: str | Path) -> Iterator[BinaryIO]:
    """A binary file to write that becomes `path` when the block ends without an error.

    The data goes to a hidden sibling, `.NAME.HOST-PID.tmp` (no suffix: a glob for `*.ckpt`
    does not see it), is flushed to the disk, and replaces `path` in one rename. If the block
    raises, `path` is left as it was and the temporary file is removed; a process killed while
    writing leaves `path` intact and at most that sibling, which `remove_stale_temporaries`
    removes later. A link is written through (the file it names is replaced, the link kept),
    and what is neither a file nor a folder (a pipe, a terminal, `/dev/stdout`) is written as
    it is: renaming a file over it would replace it.
    """
    path = Path(os.path.realpath(path))
    if path.exists() and not path.is_file() and not path.is_dir():
        with _naming(path), open(path, "wb") as f:
            yield f
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(_temporary_name(path))
    try:
        with _naming(path), open(tmp, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


@contextmanager
def _naming(path: Path) -> Iterator[None]:
    """Inside, an OSError that names no file (a write to a full disk) names `path`, the file
    being written, so that the message says which."""
    try:
        yield
    except OSError as error:
        if error.filename is not None or error.errno is None:
            raise
        raise OSError(error.errno, error.strerror, str(path)) from error


def temporary_folder(path: Path, ending: str = "tmp") -> Path:
    """A new, empty hidden folder beside `path`, `.NAME.XXXXXXXX.HOST-PID.tmp`, to build a whole
    output folder in and rename into place; named as the temporary files are, so
    `remove_stale_temporaries` removes it once its process is dead. Another `ending` names a
    folder that it leaves alone (`stale_temporaries(folder, ending)` finds those)."""
    suffix = f".{_host()}-{os.getpid()}.{ending}"
    folder = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent))
    folder.chmod(0o777 & ~_umask())  # as mkdir makes a folder (mkdtemp: the owner's alone)
    return folder


def _umask() -> int:
    """This process's umask (read by setting it, and setting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path: str | Path, data: str | bytes) -> Path:
    """Write `data` (str as UTF-8) to `path` via a temporary file and a rename."""
    with open_atomic(path) as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)
    return Path(path)


def _running(pid: int) -> bool:
    """Whether a process `pid` exists on this machine (one of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, as another user's process
        pass
    return True


def stale_temporaries(folder: str | Path, ending: str = "tmp") -> list[Path]:
    """The temporary files and folders in `folder` (`.NAME.HOST-PID.ENDING`, and with "tmp" the
    files of earlier versions) whose process, of this machine, is no longer running. Those of
    running processes, and of other machines sharing the folder, are not among them."""
    folder, host, stale = Path(folder), _host(), []
    if not folder.is_dir():
        return stale
    for path in folder.iterdir():
        match = _TEMPORARY.match(path.name)
        if match is None or match["ending"] != ending:
            match = _OLD_TEMPORARY.match(path.name) if ending == "tmp" else None
            if match is None or not match["name"].endswith(match["suffix"]) or not path.is_file():
                continue
        elif match["host"] != host:
            continue
        if not _running(int(match["pid"])):
            stale.append(path)
    return stale


def remove_stale_temporaries(folder: str | Path) -> list[Path]:
    """Remove the temporary files and folders in `folder` that a process of this machine, no
    longer running, left when it was killed mid-write; return them. Temporaries of running
    processes, and of other machines sharing the folder, are kept."""
    removed = []
    for path in stale_temporaries(folder):
        if path.is_file():
            path.unlink(missing_ok=True)
        elif path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            continue
        removed.append(path)
    return removed
