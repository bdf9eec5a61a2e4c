"""A task's checkpoint hooks: what a checkpoint holds beyond Lightning's own state (per process,
the random generators and the REINFORCE baseline; never non-finite weights), what it must
fit to be restored (the model's weights, and to resume training, the optimiser and schedulers),
refused in one line before anything is restored (`seqtasks.training.compatibility`), and the
optimiser's and schedulers' settings a resumed run takes from its config
(`seqtasks.training.resumed_settings`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from seqtasks.training.checkpoints import refuse_non_finite
from seqtasks.training.compatibility import check_resumable, check_weights, training_layout
from seqtasks.training.resume import (
    restore_process_state,
    save_process_states,
    saved_process_state,
)
from seqtasks.training.resumed_settings import ConfigSettings, changed


class CheckpointHooks:
    """The checkpoint hooks of `EncoderDecoderTask` (a LightningModule with an `objective`),
    which lists this class before LightningModule; each hook calls on to the next class's, so
    that `TrainingHooks` may stand before or after it."""

    objective: Any  # the task's Objective (`seqtasks.tasks.objective`)
    _resume_state: dict[str, Any] | None = None  # this process's, from the checkpoint
    _training_layout: dict[str, Any] | None = None  # the checkpoint's (`training_layout`)
    _changed: tuple[bool, bool, bool] | None = None  # optimiser, rate, scheduler (`changed`)
    _config_settings: ConfigSettings | None = None  # what the config built, before restoring

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Refuse to write non-finite weights; keep, per process, the REINFORCE baseline and
        the random generators (dropout, sampled attention), which Lightning does not save."""
        super().on_save_checkpoint(checkpoint)
        refuse_non_finite(checkpoint["state_dict"], self.global_step)
        save_process_states(checkpoint, self.objective.baseline)

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        super().on_load_checkpoint(checkpoint)
        self._resume_state = saved_process_state(checkpoint, self.global_rank)
        self._training_layout = training_layout(checkpoint)
        self._changed = changed(checkpoint.get("hyper_parameters") or {}, self.hparams)

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True, assign=False):
        """PyTorch's, refusing first, in one line naming the first difference, weights whose
        names or shapes differ from the model's (`check_weights`): a model built from the
        config when a trainer restores it, from the checkpoint's hyperparameters otherwise."""
        if strict:
            check_weights(state_dict, self.state_dict(), from_config=self._trainer is not None)
        return super().load_state_dict(state_dict, strict, assign)

    def on_fit_start(self) -> None:
        # The optimisers exist, and Lightning has yet to restore their state into them.
        super().on_fit_start()
        layout, self._training_layout = self._training_layout, None
        if layout is not None and self.trainer.ckpt_path:
            schedulers = [config.scheduler for config in self.trainer.lr_scheduler_configs]
            check_resumable(layout, self.trainer.optimizers, schedulers)
            if self._changed and any(self._changed):
                self._config_settings = ConfigSettings.of(self.trainer.optimizers, schedulers)

    def on_train_start(self) -> None:
        # Set late, once the data loaders and the sanity check have drawn what they draw.
        super().on_train_start()
        state, self._resume_state = self._resume_state, None
        if state is not None and self.trainer.ckpt_path:
            self.objective.baseline = restore_process_state(state, self.device)
        settings, self._config_settings = self._config_settings, None
        if settings is not None:  # Lightning has restored the checkpoint's: the config's again
            schedulers = [config.scheduler for config in self.trainer.lr_scheduler_configs]
            settings.apply(self.trainer.optimizers, schedulers, *self._changed)
