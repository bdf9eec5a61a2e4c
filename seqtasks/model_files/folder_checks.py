"""The checks of a model folder's files as they are read (`folder.read_folder`): each file
against the size and SHA-256 config.json records, and each tokeniser or vocabulary file parsed
as what its name says, so that a missing, truncated, replaced or malformed file is named with
what is wrong, before any is used."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from seqtasks.io.checkpoint_files import CheckpointError

CONFIG = "config.json"  # the folder's record of its model and of each file


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def check_file(folder: Path, name: str, expected: Mapping[str, Any]) -> None:
    """Raise a CheckpointError, naming the file and what config.json says of it, if the file
    `name` is missing, of another size (truncated?) or of other contents (foreign)."""
    path = folder / name
    if not path.is_file():
        raise CheckpointError(
            f"{path} is missing: {CONFIG} lists it, so the model folder is incomplete"
        )
    size = path.stat().st_size
    if size != expected.get("size"):
        raise CheckpointError(
            f"{path} has {size} bytes where {CONFIG} says {expected.get('size')}: it was "
            "truncated, or replaced by another file"
        )
    found = file_sha256(path)
    if found != expected.get("sha256"):
        raise CheckpointError(
            f"{path} is not the file this model was saved with (sha256 {found[:12]}…, "
            f"{CONFIG} says {str(expected.get('sha256'))[:12]}…): it was replaced or altered"
        )


def entry_from_file(path: Path) -> Any:
    """What a tokeniser or vocabulary file holds, read as what its name says: a `.json`
    vocabulary as JSON, anything else as a sentencepiece model (its bytes, checked to load).

    Raises:
        CheckpointError: naming the file and what is wrong with it (not UTF-8 or not JSON, with
            the line and column; no sentencepiece model, in sentencepiece's words).
    """
    from seqtasks.data.tokenizer import SentencePieceTokenizer

    data = path.read_bytes()
    if path.suffix == ".json":
        try:
            return json.loads(data.decode("utf-8"))
        except UnicodeDecodeError:
            raise CheckpointError(f"{path} is not UTF-8 text: the file is damaged") from None
        except json.JSONDecodeError as error:
            raise CheckpointError(
                f"{path} is not valid JSON (line {error.lineno}, column {error.colno}: "
                f"{error.msg}): the file is damaged"
            ) from None
    try:
        SentencePieceTokenizer(data, str(path))
    except ValueError as error:
        raise CheckpointError(f"{error}: the file is damaged or replaced") from None
    return data
