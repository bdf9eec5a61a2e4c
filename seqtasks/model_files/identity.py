"""What a trained model is, beside its weights and its specification (`spec`): the task, a
fingerprint of each tokeniser or vocabulary it was trained with, the seqtasks version and file
format that wrote it, the data it was trained on and the scores its fit reached.

A checkpoint keeps this record under `IDENTITY_KEY` (its specification is Lightning's
`hyper_parameters`); a model folder keeps it in `config.json`. Checkpoints written before the
record existed get one worked out from what they store (`identity_of`), so both are compared
the same way. docs/models.md says what is checked when.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import seqtasks
from seqtasks.io.checkpoint_files import CheckpointError, stored_entries

FORMAT = 1  # of the record, and of what a checkpoint or folder holds beside it
IDENTITY_KEY = "seqtasks_identity"


class NewerModelError(CheckpointError):
    """A model file of a format, or naming a class or option, that this seqtasks does not know:
    written by a newer seqtasks."""


@dataclass(frozen=True)
class Fingerprint:
    """What identifies a tokeniser, vocabulary or input setting: its kind (`unigram`, `bpe`,
    `words`, …), its size, and the SHA-256 of its canonical bytes."""

    kind: str
    size: int
    sha256: str

    def __str__(self) -> str:
        if self.kind == "value":
            return str(self.size)
        return f"{self.kind} {self.size} (sha {self.sha256[:12]})"


# sentencepiece's TrainerSpec.model_type (sentencepiece_model.proto)
_SENTENCEPIECE_TYPES = {1: "unigram", 2: "bpe", 3: "word", 4: "char"}


def _proto_fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """The top-level (field number, value) pairs of a protocol buffer message: varints as
    ints, length-delimited fields as bytes (enough to read a sentencepiece model's type and
    size without the protobuf package)."""

    def varint(i: int) -> tuple[int, int]:
        value, shift = 0, 0
        while True:
            if i >= len(data):
                raise ValueError("it ends inside a field")
            byte = data[i]
            value |= (byte & 0x7F) << shift
            i, shift = i + 1, shift + 7
            if byte < 0x80:
                return value, i

    fields, i = [], 0
    while i < len(data):
        key, i = varint(i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = varint(i)
        elif wire == 2:
            length, i = varint(i)
            if i + length > len(data):
                raise ValueError("it ends inside a field")
            value, i = data[i : i + length], i + length
        elif wire in (1, 5):  # fixed 64 / 32 bits
            size = 8 if wire == 1 else 4
            if i + size > len(data):
                raise ValueError("it ends inside a field")
            value, i = int.from_bytes(data[i : i + size], "little"), i + size
        else:
            raise ValueError(f"protocol buffer wire type {wire}, which no sentencepiece model has")
        fields.append((number, value))
    return fields


def _sentencepiece(proto: bytes) -> tuple[str, int]:
    """(model type, number of pieces) of a serialised sentencepiece model."""
    fields = _proto_fields(proto)
    pieces = sum(1 for number, _ in fields if number == 1)  # ModelProto.pieces
    trainer = next((value for number, value in fields if number == 2), b"")  # trainer_spec
    if not isinstance(trainer, bytes):
        raise ValueError("its trainer_spec is no message")
    types = [value for number, value in _proto_fields(trainer) if number == 3]  # model_type
    return _SENTENCEPIECE_TYPES.get(types[-1] if types else 1, "sentencepiece"), pieces


def canonical(value: Any) -> bytes:
    """The bytes a stored entry is fingerprinted by: a sentencepiece model's own, JSON with
    sorted keys for the rest."""
    if isinstance(value, bytes):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False).encode("utf-8")


def fingerprint(value: Any) -> Fingerprint:
    """The fingerprint of an entry a task stores beside its weights (`StoredEntries`): a
    sentencepiece model (bytes), a caption vocabulary (a list of words), parsing's two
    vocabularies (a dict of lists), or a value such as the image size."""
    sha = hashlib.sha256(canonical(value)).hexdigest()
    if isinstance(value, bytes):
        kind, size = _sentencepiece(value)
    elif isinstance(value, list):
        kind, size = "words", len(value)
    elif isinstance(value, Mapping):
        lists = {key: len(item) for key, item in value.items() if isinstance(item, list)}
        kind, size = "+".join(lists), sum(lists.values())
    elif isinstance(value, int) and not isinstance(value, bool):
        kind, size = "value", value
    else:
        kind, size = type(value).__name__, 0
    return Fingerprint(kind, size, sha)


def entry_name(key: str) -> str:
    """How a message names a stored entry: `src_tokenizer` → "source tokenizer"."""
    return key.replace("src_", "source ").replace("tgt_", "target ").replace("_", " ")


def fingerprints(entries: Mapping[str, Any]) -> dict[str, Fingerprint]:
    """The fingerprint of each stored entry, by its key; a ValueError naming the entry whose
    bytes are no sentencepiece model."""
    found = {}
    for key, value in entries.items():
        try:
            found[key] = fingerprint(value)
        except ValueError as error:
            raise ValueError(
                f"its {entry_name(key)} is not a sentencepiece model ({error})"
            ) from None
    return found


def fingerprint_difference(
    first: Mapping[str, Fingerprint], second: Mapping[str, Fingerprint], names: tuple[str, str]
) -> str | None:
    """The first entry whose fingerprints differ, in one line naming it and both (`source
    tokenizer: checkpoint unigram 6000 (sha …), data bpe 6000 (sha …)`); None if all agree."""
    for key in [*first, *(key for key in second if key not in first)]:
        before, after = first.get(key), second.get(key)
        if before != after:
            shown = [str(f) if f is not None else "none" for f in (before, after)]
            return f"{entry_name(key)}: {names[0]} {shown[0]}, {names[1]} {shown[1]}"
    return None


@dataclass(frozen=True)
class Identity:
    """A model's record (see the module's docstring).

    Attributes:
        task: "translation", "parsing" or "captioning".
        fingerprints: of each entry the task stores, by its key (`src_tokenizer`, …).
        version: the seqtasks that wrote the file; None for a checkpoint written before the
            record existed.
        format: the file format (`FORMAT` when this seqtasks wrote it).
        data: the training data, as `provenance.describe_data` says it; None if not known.
        scores: the validation scores of the fit when the file was written ("val/bleu" …),
            with "step" and "split"; None if not known (or averaged).
        search: the default search settings (the task's `test_settings`: beam, length_alpha,
            stop, max_length_ratio, max_length_offset); None if not recorded.
    """

    task: str
    fingerprints: dict[str, Fingerprint]
    version: str | None = None
    format: int = FORMAT
    data: dict[str, Any] | None = None
    scores: dict[str, Any] | None = None
    search: dict[str, Any] | None = None

    def record(self) -> dict[str, Any]:
        """As a checkpoint or config.json keeps it: plain values only."""
        return {
            "format": self.format,
            "seqtasks_version": self.version,
            "task": self.task,
            "fingerprints": {key: asdict(f) for key, f in self.fingerprints.items()},
            "data": self.data,
            "scores": self.scores,
            "search": self.search,
        }

    @property
    def written_by(self) -> str:
        """Who wrote the file, for messages: "seqtasks 0.2.0 (this is 0.1.0)"."""
        if self.version is None:
            return "a seqtasks that recorded no version"
        if self.version == seqtasks.__version__:
            return f"seqtasks {self.version}"
        return f"seqtasks {self.version} (this is {seqtasks.__version__})"


def from_record(record: Any, where: str) -> Identity:
    """The `Identity` a record holds.

    Raises:
        NewerModelError: for a format this seqtasks does not know, naming the version that
            wrote it.
        CheckpointError: for a record that is not one.
    """
    if not isinstance(record, Mapping) or not isinstance(record.get("format"), int):
        raise CheckpointError(f"{where}: its identity record is damaged (no format number)")
    version = record.get("seqtasks_version")
    if record["format"] > FORMAT:
        raise NewerModelError(
            f"{where} was written by seqtasks {version} in model format {record['format']}; "
            f"this seqtasks ({seqtasks.__version__}) reads format {FORMAT} and older: upgrade "
            "seqtasks (pip install -U seqtasks) to load it"
        )
    try:
        return Identity(
            task=str(record["task"]),
            fingerprints={
                key: Fingerprint(**value) for key, value in record["fingerprints"].items()
            },
            version=None if version is None else str(version),
            format=record["format"],
            data=record.get("data"),
            scores=record.get("scores"),
            search=record.get("search"),
        )
    except (KeyError, TypeError, AttributeError) as error:
        raise CheckpointError(f"{where}: its identity record is damaged ({error})") from None


def identity_of(checkpoint: Mapping[str, Any], where: str) -> Identity:
    """The identity of a checkpoint `read_checkpoint` read: its record, checked against the
    entries it stores (a fingerprint that does not match means the file was altered); for a
    checkpoint written before records existed, one worked out from those entries.

    Raises:
        NewerModelError, CheckpointError: as `from_record`, and for stored entries unlike those
            the record fingerprinted.
    """
    stored = checkpoint["seqtasks"]
    entries = {key: value for key, value in stored.items() if key != "task"}
    try:
        found = fingerprints(entries)
    except ValueError as error:
        raise CheckpointError(f"{where}: {error}: the file is damaged or was altered") from None
    if IDENTITY_KEY not in checkpoint:
        return Identity(stored["task"], found, version=None)
    identity = from_record(checkpoint[IDENTITY_KEY], where)
    try:  # a file that lost an entry says so, rather than that it was altered
        stored_entries(checkpoint, stored["task"], list(identity.fingerprints))
    except CheckpointError as error:
        raise CheckpointError(f"{where}: {error}") from None
    if identity.task != stored["task"]:
        raise CheckpointError(
            f"{where}: its identity record says {identity.task} and its entries "
            f"{stored['task']}: the file was altered after it was written"
        )
    mismatch = fingerprint_difference(identity.fingerprints, found, ("recorded", "stored"))
    if mismatch is not None:
        raise CheckpointError(
            f"{where}: what it stores is not what it was trained with ({mismatch}): the file "
            "was altered after it was written"
        )
    return identity
