"""Whether a checkpoint fits the run it is restored into: its model the config's, setting by
setting, and its tokenisers the data's (`check_identity`); its weights the model's names and
shapes; and (to resume training) its optimiser state the optimiser's class and parameter groups,
and its learning-rate schedulers the config's. A difference is said in one line, first one
first, before anything is restored: PyTorch would otherwise end the run with some 30 lines of
`size mismatch` (weights), a `ValueError` inside `Optimizer.load_state_dict` (parameter groups),
or no error at all: a model with another number of heads, or data read by another tokeniser of
the same size, would train on from weights that mean something else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from torch.optim import Optimizer

from seqtasks.io.checkpoint_files import CheckpointError

RESUME_HINT = "give the settings it was trained with (its run's config.yaml)"
DATA_HINT = (
    "give the data it was trained on, prepared as it was (its tokenisers), or start a new run"
)


def check_identity(checkpoint: Mapping[str, Any], model: Any, datamodule: Any, where: str) -> None:
    """Refuse, in one line naming the setting or tokeniser and both values, a checkpoint that is
    not the model `model` (a task built from the config) trained on `datamodule`'s data: every
    setting of its specification but those that may change on resume (docs/resume.md), and the
    fingerprint of each tokeniser or vocabulary. A model built by hand, whose hyperparameters
    are no specification, is compared by its tokenisers alone.

    Raises:
        NewerModelError: for a checkpoint of a newer seqtasks.
        CheckpointError: for a checkpoint of another model or data.
    """
    from pathlib import Path

    from seqtasks.model_files.comparison import difference
    from seqtasks.model_files.identity import fingerprint_difference, fingerprints
    from seqtasks.model_files.sources import checked, checkpoint_source
    from seqtasks.model_files.spec import SpecError, from_hparams, resolved

    try:
        config = resolved(from_hparams(model.hparams, type(model)))
    except SpecError:  # a model built by hand: its hyperparameters are no specification
        config = None
    source = checkpoint_source(dict(checkpoint), Path(where), where)  # its format checked
    if config is not None:
        why = difference(checked(source).resolved, config, ("checkpoint", "config"))
        if why is not None:
            raise CheckpointError(
                f"the checkpoint's model differs from the config's: {why}; {RESUME_HINT}"
            )
    if datamodule is not None and hasattr(model, "data_entries"):
        data = fingerprints(model.data_entries(datamodule))
        why = fingerprint_difference(source.identity.fingerprints, data, ("checkpoint", "data"))
        if why is not None:
            raise CheckpointError(f"the checkpoint was trained on other data: {why}; {DATA_HINT}")


def _shape(value: Any) -> list[int] | None:
    shape = getattr(value, "shape", None)
    return None if shape is None else list(shape)


def state_dict_difference(
    checkpoint: Mapping[str, Any], model: Mapping[str, Any], model_name: str = "the model"
) -> str | None:
    """How the tensors of a checkpoint's `state_dict` differ from a model's `state_dict()`, in
    words: the first name (in the model's order) whose shape differs or that only one of them
    has, and how many differ in each way; None when every name and shape agree, as
    `load_state_dict(strict=True)` requires. `model_name` says where the model comes from, e.g.
    'first at w, [96, 32] in the checkpoint, [192, 32] in the config (1 tensor of another
    shape)' for `model_name="the config"`.
    """
    reshaped = [n for n in model if n in checkpoint and _shape(checkpoint[n]) != _shape(model[n])]
    only_model = [name for name in model if name not in checkpoint]
    only_checkpoint = [name for name in checkpoint if name not in model]
    if not (reshaped or only_model or only_checkpoint):
        return None
    first = next((n for n in model if n in reshaped or n not in checkpoint), None)
    if first is None:
        first_words = f"first at {only_checkpoint[0]}, in the checkpoint but not in {model_name}"
    elif first in reshaped:
        first_words = (
            f"first at {first}, {_shape(checkpoint[first])} in the checkpoint, "
            f"{_shape(model[first])} in {model_name}"
        )
    else:
        first_words = f"first at {first}, in {model_name} but not in the checkpoint"
    counts = [
        (len(reshaped), "of another shape"),
        (len(only_model), f"only in {model_name}"),
        (len(only_checkpoint), "only in the checkpoint"),
    ]
    kinds = [f"{n} tensor{'s' * (n != 1)} {how}" for n, how in counts if n]
    return f"{first_words} ({', '.join(kinds)})"


def check_weights(
    checkpoint: Mapping[str, Any], model: Mapping[str, Any], from_config: bool
) -> None:
    """Raise a `CheckpointError` naming the first difference (`state_dict_difference`) if the
    weights `checkpoint` cannot be loaded into `model`: a model built from the config
    (`from_config`, a run restoring `--ckpt_path`), or from the checkpoint's hyperparameters."""
    if from_config:
        difference = state_dict_difference(checkpoint, model, "the config")
        message = f"the checkpoint's model differs from the config's: {difference}; {RESUME_HINT}"
    else:
        difference = state_dict_difference(checkpoint, model, "that model")
        message = f"its weights do not fit the model its hyperparameters describe: {difference}"
    if difference is not None:
        raise CheckpointError(message)


