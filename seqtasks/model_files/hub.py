"""Models by name on the Hugging Face Hub: `hf://ORG/NAME` or `hf://ORG/NAME@REVISION` (a
branch, tag or commit) is the model folder `huggingface_hub.snapshot_download` brings into the
Hub's own cache (`HF_HUB_CACHE`, by default ~/.cache/huggingface/hub), from `HF_ENDPOINT` (by
default https://huggingface.co); with `HF_HUB_OFFLINE=1` it is read from that cache alone.
huggingface_hub is the `hub` extra (`pip install 'seqtasks[hub]'`).

A name becomes paths in the cache (`models--ORG--NAME/refs/REVISION`, then the commit that file
holds under `snapshots/`), so the name is checked as the Hub allows it before anything is opened,
and the cache's refs file, the snapshot folder and every file in it must lie in that repo's folder
of the cache: a crafted name or cache cannot lead seqtasks to load a folder elsewhere.
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
_COMMIT = re.compile(r"[0-9a-f]{40}")  # a snapshot folder's name, as huggingface_hub writes it
_PULL_REQUEST = re.compile(r"refs/pr/[1-9][0-9]*")
# Characters git refuses in a ref name, and '%', with which `%2e%2e` reads as `..` to a server
# that decodes a path twice.
_NOT_IN_REFS = set(" ~^:?*[\\%")


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
    """The repository and revision of an `hf://` name, each checked as the Hub allows it
    (`_repo_fault`, `_revision_fault`) before any file is opened or huggingface_hub imported.

    Raises:
        CheckpointError: in one line naming the reference and what is wrong with it.
    """
    body = reference.removeprefix(PREFIX)
    repo, at, revision = body.partition("@")
    parts = repo.split("/")
    if len(parts) != 2 or "" in parts:
        raise CheckpointError(
            f"{reference!r} is not a Hub model name: write hf://ORG/NAME or hf://ORG/NAME@REVISION"
        )
    if fault := _repo_fault(parts):
        raise _refusal(f"{reference}: the repo id {repo!r} is not one the Hub allows ({fault})")
    if at and (fault := _revision_fault(revision)):
        raise _refusal(
            f"{reference}: the revision {revision!r} is not a branch, tag or commit the Hub "
            f"allows ({fault})"
        )
    return HubName(repo, revision or None)


def _repo_fault(parts: list[str]) -> str | None:
    """Why ORG/NAME (`parts`) is no repo id the Hub allows, by huggingface_hub's rules
    (`huggingface_hub.utils.validate_repo_id`); None when it is one."""
    repo = "/".join(parts)
    if bad := [c for c in "".join(parts) if not ((c.isascii() and c.isalnum()) or c in "_.-")]:
        return f"it holds {bad[0]!r}; the Hub allows letters, digits, '-', '_' and '.'"
    if any(len(part) > 96 for part in parts):
        return "a part of it is longer than 96 characters"
    if any(part[0] in ".-" or part[-1] in ".-" for part in parts):
        return "a part of it starts or ends with '-' or '.'"
    if pair := next((p for p in ("--", "..") if p in repo), None):
        return f"it holds {pair!r}"
    if repo.endswith(".git"):
        return "it ends with '.git'"
    return None


def _revision_fault(revision: str) -> str | None:
    """Why `revision` is no branch, tag or commit the Hub allows; None when it is one.

    A branch or tag is a name `git check-ref-format --allow-onelevel` accepts (see
    git-check-ref-format(1): no control character, space, `~ ^ : ? * [ \\`, `..` or `@{`; no
    part starting with `.` or ending with `.lock`; not `@`; no `/` first, last or doubled; no `.`
    last), in ASCII (no look-alike of `.` or `/`), without `%` and not starting with `-` (as
    `git branch` requires); a commit (7 to 40 hex digits) is such a name; and of `refs/` the Hub
    serves only pull requests, `refs/pr/N`. So a revision cannot climb out of the cache's `refs/`.
    """
    if not revision:
        return "it is empty"
    if bad := [c for c in revision if not (c.isascii() and c.isprintable()) or c in _NOT_IN_REFS]:
        return f"it holds {bad[0]!r}"
    parts = revision.split("/")
    faults = {
        "it holds '..'": ".." in revision,
        "it starts with '/'": revision.startswith("/"),
        "it ends with '/'": revision.endswith("/"),
        "it holds '//'": "" in parts,
        "a part of it starts with '.'": any(part.startswith(".") for part in parts),
        "a part of it ends with '.lock'": any(part.endswith(".lock") for part in parts),
        "it ends with '.'": revision.endswith("."),
        "it holds '@{'": "@{" in revision,
        "it is '@'": revision == "@",
        "it starts with '-'": revision.startswith("-"),
        "of refs/ the Hub serves only pull requests, refs/pr/N": revision.startswith("refs/")
        and not _PULL_REQUEST.fullmatch(revision),
    }
    return next((fault for fault, found in faults.items() if found), None)


def _refusal(message: str) -> CheckpointError:
    """A CheckpointError saying `message` in one line: what a terminal would act on escaped."""
    return CheckpointError("".join(c if c.isprintable() else ascii(c)[1:-1] for c in message))


def endpoint() -> str:
    """The Hub's address: `HF_ENDPOINT` as it is now (huggingface_hub reads it once, at import)."""
    from huggingface_hub import constants

    return os.environ.get("HF_ENDPOINT") or constants.ENDPOINT


