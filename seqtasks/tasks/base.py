"""The system around an encoder and a decoder: it builds them from the data's sizes, trains them
on the `Objective`, and drives validation (records into a `RecordMetric`) and search."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import lightning as L
import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import Tensor

from seqtasks.data.tokenizer import PAD_ID
from seqtasks.decoders.base import Decoder, DecoderOutput
from seqtasks.encoders.base import Encoder, Inputs
from seqtasks.layers.memory import Memory
from seqtasks.metrics.records import RecordMetric
from seqtasks.search import Constraint, Hypothesis, SearchSettings, search
from seqtasks.tasks.fine_tuning import FineTuning
from seqtasks.tasks.objective import Objective
from seqtasks.tasks.parts import build_part, check_decoder, check_encoder
from seqtasks.tasks.self_critical import SelfCritical, self_critical_step
from seqtasks.training.checkpoint_hooks import CheckpointHooks
from seqtasks.training.compiling import CompileMode, compile_parts
from seqtasks.training.hooks import TrainingHooks
from seqtasks.training.positions import check_positions

Losses = list[tuple[float, int]]  # per example: its objective summed over its tokens, and how many


class EncoderDecoderTask(FineTuning, TrainingHooks, CheckpointHooks, L.LightningModule):
    """What every task shares; a subclass builds its parts with `build_parts`, turns decoded
    batches into its records (`evaluation_records`) and says how it scores them (`Scores`).
    The settings below are every task's (by keyword, in YAML as the task's own `init_args`);
    a task declares again only those whose default differs. What must hold in every fit (the
    loss watch, stopping, schedules, clipping): `TrainingHooks`; what its checkpoints hold and
    must fit: `CheckpointHooks`. The two share no state and each calls on to the next class's
    hook, so neither depends on the other or on their order; starting from another model's
    weights: `FineTuning`.

    Args:
        label_smoothing, attention_penalty, entropy_weight, reward_scale: the `Objective`.
        optimizer: builds the optimiser from the parameters (YAML: `class_path`/`init_args`).
        lr_scheduler: builds a scheduler from the optimiser; ReduceLROnPlateau steps on
            `monitor` after every validation (so the checkpoint of that validation holds the
            step), any other scheduler every training step.
        monitor: the validation metric that plateau scheduling uses (and configs checkpoint on).
        val_beam: beam size when decoding the validation set (1 = greedy).
        test_beam: beam size when decoding the test set, in `predict`, and by default in
            `seqtasks.load`'s models, the server and evaluation (their `test_settings`).
        length_alpha: α of the length penalty in beam search.
        beam_stop: when beam search ends an input, "exact" or "heuristic" (`beam_search`).
        max_length_ratio, max_length_offset: outputs are cut at ratio · input length + offset.
        torch_compile: `compile_parts` the encoder and decoder: true (dynamic shapes), "static"
            or "reduce-overhead" (CUDA graphs), the last two for data padded to a few shapes;
            eager, with a warning, without a C++ compiler; search stays eager. docs/peers.md.
        pretrained_encoder: a checkpoint, model folder or `hf://` name whose encoder weights
            the encoder starts from when a fit starts afresh (`tasks.pretrained`: the same
            part, weight for weight, reading with the data's source tokeniser); all of it is
            then fine-tuned. docs/pretraining.md.
        frozen_encoder_steps: the encoder is not trained for this many first steps.
        encoder_lr: the encoder's own learning rate (None: the optimiser's), scheduled alike.
        pretrained_model: a trained model of this task and config whose weights a fresh fit
            starts from (`tasks.pretrained`), as self-critical training does.
        self_critical: train on the metric (`tasks.self_critical.SelfCritical`'s fields: reward,
            samples, baseline, cross_entropy) instead of cross-entropy; None: cross-entropy.
    """

    encoder: Encoder
    decoder: Decoder
    reads: ClassVar[Inputs] = "tokens"  # what the task's batches give the encoder
    Scores: ClassVar[type[RecordMetric]]  # how a split is scored, from the task's records
    rewards: ClassVar[tuple[str, ...]] = ()  # the metrics self-critical training can reward

    def __init__(
        self,
        label_smoothing: float = 0.1,
        optimizer: OptimizerCallable = torch.optim.Adam,
        lr_scheduler: LRSchedulerCallable | None = None,
        monitor: str = "val/loss",
        val_beam: int = 1,
        test_beam: int = 5,
        length_alpha: float = 1.0,
        beam_stop: str = "exact",
        max_length_ratio: float = 1.5,
        max_length_offset: int = 10,
        torch_compile: CompileMode = False,
        attention_penalty: float = 0.0,
        entropy_weight: float = 0.0,
        reward_scale: float = 1.0,
        pretrained_encoder: str | None = None,
        frozen_encoder_steps: int = 0,
        encoder_lr: float | None = None,
        pretrained_model: str | None = None,
        self_critical: dict[str, Any] | None = None,
    ):
        super().__init__()
        if frozen_encoder_steps < 0:
            raise ValueError(f"frozen_encoder_steps must be 0 or more, got {frozen_encoder_steps}")
        self.torch_compile = torch_compile
        self.pretrained_encoder, self.encoder_lr = pretrained_encoder, encoder_lr
        self.frozen_encoder_steps = frozen_encoder_steps
        self.pretrained_model = pretrained_model
        self.self_critical = None
        if self_critical is not None:
            self.self_critical = SelfCritical.from_setting(self_critical, self.rewards)
        self.objective = Objective(label_smoothing, attention_penalty, entropy_weight, reward_scale)
        self.optimizer = optimizer
        self.lr_scheduler = lr_scheduler
        self.monitor = monitor
        # the search settings of validation, and of testing, `predict` and `seqtasks.load`
        search = (length_alpha, beam_stop, max_length_ratio, max_length_offset)
        yaml = {"stop": "beam_stop"}  # the messages name the settings as the config does
        self.val_settings = SearchSettings(val_beam, *search, names={**yaml, "beam": "val_beam"})
        self.test_settings = SearchSettings(test_beam, *search, names={**yaml, "beam": "test_beam"})
        self.val_scores, self.test_scores = self.Scores(), self.Scores()

    # ---- the parts --------------------------------------------------------------------------
    def build_parts(
        self,
        encoder: Callable[..., Encoder],
        decoder: Callable[[int, int], Decoder],
        tgt_vocab_size: int,
        *encoder_args: int,
    ) -> None:
        """Build the encoder as `encoder(*encoder_args)` and the decoder as
        `decoder(tgt_vocab_size, encoder.out_dim)`, refusing, with a message that names both, an
        encoder that reads other inputs than the task gives (`Encoder.reads`) and a decoder
        without attention when a loss term needs its weights."""
        check_encoder(self, encoder)
        memory_encoder = build_part("encoder", encoder, Encoder, *encoder_args)
        built = build_part("decoder", decoder, Decoder, tgt_vocab_size, memory_encoder.out_dim)
        self.attach(memory_encoder, built)

    def attach(self, encoder: Encoder, decoder: Decoder) -> None:
        """Hold the task's parts, refusing a decoder without attention when a loss term needs
        its weights."""
        check_decoder(self, decoder)
        self.encoder, self.decoder = encoder, decoder

    def configure_model(self) -> None:
        """Refuse parts too short for the data of the run (`check_positions`), before any step;
        compile them if asked."""
        trainer = self._trainer  # None when `load_from_checkpoint` builds the model
        if trainer is not None and trainer.datamodule is not None:
            stage = trainer.state.fn.value  # "fit", "validate", …
            check_positions(self.encoder, self.decoder, trainer.datamodule, stage)
        if trainer is not None and trainer.state.fn == "fit" and trainer.ckpt_path is None:
            self.start_from_pretrained(trainer.datamodule)  # afresh: a resumed fit has its own
        if self.torch_compile and not getattr(self, "_compiled", False):
            compile_parts(self.encoder, self.decoder, mode=self.torch_compile)
            self._compiled = True

    # ---- training ---------------------------------------------------------------------------
    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> DecoderOutput:
        return self.decoder(self.encode_source(src, src_mask), tgt_in)

    def encode_source(self, src: Tensor, src_mask: Tensor) -> Memory:
        """Source tokens (B, S) as the `Memory` the decoder reads: the encoder's (a task whose
        decoder reads other positions than the encoder's overrides it, as the parser reading
        pieces keeps one per word)."""
        return self.encoder(src, src_mask)

    def encode(self, batch: Any) -> Memory:
        """The batch's inputs as `Memory` (a task whose batches hold other inputs overrides it)."""
        return self.encode_source(batch.src, batch.src_mask)

    def teacher_forced(self, batch: Any) -> tuple[Memory, DecoderOutput]:
        """The batch encoded, and the decoder's teacher-forced pass over it, with attention
        when the objective reads it, and the encoder's own loss term joined to the decoder's
        (`DecoderOutput.auxiliary_loss`)."""
        memory = self.encode(batch)
        need = self.objective.needs_attention
        output = self.decoder(memory, batch.tgt_in, need_attention=need)
        return memory, output.adding(memory.auxiliary_loss)

    def loss(self, output: DecoderOutput, targets: Tensor, source_mask: Tensor) -> Tensor:
        """The training objective per target token (`Objective.per_token`)."""
        return self.objective.per_token(output, targets, source_mask)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        settings, size, loss = self.self_critical, len(batch), 0.0
        if settings is None or settings.cross_entropy:
            memory, output = self.teacher_forced(batch)
            loss = self.loss(output, batch.tgt_out, memory.mask)
        if settings is not None:  # on the metric (`tasks.self_critical`)
            step = self_critical_step(self, batch, settings)
            logged = {"reward": step.reward, "baseline": step.baseline, "better": step.better}
            self.log_dict({f"train/{k}": v for k, v in logged.items()}, batch_size=size)
            loss = step.loss + settings.cross_entropy * loss
        self.log("train/loss", loss, prog_bar=True, batch_size=size)
        self.watch_loss(loss, batch_idx)
        return loss

    def sequence_rewards(
        self, reward: str, batch: Any, outputs: list[Hypothesis], k: int
    ) -> list[float]:
        """The `reward` (one of `rewards`) of each output, `k` adjacent outputs per example of
        `batch` (`tasks.self_critical`)."""
        raise NotImplementedError(f"{type(self).__name__} rewards nothing")

    # ---- evaluation: a record per example, scored once per split ----------------------------
    def evaluation_records(
        self, batch: Any, found: list[list[Hypothesis]], memory: Memory, losses: Losses
    ) -> list[Any]:
        """The task's records of a batch and what search `found` for it; `losses` has, per
        example, its objective summed over its target tokens and their number."""
        raise NotImplementedError

    def evaluation_attention(self, batch: Any) -> bool:
        """Whether the records of `batch` read the attention of what search found."""
        return False

    def _evaluate(self, batch: Any, scores: RecordMetric, settings: SearchSettings) -> None:
        """The teacher-forced loss and a search (as every caller searches: `search`), from one
        encoding of the batch."""
        memory, output = self.teacher_forced(batch)
        objective = self.objective(output, batch.tgt_out, memory.mask).tolist()
        tokens = (batch.tgt_out != PAD_ID).sum(dim=1).tolist()
        attention = self.evaluation_attention(batch)
        found = search(self.decoder, memory, settings, self.search_constraint(memory), attention)
        scores.update(self.evaluation_records(batch, found, memory, list(zip(objective, tokens))))

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self._evaluate(batch, self.val_scores, self.val_settings)

    def test_step(self, batch: Any, batch_idx: int) -> None:
        self._evaluate(batch, self.test_scores, self.test_settings)

    def on_validation_epoch_end(self) -> None:
        self._log_scores(self.val_scores, "val")
        super().on_validation_epoch_end()  # plateau schedulers step on what was just logged

    def on_test_epoch_end(self) -> None:
        self._log_scores(self.test_scores, "test")

    def reported(self, scores: dict[str, float]) -> dict[str, float]:
        """Which of a split's scores the task logs (all, unless a subclass says otherwise)."""
        return scores

    def _log_scores(self, scores: RecordMetric, stage: str) -> None:
        # Every process computes the same, whole-split scores: syncing them changes nothing but
        # tells Lightning the epoch-level value is global.
        values = self.reported(scores.compute())
        scores.reset()
        for name, value in values.items():
            key = f"{stage}/{name}"
            self.log(key, value, prog_bar=key == self.monitor, sync_dist=True)

    # ---- search ---------------------------------------------------------------------------
    def search_constraint(self, memory: Memory) -> Constraint | None:
        """What the outputs of a search from `memory` must obey (a task with an output grammar
        overrides this); every caller of `search` asks it."""
        return None

    @torch.no_grad()
    def predicted(self, batch: Any) -> list[list[Hypothesis]]:
        """What search finds for a batch with the test settings (`predict_step`)."""
        memory = self.encode(batch)
        return search(self.decoder, memory, self.test_settings, self.search_constraint(memory))
