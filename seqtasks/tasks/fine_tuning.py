"""Starting a task from another model's weights and fine-tuning them (docs/pretraining.md):
a pre-trained encoder (`pretrained_encoder`), frozen for the first steps and trained at a rate
of its own, or a whole trained model of the same task (`pretrained_model`, for self-critical
training from a cross-entropy model)."""

from __future__ import annotations

from typing import Any

from seqtasks.tasks.pretrained import (
    SETTING,
    PretrainedEncoderError,
    pretrained_model_weights,
    pretrained_weights,
)


class FineTuning:
    """The hooks of `EncoderDecoderTask` that start a fresh fit from other weights and train
    the encoder as asked; its settings (`pretrained_encoder`, `pretrained_model`,
    `frozen_encoder_steps`, `encoder_lr`) are the task's."""

    pretrained_encoder: str | None
    pretrained_model: str | None
    frozen_encoder_steps: int
    encoder_lr: float | None

    def start_from_pretrained(self, datamodule: Any) -> None:
        """Load `pretrained_model`'s weights into the whole model (`pretrained_model_weights`:
        the same task and parts, trained on data of the same tokenisers), then
        `pretrained_encoder`'s into the encoder, refusing one that does not fit or reads with
        another source tokeniser than `datamodule`'s (`pretrained_weights`)."""
        if self.pretrained_model:
            entries = None if datamodule is None else self.data_entries(datamodule)
            self.load_state_dict(pretrained_model_weights(self.pretrained_model, self, entries))
        if not self.pretrained_encoder:
            return
        tokenizer = None  # a fit without a DataModule: nothing to compare with
        if datamodule is not None:
            tokenizer = self.source_tokenizer(datamodule)
            if tokenizer is None:
                raise PretrainedEncoderError(
                    f"{SETTING}: {type(datamodule).__name__} gives no source tokeniser that a "
                    "pre-trained encoder could read with"
                )
        weights = pretrained_weights(self.pretrained_encoder, self.encoder, tokenizer)
        self.encoder.load_state_dict(weights)

    @classmethod
    def source_tokenizer(cls, datamodule: Any) -> bytes | None:
        """The sentencepiece model `datamodule` reads sources with (None: it reads them
        otherwise), which a pre-trained encoder must share."""
        return cls.data_entries(datamodule).get("src_tokenizer")

    def pretrained_parameters(self) -> list[Any]:
        """The encoder's parameters that a pre-trained encoder gives, not the task's own
        (`Encoder.task_specific`: an ELMo layer mix, which trains with the rest of the task)."""
        named = self.encoder.named_parameters()
        return [p for name, p in named if not self.encoder.task_specific(name)]

    def parameter_groups(self) -> Any:
        """All parameters; with `encoder_lr`, the encoder's in a group of that rate."""
        if self.encoder_lr is None:
            return self.parameters()
        encoder = self.pretrained_parameters()
        mine = {id(p) for p in encoder}
        rest = [p for p in self.parameters() if id(p) not in mine]  # a shared table: the encoder's
        return [{"params": encoder, "lr": self.encoder_lr}, {"params": rest}]

    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        """Freeze the encoder for the first `frozen_encoder_steps` steps, then train it: those
        of its parameters that train at all (a frozen image backbone stays frozen), but for the
        task's own, which train throughout (ELMo's layer mix over a frozen biLM)."""
        if self.frozen_encoder_steps:
            if not hasattr(self, "_trainable"):  # as built, before the first step freezes them
                self._trainable = [p for p in self.pretrained_parameters() if p.requires_grad]
            trained = self.global_step >= self.frozen_encoder_steps
            for parameter in self._trainable:
                parameter.requires_grad_(trained)
        super().on_train_batch_start(batch, batch_idx)
