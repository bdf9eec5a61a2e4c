"""Reading line-aligned text files with errors that name the file and line."""

from __future__ import annotations

import gzip
import sys
from pathlib import Path


def decode_lines(raw: bytes, source: str) -> list[str]:
    """The lines of UTF-8 bytes, without line ends. Lines end only at \\n, \\r or \\r\\n (never
    at the other breaks `str.splitlines` knows, such as U+2028), so line counts stay aligned.

    Raises:
        ValueError: for invalid UTF-8, naming `source` and the line.
    """
    lines = []
    for number, line in enumerate(raw.splitlines(), start=1):
        try:
            lines.append(line.decode("utf-8"))
        except UnicodeDecodeError as error:
            raise ValueError(
                f"{source}:{number}: invalid UTF-8 at byte {error.start} of the line"
            ) from None
    return lines


def read_lines(path: str | Path) -> list[str]:
    """The lines of a UTF-8 text file (gzipped if it ends in .gz), without line ends.

    Raises:
        FileNotFoundError: naming the path (a folder there is said to be one).
        ValueError: for invalid UTF-8, naming the file and the line.
    """
    path = Path(path)
    if path.is_dir():
        raise FileNotFoundError(f"{path} is a folder, not a text file")
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        return decode_lines(f.read(), str(path))


def read_stdin_lines() -> list[str]:
    """The lines of standard input, as `decode_lines` reads them; invalid UTF-8 is named by
    its line of `<stdin>`."""
    stream = getattr(sys.stdin, "buffer", None)  # None when stdin was replaced by a text stream
    raw = stream.read() if stream is not None else sys.stdin.read().encode("utf-8")
    return decode_lines(raw, "<stdin>")


def read_parallel(src_path: str | Path, tgt_path: str | Path) -> tuple[list[str], list[str]]:
    """Two line-aligned files; rejects files whose line counts differ, naming both."""
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise ValueError(
            f"misaligned parallel files: {src_path} has {len(src)} lines but {tgt_path} has "
            f"{len(tgt)}"
        )
    return src, tgt


def check_text(text: str, what: str) -> None:
    """Raise a ValueError naming `what` if `text` cannot be written as UTF-8: it holds an
    unpaired surrogate (a lone `\\ud800` escape in JSON, or bytes read with `surrogateescape`),
    which no tokeniser reads and no answer can carry."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(
            f"{what} is not valid Unicode text: it holds an unpaired surrogate "
            f"U+{ord(text[error.start]):04X} at character {error.start}"
        ) from None
