"""Starting a task's encoder from another model's (pre-training, then fine-tuning all of it:
Devlin et al. 2019, §3.2; docs/pretraining.md): the encoder weights of a checkpoint, model
folder or `hf://` name, taken only when the encoder is the very same kind of part, weight for
weight, and reads with the very same tokeniser as the task's data.

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
PREFIX = "encoder."


class PretrainedEncoderError(CheckpointError):
    """A pre-trained encoder that does not fit the task's, said in one line naming both (a
    `CheckpointError`, which `seqtasks fit` ends a run with before its first step)."""


def encoder_class(spec: Mapping[str, Any]) -> str | None:
    """The class of the encoder a model's specification builds (None: it has none)."""
    encoder = (spec.get("init_args") or {}).get("encoder")
    return canonical(encoder["class_path"]) if isinstance(encoder, Mapping) else None


def pretrained_weights(
    reference: str | Path, encoder: nn.Module, tokenizer: bytes | None
) -> dict[str, Tensor]:
    """The encoder weights `reference` holds, as `encoder.load_state_dict` takes them.

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
    weights = {k[len(PREFIX) :]: v for k, v in source.weights().items() if k.startswith(PREFIX)}
    difference = shape_difference(weights, encoder.state_dict())
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
    return weights


def shape_difference(theirs: Mapping[str, Tensor], mine: Mapping[str, Tensor]) -> str | None:
    """The first weight the two encoders do not share by name and shape, in words."""
    for key in [*mine, *(k for k in theirs if k not in mine)]:
        if key not in theirs:
            return f"its encoder has no {key}, which the config's has"
        if key not in mine:
            return f"its encoder has a {key}, which the config's has not"
        if theirs[key].shape != mine[key].shape:
            return (
                f"its encoder's {key} is {tuple(theirs[key].shape)}, the config's "
                f"{tuple(mine[key].shape)} (another width, depth or vocabulary)"
            )
    return None
