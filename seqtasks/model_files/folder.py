"""A model folder in the Hugging Face Hub's layout: what `seqtasks export CKPT --to folder OUT/`
writes and `seqtasks.load(OUT)` (or `hf://ORG/NAME`) reads.

    model.safetensors   the inference weights (safetensors: reading it runs no pickle)
    config.json         the model's specification, its default search settings, its identity
                        record (`identity`), and each file's size and SHA-256
    source.spm, target.spm | vocabulary.json
                        the tokenisers or vocabularies it was trained with
    README.md           the model card (`card`)

Nothing in the folder can carry a pickle, and reading it checks each file against config.json
before any is used: a missing, truncated or foreign file is named, with what was expected.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import Tensor

from seqtasks.io.checkpoint_files import CheckpointError
from seqtasks.model_files.folder_checks import CONFIG, check_file, entry_from_file
from seqtasks.model_files.identity import Identity, from_record
from seqtasks.model_files.spec import Spec

WEIGHTS, CARD = "model.safetensors", "README.md"
LIBRARY = "seqtasks"
# Where each stored entry goes (Marian's names for sentencepiece models, as on the Hub); an
# entry that is a plain value (the image size) stays in config.json's "entries".
ENTRY_FILES = {
    "src_tokenizer": "source.spm",
    "tgt_tokenizer": "target.spm",
    "vocabulary": "vocabulary.json",
}
# What a model folder leaves out of its model: what only training reads (its search settings
# travel apart, in config.json's "search").
TRAINING_ONLY = frozenset(
    {
        "optimizer",
        "lr_scheduler",
        "monitor",
        "label_smoothing",
        "attention_penalty",
        "entropy_weight",
        "reward_scale",
        "torch_compile",
        "val_beam",
        "pretrained_encoder",
        "frozen_encoder_steps",
        "encoder_lr",
        "pretrained_model",
        "self_critical",
    }
)
# The task's settings that config.json keeps apart, in "search", as `SearchSettings` fields.
SEARCH_SETTINGS = (
    "test_beam",
    "length_alpha",
    "beam_stop",
    "max_length_ratio",
    "max_length_offset",
    "max_caption_length",
)


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def shared_names(state: Mapping[str, Tensor]) -> dict[str, str]:
    """name -> the earlier name whose tensor it is (tied embeddings): what safetensors keeps
    once, and loading fills in again."""
    first: dict[tuple, str] = {}
    aliases = {}
    for name, tensor in state.items():
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape))
        if key in first and tensor.numel() > 0:
            aliases[name] = first[key]
        else:
            first.setdefault(key, name)
    return aliases


def weights_file(state: Mapping[str, Tensor]) -> bytes:
    """The safetensors bytes of a task's `state_dict`, each shared tensor once."""
    from safetensors.torch import save

    aliases = shared_names(state)
    tensors = {n: t.detach().cpu().contiguous() for n, t in state.items() if n not in aliases}
    # One metadata entry, as Hugging Face writes it: safetensors orders several at random, and
    # the same model must give the same bytes (and SHA-256) at every export.
    return save(tensors, metadata={"format": "pt"})


def folder_files(
    spec: Spec,
    identity: Identity,
    entries: Mapping[str, Any],
    search: Mapping[str, Any],
    state: Mapping[str, Tensor],
    card: Callable[[dict[str, Any]], str],
    training: Mapping[str, Any] | None = None,
) -> dict[str, bytes]:
    """The files of the model folder (name -> bytes) of a task with the resolved `spec`, the
    stored `entries`, default `search` settings and weights `state`; `card(config)` writes the
    README from config.json's contents. config.json keeps, for the record, the settings only
    training reads: `training`, or those of `spec`."""
    init_args = spec["init_args"]
    skipped = TRAINING_ONLY | set(SEARCH_SETTINGS)
    files: dict[str, bytes] = {WEIGHTS: weights_file(state)}
    scalars = {}
    for key, value in entries.items():
        if key in ENTRY_FILES:
            name = ENTRY_FILES[key]
            files[name] = value if isinstance(value, bytes) else _json(value)
        else:
            scalars[key] = value
    config = {
        "library_name": LIBRARY,
        "identity": identity.record(),
        "model": {
            "class_path": spec["class_path"],
            "init_args": {k: v for k, v in init_args.items() if k not in skipped},
        },
        "search": dict(search),
        "entries": scalars,
        "training": dict(
            training
            if training is not None
            else {k: v for k, v in init_args.items() if k in TRAINING_ONLY}
        ),
        "files": {
            name: {"size": len(data), "sha256": sha256_of(data)} for name, data in files.items()
        },
    }
    for key, name in ENTRY_FILES.items():
        if name in files:
            config["files"][name]["entry"] = key
    files[CONFIG] = _json(config)
    files[CARD] = card(config).encode("utf-8")
    return files