def _class_name(hparam: Any) -> str | None:
    """The name of the class a hyperparameter names (a `class_path` entry, or the class)."""
    if isinstance(hparam, type):
        return hparam.__name__
    class_path = hparam.get("class_path") if isinstance(hparam, Mapping) else None
    return class_path.rsplit(".", 1)[-1] if isinstance(class_path, str) else None


def training_layout(checkpoint: Mapping[str, Any]) -> dict[str, Any]:
    """What of a checkpoint's training state must fit the run that resumes from it: the number
    of parameters in each optimiser's groups (None: no optimiser state), the number of
    schedulers, and the classes its hyperparameters name (None where they name none). Small:
    the states themselves stay where Lightning keeps them."""
    hparams = checkpoint.get("hyper_parameters") or {}
    states = checkpoint.get("optimizer_states")
    groups = (
        None if states is None else [[len(g["params"]) for g in s["param_groups"]] for s in states]
    )
    return {
        "groups": groups,
        "schedulers": len(checkpoint.get("lr_schedulers") or []),
        "optimizer": _class_name(hparams.get("optimizer")),
        "lr_scheduler": _class_name(hparams.get("lr_scheduler")),
    }


def _schedulers(count: int, name: str | None) -> str:
    return "none" if not count else name if count == 1 and name else f"{count} schedulers"


def training_difference(
    saved: Mapping[str, Any], optimizers: Sequence[Optimizer], schedulers: Sequence[Any]
) -> str | None:
    """How the run's optimisers and learning-rate schedulers differ from those whose state a
    checkpoint holds (as `training_layout` describes it), in words; None when they agree."""
    if saved["groups"] is None:
        return (
            "it holds weights only, without the optimiser's state "
            "(ModelCheckpoint(save_weights_only=True)), so it cannot resume training"
        )
    if len(saved["groups"]) != len(optimizers):
        return (
            f"{len(saved['groups'])} optimisers in the checkpoint, {len(optimizers)} in the config"
        )
    for saved_groups, optimizer in zip(saved["groups"], optimizers):
        name = type(optimizer).__name__
        if saved["optimizer"] is not None and saved["optimizer"] != name:
            return f"the optimiser is {saved['optimizer']} in the checkpoint, {name} in the config"
        groups = [len(group["params"]) for group in optimizer.param_groups]
        if len(saved_groups) != len(groups):
            return (
                f"the optimiser has {len(saved_groups)} parameter groups in the checkpoint, "
                f"{len(groups)} in the config"
            )
        for i, (before, now) in enumerate(zip(saved_groups, groups)):
            if before != now:
                return (
                    f"the optimiser's parameter group {i} holds {before} parameters in the "
                    f"checkpoint, {now} in the config"
                )
    names = [type(scheduler).__name__ for scheduler in schedulers]
    now = _schedulers(len(names), names[0] if names else None)
    before = _schedulers(saved["schedulers"], saved["lr_scheduler"])
    if saved["schedulers"] != len(names) or (saved["lr_scheduler"] and before != now):
        return f"the learning-rate scheduler is {before} in the checkpoint, {now} in the config"
    return None


def check_resumable(
    saved: Mapping[str, Any], optimizers: Sequence[Optimizer], schedulers: Sequence[Any]
) -> None:
    """Raise a `CheckpointError` saying what differs if a run with `optimizers` and
    `schedulers` cannot resume from the training state `saved` (`training_layout`)."""
    difference = training_difference(saved, optimizers, schedulers)
    if difference is not None:
        raise CheckpointError(
            f"the checkpoint's training state differs from the config's: {difference}; "
            f"{RESUME_HINT}"
        )
