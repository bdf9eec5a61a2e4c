"""The optimiser's and learning-rate scheduler's settings of a resumed run: the config's.

Lightning restores an optimiser and its schedulers whole from the checkpoint, settings included,
so a run resumed with another learning rate, weight decay or warm-up would go on with the old
ones without a word. A resumed run instead takes its settings from the config and its state from
the checkpoint (Adam's moments, the step count, a plateau scheduler's best score and patience
used): `ConfigSettings` notes what the config built before Lightning restores the checkpoint
into it, and `apply` puts the changed settings back after. With settings equal to the
checkpoint's, nothing is touched, and the run goes on exactly as it would have (docs/resume.md).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torch.optim import Optimizer
from torch.optim.lr_scheduler import ReduceLROnPlateau

from seqtasks.model_files.spec import plain

# What a scheduler's `state_dict` holds of where it is, rather than of how it is set.
SCHEDULER_STATE = frozenset(
    {
        "last_epoch",
        "_step_count",
        "_is_initial",
        "_get_lr_called_within_step",
        "_last_lr",
        "best",
        "num_bad_epochs",
        "cooldown_counter",
    }
)
RATES = ("lr", "initial_lr")  # an optimiser group's learning rate, set by the schedule


@dataclass
class ConfigSettings:
    """What the config built, before the checkpoint's state is restored into it: each
    optimiser's parameter groups' settings, and each scheduler's `state_dict`."""

    groups: list[list[dict[str, Any]]]
    schedulers: list[dict[str, Any]]

    @classmethod
    def of(cls, optimizers: Sequence[Optimizer], schedulers: Sequence[Any]) -> ConfigSettings:
        groups = [
            [{k: v for k, v in group.items() if k != "params"} for group in optimizer.param_groups]
            for optimizer in optimizers
        ]
        return cls(groups, [scheduler.state_dict() for scheduler in schedulers])

    def apply(
        self,
        optimizers: Sequence[Optimizer],
        schedulers: Sequence[Any],
        optimizer_changed: bool,
        rate_changed: bool,
        scheduler_changed: bool,
    ) -> None:
        """Give the restored `optimizers` and `schedulers` the config's settings where the
        config changed them: the optimiser's (learning rate apart) if `optimizer_changed`, the
        scheduler's if `scheduler_changed`; with `rate_changed`, the learning rate starts again
        from the config's (a plateau scheduler's reductions so far are undone), and a schedule
        gives this step's rate from it."""
        for optimizer, groups in zip(optimizers, self.groups):
            for group, config in zip(optimizer.param_groups, groups):
                if optimizer_changed:
                    group.update({k: v for k, v in config.items() if k not in RATES})
                if rate_changed:
                    group.update({k: v for k, v in config.items() if k in RATES})
        for scheduler, config in zip(schedulers, self.schedulers):
            if scheduler_changed or rate_changed:
                restored = scheduler.state_dict()
                kept = {k: v for k, v in restored.items() if k in SCHEDULER_STATE}
                scheduler.load_state_dict({**config, **kept})
            if (scheduler_changed or rate_changed) and not isinstance(scheduler, ReduceLROnPlateau):
                _set_rates(scheduler)


def _set_rates(scheduler: Any) -> None:
    """Set its optimiser's learning rates to what the schedule gives at its step (the closed
    form where the scheduler has one; `get_lr` is one for LambdaLR and InverseSqrtWarmup)."""
    closed_form = getattr(scheduler, "_get_closed_form_lr", None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # get_lr outside `step` warns that it is
        rates = closed_form() if closed_form is not None else scheduler.get_lr()
    for group, rate in zip(scheduler.optimizer.param_groups, rates):
        group["lr"] = rate
    scheduler._last_lr = [group["lr"] for group in scheduler.optimizer.param_groups]


def _rates(hparams: Mapping[str, Any]) -> list[Any]:
    """The learning rates a task's hyperparameters set: the optimiser's, an image encoder's
    `backbone_lr`, and the task's `encoder_lr`."""
    optimizer = plain(hparams.get("optimizer")) or {}
    encoder = plain(hparams.get("encoder")) or {}
    return [
        optimizer.get("init_args", {}).get("lr") if isinstance(optimizer, dict) else optimizer,
        encoder.get("init_args", {}).get("backbone_lr") if isinstance(encoder, dict) else None,
        hparams.get("encoder_lr"),
    ]


def changed(saved: Mapping[str, Any], config: Mapping[str, Any]) -> tuple[bool, bool, bool]:
    """Whether the config's hyperparameters change, from a checkpoint's `saved` ones: the
    optimiser's settings but its learning rate, a learning rate, and the scheduler's."""

    def settings(hparams: Mapping[str, Any]) -> Any:
        optimizer = plain(hparams.get("optimizer"))
        if isinstance(optimizer, dict):
            init_args = {k: v for k, v in optimizer.get("init_args", {}).items() if k != "lr"}
            return {**optimizer, "init_args": init_args}
        return optimizer

    return (
        settings(saved) != settings(config),
        _rates(saved) != _rates(config),
        plain(saved.get("lr_scheduler")) != plain(config.get("lr_scheduler")),
    )