def _json(value: Any) -> bytes:
    return (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


@dataclass
class FolderModel:
    """What a model folder holds, checked against its config.json: its identity, its model
    (specification, default search settings), its stored entries, and its weights (read when
    asked for)."""

    config: dict[str, Any]
    identity: Identity
    entries: dict[str, Any]
    folder: Path

    @property
    def spec(self) -> Spec:
        return self.config["model"]

    @property
    def search(self) -> dict[str, Any]:
        return self.config["search"]

    @property
    def training(self) -> dict[str, Any]:
        return dict(self.config.get("training") or {})

    def weights(self) -> dict[str, Tensor]:
        """The weights, read from model.safetensors (no pickle)."""
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        path = self.folder / WEIGHTS
        try:
            return load_file(path)
        except (SafetensorError, OSError, ValueError) as error:
            raise CheckpointError(f"{path} is not a readable safetensors file: {error}") from None


def is_model_folder(path: Path) -> bool:
    """Whether `path` is a folder holding a config.json (a model folder, or meant as one)."""
    return path.is_dir() and (path / CONFIG).is_file()


def read_config(folder: Path) -> dict[str, Any]:
    """The config.json of a seqtasks model folder, checked to be one.

    Raises:
        CheckpointError: naming the file, for a missing or malformed one, or one of another
            library's model.
    """
    path = folder / CONFIG
    if not path.is_file():
        raise CheckpointError(f"{folder} is not a seqtasks model folder: it has no {CONFIG}")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise CheckpointError(f"{path} is not UTF-8 text: the file is damaged") from None
    except json.JSONDecodeError as error:
        raise CheckpointError(
            f"{path} is not valid JSON (line {error.lineno}, column {error.colno}: {error.msg})"
        ) from None
    if not isinstance(config, dict) or config.get("library_name") != LIBRARY:
        library = config.get("library_name") if isinstance(config, dict) else None
        raise CheckpointError(
            f"{path} is not a seqtasks model's (library_name: {library or 'none'}): "
            "seqtasks reads only the folders `seqtasks export --to folder` writes"
        )
    for key, kind in (("identity", dict), ("model", dict), ("search", dict), ("files", dict)):
        if not isinstance(config.get(key), kind):
            raise CheckpointError(f"{path} has no {key!r} section: the file is damaged")
    for key in ("entries", "training"):  # optional, but sections when there
        if not isinstance(config.get(key) or {}, dict):
            raise CheckpointError(f"{path}: its {key!r} is no section: the file is damaged")
    return config


def read_folder(folder: str | Path, where: str | None = None) -> FolderModel:
    """The model in `folder`, every file checked against config.json (`check_file`), the
    stored entries against the identity's fingerprints; the weights are read later.
    `where` names the folder in messages (default: its path).

    Raises:
        NewerModelError: for a folder of a newer format.
        CheckpointError: naming the file, for anything missing, truncated, foreign or damaged.
    """
    from seqtasks.model_files.identity import entry_name, fingerprint_difference, fingerprints

    folder = Path(folder)
    where = where or str(folder)
    config = read_config(folder)
    identity = from_record(config["identity"], where)
    files = config["files"]
    if WEIGHTS not in files:
        raise CheckpointError(f"{folder / CONFIG} lists no {WEIGHTS}: the file is damaged")
    entries = dict(config.get("entries") or {})
    for name, expected in files.items():
        if not isinstance(expected, dict) or "/" in name or name.startswith("."):
            raise CheckpointError(f"{folder / CONFIG}: its entry for {name!r} is damaged")
        check_file(folder, name, expected)
        key = expected.get("entry")
        if key is not None:
            kept = ENTRY_FILES.get(key) if isinstance(key, str) else None
            if kept != name:
                what = f"the {entry_name(key)}" if isinstance(key, str) else f"entry {key!r}"
                raise CheckpointError(
                    f"{folder / CONFIG} lists {name} as {what}, which a model folder keeps in "
                    f"{kept or 'no file'}: the file was edited"
                )
            entries[key] = entry_from_file(folder / name)
    try:
        found = fingerprints(entries)
    except ValueError as error:  # an entry of config.json's own "entries" that is no model
        raise CheckpointError(f"{where}: {error}") from None
    mismatch = fingerprint_difference(identity.fingerprints, found, ("config.json", "files"))
    if mismatch is not None:
        raise CheckpointError(f"{where}: its files are not those it was trained with: {mismatch}")
    return FolderModel(config, identity, entries, folder)
