"""Starting a task's encoder from another model's (pre-training, then fine-tuning all of it:
Devlin et al. 2019, §3.2; docs/pretraining.md): the encoder weights of a checkpoint, model
folder or `hf://` name, taken only when the encoder is the very same kind of part, weight for
weight, and reads with the very same tokeniser as the task's data; or a whole trained model of
the task (self-critical training starts from one), taken only when it is the config's model,
weight for weight, trained on data of the same tokenisers or vocabularies.

Any model with an encoder will do: a masked language model (`configs/pretraining/mlm.yaml`),
or another task's model (a translation model's encoder for a parser)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torch import Tensor, nn

from seqtasks.io.checkpoint_files import CheckpointError
from seqtasks.model_files.comparison import canonical
from seqtasks.model_files.identity import fingerprint_difference, fingerprints
from seqtasks.model_files.sources import open_model

SETTING = "model.init_args.pretrained_encoder"
MODEL_SETTING = "model.init_args.pretrained_model"
PREFIX = "encoder."


class PretrainedError(CheckpointError):
    """Weights to start from that do not fit the task's, said in one line naming both (a
    `CheckpointError`, which `seqtasks fit` ends a run with before its first step)."""


class PretrainedEncoderError(PretrainedError):
    """A pre-trained encoder that does not fit the task's."""


def encoder_class(spec: Mapping[str, Any]) -> str | None:
    """The class of the encoder a model's specification builds (None: it has none)."""
    encoder = (spec.get("init_args") or {}).get("encoder")
    return canonical(encoder["class_path"]) if isinstance(encoder, Mapping) else None


def pretrained_weights(
    reference: str | Path, encoder: nn.Module, tokenizer: bytes | None
) -> dict[str, Tensor]:
    """The encoder weights `reference` holds, as `encoder.load_state_dict` takes them, with
    `encoder`'s own for the weights that are the task's (`Encoder.task_specific`).

    Raises:
        PretrainedEncoderError: naming `SETTING`, the model and both sides, for a model that
            cannot be read, has no encoder, has an encoder of another class or with weights of
            other names or shapes, or reads with another source tokeniser than `tokenizer`
            (the task's data's; None: not checked).
    """
    said = f"{SETTING} {reference}"
    try:
        source = open_model(reference)
    except (CheckpointError, OSError) as error:
        raise PretrainedEncoderError(f"{said}: {error}") from None
    theirs = encoder_class(source.spec)
    mine = f"{type(encoder).__module__}.{type(encoder).__qualname__}"
    if theirs is None:
        raise PretrainedEncoderError(f"{said}: the {source.task} model has no encoder")
    if theirs != mine:
        raise PretrainedEncoderError(
            f"{said}: its encoder is a {theirs.rsplit('.', 1)[-1]}, the config's a "
            f"{type(encoder).__name__}"
        )
    # The weights of the task each side serves (an ELMo layer mix) are neither taken nor
    # asked for: the config's start afresh (`Encoder.task_specific`).
    own, state = encoder.task_specific, encoder.state_dict()
    mine = {k: v for k, v in state.items() if not own(k)}
    weights = {
        k[len(PREFIX) :]: v
        for k, v in source.weights().items()
        if k.startswith(PREFIX) and not own(k[len(PREFIX) :])
    }
    difference = shape_difference(weights, mine)
    if difference is not None:
        raise PretrainedEncoderError(f"{said}: {difference}")
    if tokenizer is not None:
        if "src_tokenizer" not in source.entries:
            raise PretrainedEncoderError(
                f"{said}: the {source.task} model has no source tokeniser to compare with the "
                "data's"
            )
        found = fingerprint_difference(
            fingerprints({"src_tokenizer": source.entries["src_tokenizer"]}),
            fingerprints({"src_tokenizer": tokenizer}),
            ("pre-trained", "data"),
        )
        if found is not None:
            raise PretrainedEncoderError(
                f"{said} reads with another tokeniser than the data ({found}): prepare the data "
                "with the pre-trained model's"
            )
    fresh = {k: v for k, v in state.items() if own(k)}
    return {**weights, **fresh}


def pretrained_model_weights(
    reference: str | Path, task: nn.Module, entries: Mapping[str, Any] | None
) -> dict[str, Tensor]:
    """The weights of the trained model `reference`, as `task.load_state_dict` takes them.

    Raises:
        PretrainedError: naming `MODEL_SETTING`, the model and both sides, for a model that
            cannot be read, of another task, with weights of other names or shapes, or whose
            stored tokenisers or vocabularies differ from `entries` (the data's; None: not
            checked).
    """
    said = f"{MODEL_SETTING} {reference}"
    try:
        source = open_model(reference)
    except (CheckpointError, OSError) as error:
        raise PretrainedError(f"{said}: {error}") from None
    if source.task != task.entry.name:
        raise PretrainedError(f"{said}: a {source.task} model, not a {task.entry.name} one")
    weights = dict(source.weights())
    difference = shape_difference(weights, task.state_dict(), "model")
    if difference is not None:
        raise PretrainedError(f"{said}: {difference}")
    if entries is not None:
        stored = {key: source.entries[key] for key in entries if key in source.entries}
        found = fingerprint_difference(
            fingerprints(stored), fingerprints(entries), ("pre-trained", "data")
        )
        if found is not None:
            raise PretrainedError(f"{said} was trained on other data ({found})")
    return weights


def shape_difference(
    theirs: Mapping[str, Tensor], mine: Mapping[str, Tensor], part: str = "encoder"
) -> str | None:
    """The first weight the two encoders (or models) do not share by name and shape, in
    words."""
    for key in [*mine, *(k for k in theirs if k not in mine)]:
        if key not in theirs:
            return f"its {part} has no {key}, which the config's has"
        if key not in mine:
            return f"its {part} has a {key}, which the config's has not"
        if theirs[key].shape != mine[key].shape:
            return (
                f"its {part}'s {key} is {tuple(theirs[key].shape)}, the config's "
                f"{tuple(mine[key].shape)} (another width, depth or vocabulary)"
            )
    return None