def download(reference: str) -> tuple[Path, str]:
    """(the local folder, how messages name it: `hf://ORG/NAME@COMMIT`) of the model an `hf://`
    name gives, downloaded into the Hub's cache unless it is there already.

    Raises:
        CheckpointError: in one line saying what failed: a name the Hub does not allow,
            huggingface_hub missing, a name or revision the Hub does not have, no connection,
            (offline) a model not in the cache, or a cached copy leading out of the cache.
    """
    name = parse_name(reference)
    try:
        from huggingface_hub import constants, errors, snapshot_download
    except ImportError:
        raise CheckpointError(
            f"{name}: loading a model from the Hub needs huggingface_hub: "
            "pip install 'seqtasks[hub]'"
        ) from None
    address = endpoint()
    cache = Path(constants.HF_HUB_CACHE).expanduser().resolve()
    storage = cache / ("models--" + name.repo.replace("/", "--"))
    try:
        _check_ref(name, storage)
        with progress_bars(_is_terminal(sys.stderr)):
            folder = Path(
                snapshot_download(
                    name.repo, revision=name.revision, cache_dir=cache, endpoint=address
                )
            )
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
    except errors.HFValidationError as error:
        first = str(error).strip().partition("\n")[0]
        raise _refusal(f"{name}: huggingface_hub refuses it: {first}") from None
    except OSError as error:  # no connection at all, a cache that cannot be written
        raise _refusal(f"{name}: {type(error).__name__}: {error}") from None
    return folder, f"{PREFIX}{name.repo}@{_checked_snapshot(name, folder, storage)[:12]}"


def _check_ref(name: HubName, storage: Path) -> None:
    """Refuse the cache's record of `name`'s branch or tag (`storage/refs/REVISION`, which
    huggingface_hub follows offline or when the Hub cannot be reached) unless it is a file in
    `storage`, the repo's folder of the cache, holding a commit."""
    ref = storage / "refs" / (name.revision or "main")
    if not ref.is_file():
        return
    if not ref.resolve().is_relative_to(storage):
        raise _refusal(f"{name}: {ref} leads to {ref.resolve()}, outside {storage}: not read")
    if not _COMMIT.fullmatch(held := ref.read_text(errors="replace")):
        raise _refusal(f"{name}: {ref} holds {held!r}, not a commit: not read")


def _checked_snapshot(name: HubName, folder: Path, storage: Path) -> str:
    """The commit of `folder`, the snapshot huggingface_hub gave for `name`, once it is
    `storage/snapshots/COMMIT` and every file in it leads (the cache links them to
    `../../blobs/…`) into `storage`: a crafted cache could point anywhere."""
    snapshots = storage / "snapshots"
    try:
        real = folder.resolve()
        if not (_COMMIT.fullmatch(folder.name) and real == snapshots / folder.name):
            raise _refusal(
                f"{name}: huggingface_hub gives {folder}, which leads to {real}, not to a "
                f"commit's folder in {snapshots}: not read"
            )
        for path in sorted(folder.rglob("*")):
            if not path.resolve().is_relative_to(storage):
                raise _refusal(
                    f"{name}: {path} leads to {path.resolve()}, outside {storage}: not read"
                )
    except (OSError, RuntimeError) as error:  # a loop of links, a folder that cannot be read
        raise _refusal(f"{name}: its copy in the Hub cache cannot be read: {error}") from None
    return folder.name


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
