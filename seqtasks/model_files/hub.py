"""Models by name on the Hugging Face Hub: `hf://ORG/NAME` or `hf://ORG/NAME@REVISION` (a
branch, tag or commit) is the model folder `huggingface_hub.snapshot_download` brings into the
Hub's own cache (`HF_HUB_CACHE`, by default ~/.cache/huggingface/hub), from `HF_ENDPOINT` (by
default https://huggingface.co); with `HF_HUB_OFFLINE=1` it is read from that cache alone.
huggingface_hub is the `hub` extra (`pip install 'seqtasks[hub]'`).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from seqtasks.io.checkpoint_files import CheckpointError

PREFIX = "hf://"
_REPO = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")


def is_hub_name(reference: str | Path) -> bool:
    """Whether `reference` names a model on the Hub (`hf://…`), not a local path."""
    return isinstance(reference, str) and reference.startswith(PREFIX)


@dataclass(frozen=True)
class HubName:
    """`hf://ORG/NAME[@REVISION]`, parsed."""

    repo: str
    revision: str | None = None

    def __str__(self) -> str:
        return f"{PREFIX}{self.repo}" + (f"@{self.revision}" if self.revision else "")


def parse_name(reference: str) -> HubName:
    """The repository and revision of an `hf://` name.

    Raises:
        CheckpointError: for a name that is not `hf://ORG/NAME[@REVISION]`.
    """
    body = reference.removeprefix(PREFIX)
    repo, _, revision = body.partition("@")
    if not _REPO.match(repo) or (revision == "" and "@" in body):
        raise CheckpointError(
            f"{reference!r} is not a Hub model name: write hf://ORG/NAME or hf://ORG/NAME@REVISION"
        )
    return HubName(repo, revision or None)


def endpoint() -> str:
    """The Hub's address: `HF_ENDPOINT` as it is now (huggingface_hub reads it once, at import)."""
    from huggingface_hub import constants

    return os.environ.get("HF_ENDPOINT") or constants.ENDPOINT


def download(reference: str) -> tuple[Path, str]:
    """(the local folder, how messages name it: `hf://ORG/NAME@COMMIT`) of the model an `hf://`
    name gives, downloaded into the Hub's cache unless it is there already.

    Raises:
        CheckpointError: in one line saying what failed: huggingface_hub missing, a name or
            revision the Hub does not have, no connection, or (offline) a model not in the
            cache.
    """
    name = parse_name(reference)
    try:
        from huggingface_hub import errors, snapshot_download
    except ImportError:
        raise CheckpointError(
            f"{name}: loading a model from the Hub needs huggingface_hub: "
            "pip install 'seqtasks[hub]'"
        ) from None
    address = endpoint()
    try:
        with progress_bars(_is_terminal(sys.stderr)):
            folder = Path(snapshot_download(name.repo, revision=name.revision, endpoint=address))
    except errors.RepositoryNotFoundError:
        raise CheckpointError(
            f"{name}: no model {name.repo} on {address} (or it is private or gated: log in "
            "with `hf auth login`)"
        ) from None
    except errors.RevisionNotFoundError:
        raise CheckpointError(
            f"{name}: {name.repo} on {address} has no revision {name.revision!r}"
        ) from None
    except errors.LocalEntryNotFoundError as error:
        raise CheckpointError(f"{name}: {_not_cached(error, address)}") from None
    except errors.HfHubHTTPError as error:
        status = getattr(getattr(error, "response", None), "status_code", "an error")
        first = str(error).strip().splitlines()[0]
        raise CheckpointError(f"{name}: {address} answered {status}: {first}") from None
    except OSError as error:  # no connection at all, a cache that cannot be written
        raise CheckpointError(f"{name}: {type(error).__name__}: {error}") from None
    return folder, f"{PREFIX}{name.repo}@{folder.name[:12]}"


def _is_terminal(stream: object) -> bool:
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError):  # None, or closed
        return False


@contextmanager
def progress_bars(shown: bool) -> Iterator[None]:
    """huggingface_hub's download bars inside, if `shown` (on a terminal: not in a log)."""
    from huggingface_hub.utils import (
        are_progress_bars_disabled,
        disable_progress_bars,
        enable_progress_bars,
    )

    hide = not shown and not are_progress_bars_disabled()
    if hide:
        disable_progress_bars()
    try:
        yield
    finally:
        if hide:
            enable_progress_bars()


def _not_cached(error: Exception, address: str) -> str:
    """Why huggingface_hub found no copy to use, in words."""
    from huggingface_hub import constants, errors

    cache = constants.HF_HUB_CACHE
    if isinstance(error, getattr(errors, "IncompleteSnapshotError", ())):
        return f"its copy in the Hub cache ({cache}) is incomplete; download it again online"
    if constants.HF_HUB_OFFLINE:
        return (
            f"not in the Hub cache ({cache}), and downloads are off (HF_HUB_OFFLINE=1): load it "
            "once online first"
        )
    return f"cannot reach {address}, and the model is not in the Hub cache ({cache})"
