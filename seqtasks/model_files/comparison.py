"""Comparing two models' specifications (`spec`) setting by setting: which differ, named by
their path (`decoder.num_heads`), and which may differ between a checkpoint and the run that
resumes, averages or evaluates it (docs/resume.md, "What may change on resume")."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from seqtasks.model_files.folder import SEARCH_SETTINGS, TRAINING_ONLY
from seqtasks.model_files.spec import Path_, Spec, imported, name

# What may differ between a checkpoint and the config that resumes, averages or evaluates it
# (docs/resume.md, "What may change on resume", which says why each): the task's settings that
# only training, validation or search read, by name, with everything under them (the optimiser's
# and scheduler's classes are checked with the training state, `compatibility`; their values
# apply from the first resumed step) ...
TASK_SETTINGS = TRAINING_ONLY | frozenset(SEARCH_SETTINGS) | {"constrained"}
# ... and the parts' settings that only training reads, or that only say where the weights
# that the checkpoint's replace came from, by name wherever they are in a part.
PART_SETTINGS = frozenset(
    {
        "dropout",
        "attention_dropout",
        "activation_checkpointing",
        "expectation_probability",
        "backbone_lr",
        "pretrained",
        "weights",
    }
)


def _leaves(value: Any, path: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    """(path, value) of every setting of a resolved spec, in order; a part's class is a setting
    at (*path, "class_path"), before the part's own."""
    if isinstance(value, Mapping) and "class_path" in value:
        yield (*path, "class_path"), canonical(value["class_path"])
        yield from _leaves(value.get("init_args") or {}, path)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    else:
        yield path, value


def canonical(class_path: str) -> str:
    """The import path of the class `class_path` names, where it is defined (a config's
    `seqtasks.encoders.RNNEncoder` and a checkpoint's `seqtasks.encoders.rnn.RNNEncoder` are one
    class); `class_path` itself if it names none here."""
    try:
        found = imported(class_path)
    except (ImportError, AttributeError, ValueError):
        return class_path
    return f"{found.__module__}.{found.__qualname__}" if isinstance(found, type) else class_path


def may_differ(path: Path_) -> bool:
    """Whether the setting at `path` may differ between a checkpoint and the run that resumes,
    averages or evaluates it (`TASK_SETTINGS`, `PART_SETTINGS`)."""
    if not path:
        return False
    return path[0] in TASK_SETTINGS or (len(path) > 1 and path[-1] in PART_SETTINGS)


def shown(value: Any) -> str:
    """A setting's value as a message shows it: strings bare, the rest as JSON."""
    if value is _ABSENT:
        return "not set"
    return value if isinstance(value, str) else json.dumps(value)


_ABSENT = object()


def differences(first: Spec, second: Spec, strict: bool = False) -> list[tuple[Path_, Any, Any]]:
    """(path, first value, second value) of each setting in which two resolved specs differ, in
    the second's order; those that `may_differ` left out unless `strict`. Of a part whose class
    differs, only the class is named."""
    ours, theirs = dict(_leaves(first)), dict(_leaves(second))
    paths = [*theirs, *(path for path in ours if path not in theirs)]
    changed = [
        path[:-1]
        for path in paths
        if path[-1:] == ("class_path",) and ours.get(path, _ABSENT) != theirs.get(path, _ABSENT)
    ]
    found = []
    for path in paths:
        if (not strict and may_differ(path)) or any(
            path[: len(part)] == part and path != (*part, "class_path") for part in changed
        ):
            continue
        before, after = ours.get(path, _ABSENT), theirs.get(path, _ABSENT)
        if before != after:
            found.append((path, before, after))
    return found


def difference(first: Spec, second: Spec, names: tuple[str, str]) -> str | None:
    """The first setting in which two resolved specs differ (`differences`), in one line that
    names it and both values, `names` saying whose each is: `decoder.num_heads: checkpoint 2,
    config 4`; with how many more differ. None when they agree."""
    found = differences(first, second)
    if not found:
        return None
    path, before, after = found[0]
    what = f"{name(path)}: {names[0]} {shown(before)}, {names[1]} {shown(after)}"
    if len(found) > 1:
        others = ", ".join(name(p) for p, _, _ in found[1:4])
        more = "…" if len(found) > 4 else ""
        what += f" (and {len(found) - 1} more: {others}{more})"
    return what
