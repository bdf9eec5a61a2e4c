"""Downloads for the data_prep scripts: https only, checked against a pinned sha256 where one is
known, and kept in a cache keyed by the URL.

A file is downloaded to a temporary name while its sha256 is computed, and kept under its
cache name only when it is whole and, for a pinned source, matches; a cached file of a pinned
source is checked again before it is used. A source without a pinned sha256 is downloaded with
a warning that gives the sha256 found, for the user to compare with the publisher's.
"""

from __future__ import annotations

import hashlib
import sys
import urllib.request
from pathlib import Path
from typing import BinaryIO

from seqtasks.io.files import open_atomic

CHUNK = 1 << 20


class DownloadError(ValueError):
    """A URL that is refused, or a download whose checksum does not match the pinned one."""


def open_url(url: str) -> BinaryIO:
    """The response to a GET of `url` (the one place that goes to the network)."""
    return urllib.request.urlopen(url, timeout=60)


def sha256_of(path: Path) -> str:
    """The SHA-256 of the file at `path`, in hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def cache_path(url: str, cache: Path) -> Path:
    """Where `url` is kept in `cache`: a folder named by the URL's hash, so that two URLs that
    end in the same file name never share a file, holding the file under its own name."""
    key = hashlib.sha256(url.encode("utf-8")).hexdigest()[:16]
    return cache / key / url.rstrip("/").rsplit("/", 1)[-1]


def download(url: str, cache: Path, sha256: str | None) -> Path:
    """The file at `url`, downloaded into `cache` unless it is there already.

    Args:
        url: an https:// URL.
        cache: the download cache folder.
        sha256: the pinned checksum of the file, or None for a source without one (a warning
            then gives the checksum found).

    Raises:
        DownloadError: for a URL that is not https://, or a file whose sha256 is not `sha256`
            (naming both; the file is not kept).
        OSError: when the download fails (urllib.error.URLError is one).
    """
    if not url.startswith("https://"):
        raise DownloadError(
            f"refusing to download {url}: only https:// URLs are fetched (a plain http "
            "download can be altered on its way)"
        )
    target = cache_path(url, cache)
    if target.is_file() and (sha256 is None or sha256_of(target) == sha256):
        return target
    print(f"downloading {url}", file=sys.stderr)
    digest = hashlib.sha256()
    with open_url(url) as response, open_atomic(target) as f:
        while chunk := response.read(CHUNK):
            digest.update(chunk)
            f.write(chunk)
        found = digest.hexdigest()
        if sha256 is not None and found != sha256:
            raise DownloadError(
                f"{url}: the download's sha256 is {found}, but {sha256} was expected; it was "
                "not kept (a changed or tampered file, or a broken transfer)"
            )
    if sha256 is None:
        print(
            f"warning: {url} has no pinned sha256; the file downloaded has sha256 {found}",
            file=sys.stderr,
        )
    return target
