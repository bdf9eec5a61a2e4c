"""What every encoder–decoder task shares: the loss, optimisation, decoding, gathering results."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ClassVar

import lightning as L
import torch
import torch.distributed as dist
import torch.nn.functional as F
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import Tensor
from torch.optim.lr_scheduler import ReduceLROnPlateau

from seqtasks.data.tokenizer import BOS_ID, EOS_ID, PAD_ID
from seqtasks.decoders.base import Decoder, DecoderOutput
from seqtasks.encoders.base import Encoder, Inputs
from seqtasks.layers.memory import Memory
from seqtasks.search.beam import beam_search
from seqtasks.search.hypothesis import Constraint, Hypothesis, max_lengths
from seqtasks.search.single_path import greedy
from seqtasks.training.random_state import random_state, set_random_state

RESUME_KEY = "seqtasks_resume"  # per process: what a resumed run needs beyond Lightning's state


@dataclass
class Evaluated:
    """One example of a validation or test split, as decoded and scored (tasks extend it with
    the input, output and references their metrics read).

    Attributes:
        index: its position in the split; under DDP a padded shard repeats some examples,
            and gathering keeps one record per index.
        loss: its objective (`EncoderDecoderTask.objective`), summed over its target tokens.
        tokens: its number of target tokens.
    """

    index: int
    loss: float
    tokens: int


class EncoderDecoderTask(L.LightningModule):
    """The system around an `encoder` and a `decoder` that subclasses build in `__init__`.

    Args:
        label_smoothing: ε of label smoothing (Szegedy et al. 2016) in the cross-entropy.
        optimizer: builds the optimiser from the parameters (YAML: `class_path`/`init_args`).
        lr_scheduler: builds a scheduler from the optimiser; ReduceLROnPlateau steps on
            `monitor` after every validation (so the checkpoint of that validation holds the
            step), any other scheduler every training step.
        monitor: the validation metric that plateau scheduling uses (and configs checkpoint on).
        val_beam: beam size when decoding the validation set (1 = greedy).
        test_beam: beam size when decoding the test set and in `predict`.
        length_alpha: α of the length penalty in beam search.
        max_length_ratio, max_length_offset: outputs are cut at ratio · input length + offset.
        torch_compile: compile the encoder's and decoder's forward passes with `torch.compile`
            (dynamic shapes, since every batch has its own lengths); search steps stay eager.
        attention_penalty: λ of the doubly stochastic attention penalty (Xu et al. 2015, §4.2.1).
        entropy_weight: λ_e of the entropy bonus on the attention (Xu et al. 2015, §4.1).
        reward_scale: λ_r of the REINFORCE term for a decoder's stochastic choices.
        (`loss` says how the three enter the objective; 0 turns a term off.)
    """

    encoder: Encoder
    decoder: Decoder
    reads: ClassVar[Inputs] = "tokens"  # what the task's batches give the encoder

    def __init__(
        self,
        label_smoothing: float,
        optimizer: OptimizerCallable,
        lr_scheduler: LRSchedulerCallable | None,
        monitor: str,
        val_beam: int,
        test_beam: int,
        length_alpha: float,
        max_length_ratio: float,
        max_length_offset: int,
        torch_compile: bool = False,
        attention_penalty: float = 0.0,
        entropy_weight: float = 0.0,
        reward_scale: float = 1.0,
    ):
        super().__init__()
        self.torch_compile = torch_compile
        self.label_smoothing = label_smoothing
        self.optimizer = optimizer
        self.lr_scheduler = lr_scheduler
        self.monitor = monitor
        self.val_beam, self.test_beam = val_beam, test_beam
        self.length_alpha = length_alpha
        self.max_length_ratio, self.max_length_offset = max_length_ratio, max_length_offset
        self.attention_penalty = attention_penalty
        self.entropy_weight = entropy_weight
        self.reward_scale = reward_scale
        self.reward_baseline: Tensor | None = None  # b of REINFORCE (None: 0), set by `objective`
        self._eval_outputs: list[Evaluated] = []
        self._resume_state: dict[str, Any] | None = None  # this process's, from the checkpoint

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
        built = part_class(encoder, Encoder)
        if built is not None and built.reads != self.reads:
            raise ValueError(
                f"{type(self).__name__} gives its encoder {self.reads}, but {built.__name__} "
                f"reads {built.reads}: choose an encoder that reads {self.reads}"
            )
        memory_encoder = encoder(*encoder_args)
        self.attach(memory_encoder, decoder(tgt_vocab_size, memory_encoder.out_dim))

    def attach(self, encoder: Encoder, decoder: Decoder) -> None:
        """Hold the task's parts, refusing a decoder without attention when a loss term needs
        its weights."""
        terms = {"attention_penalty": self.attention_penalty, "entropy_weight": self.entropy_weight}
        needed = {name: value for name, value in terms.items() if value}
        if needed and not decoder.gives_attention:
            settings = " and ".join(f"{name}={value}" for name, value in needed.items())
            raise ValueError(
                f"{type(self).__name__} with {settings} needs attention weights, but "
                f"{type(decoder).__name__} has no attention: set them to 0 or choose a decoder "
                "with attention"
            )
        self.encoder, self.decoder = encoder, decoder

    @property
    def needs_attention(self) -> bool:
        """Whether the objective reads the decoder's attention (a penalty or bonus on it)."""
        return bool(self.attention_penalty or self.entropy_weight)

    def configure_model(self) -> None:
        if self.torch_compile and not getattr(self, "_compiled", False):
            self.encoder.compile(dynamic=True)
            self.decoder.compile(dynamic=True)
            self._compiled = True

    # ---- training -------------------------------------------------------------------------
    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> DecoderOutput:
        return self.decoder(self.encoder(src, src_mask), tgt_in)

    def encode(self, batch: Any) -> Memory:
        """The batch's inputs as `Memory` (a task whose batches hold other inputs overrides it)."""
        return self.encoder(batch.src, batch.src_mask)

    @staticmethod
    def token_nll(logits: Tensor, targets: Tensor, label_smoothing: float = 0.0) -> Tensor:
        """(B, T, V) logits, (B, T) targets -> (B, T) cross-entropy per token, 0 on padding."""
        return F.cross_entropy(
            logits.flatten(0, 1).float(),
            targets.flatten(),
            ignore_index=PAD_ID,
            label_smoothing=label_smoothing,
            reduction="none",
        ).view_as(targets)

    def token_loss(self, logits: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
        """Label-smoothed cross-entropy per target token; returns (mean loss, token count)."""
        total = self.token_nll(logits, targets, self.label_smoothing).sum()
        tokens = (targets != PAD_ID).sum()
        return total / tokens.clamp(min=1), tokens

    def loss(self, output: DecoderOutput, targets: Tensor, source_mask: Tensor) -> Tensor:
        """The training objective per target token: `objective` summed over the batch and
        divided by the number of target tokens."""
        tokens = (targets != PAD_ID).sum().clamp(min=1)
        return self.objective(output, targets, source_mask).sum() / tokens

    def objective(self, output: DecoderOutput, targets: Tensor, source_mask: Tensor) -> Tensor:
        """(B,) each example's objective, summed over its tokens. To the label-smoothed
        cross-entropy it adds the terms of Xu et al. (2015, §4), per example like the words,
        so that their weight relative to log p(y) is the paper's:

            + λ Σ_i (1 − Σ_t α_ti)²                        doubly stochastic attention
            − λ_e Σ_t H(α_t)                               entropy bonus
            − λ_r (log p(y | s) − b) Σ_t log p(s_t)        REINFORCE for the choices s

        The sums over t skip padding, the sum over i padded source positions. REINFORCE
        applies in training to the examples whose choices a decoder sampled
        (`DecoderOutput.sampled`; hard attention's others used the expected context). The
        reward is the unsmoothed log-likelihood of the caption given the choices, and b a
        moving average of it over the sampled examples of earlier batches, as in the
        authors' code: b starts at 0 and after each batch b ← 0.9 b + 0.1 · mean reward.
        Using only earlier batches keeps the gradient estimate unbiased.
        """
        mask = targets != PAD_ID  # (B, T)
        nll = self.token_nll(output.logits, targets, self.label_smoothing)  # (B, T)
        total = nll.sum(dim=1)  # (B,)
        if output.attention is not None and (self.attention_penalty or self.entropy_weight):
            alpha = output.attention.float() * mask[:, :, None]  # (B, T, S)
            if self.attention_penalty:
                coverage = alpha.sum(dim=1)  # (B, S) Σ_t α_ti
                shortfall = ((1 - coverage) ** 2) * source_mask  # (B, S)
                total = total + self.attention_penalty * shortfall.sum(dim=1)
            if self.entropy_weight:  # H(α_t); the clamp keeps the gradient finite at α = 0
                entropy = -(alpha * alpha.clamp(min=1e-12).log()).sum(dim=(1, 2))  # (B,)
                total = total - self.entropy_weight * entropy
        if output.choice_log_prob is not None and self.training and self.reward_scale:
            if self.label_smoothing:
                nll = self.token_nll(output.logits, targets)
            reward = -nll.sum(dim=1).detach()  # (B,) log p(y | s, a)
            sampled = output.sampled  # (B,)
            baseline = 0.0 if self.reward_baseline is None else self.reward_baseline
            advantage = (reward - baseline) * sampled  # (B,), 0 for the expectation's rows
            choices = (output.choice_log_prob * mask).sum(dim=1)  # (B,) Σ_t log p(s_t)
            total = total - self.reward_scale * advantage * choices
            if sampled.any():
                self.reward_baseline = 0.9 * baseline + 0.1 * reward[sampled].mean()
        return total

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        memory = self.encode(batch)
        output = self.decoder(memory, batch.tgt_in, need_attention=self.needs_attention)
        loss = self.loss(output, batch.tgt_out, memory.mask)
        self.log("train/loss", loss, prog_bar=True, batch_size=len(batch))
        if not torch.isfinite(loss):
            raise FloatingPointError(
                f"non-finite training loss {loss.item()} at step {self.global_step}, "
                f"batch {batch_idx}; lower the learning rate or check the data"
            )
        return loss

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        # Lightning validates at `max_steps` only if it falls on a validation interval; asking it
        # to stop makes it validate first, so a short run still leaves a scored best checkpoint.
        if 0 < self.trainer.max_steps <= self.global_step:
            self.trainer.should_stop = True

    def parameter_groups(self) -> Any:
        """What the optimiser is built from: all parameters, or groups with their own settings."""
        return self.parameters()

    def configure_optimizers(self) -> Any:
        optimizer = self.optimizer(self.parameter_groups())
        if self.lr_scheduler is None:
            return optimizer
        scheduler = self.lr_scheduler(optimizer)
        if isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
            config = {"scheduler": scheduler, "monitor": self.monitor, "interval": "epoch"}
        else:
            config = {"scheduler": scheduler, "interval": "step"}
        return {"optimizer": optimizer, "lr_scheduler": config}

    def lr_scheduler_step(self, scheduler: Any, metric: Any) -> None:
        # Lightning steps a plateau scheduler at the epoch's end, after the checkpoint of the
        # epoch's last validation, and skips that step when it resumes from that checkpoint.
        if not isinstance(scheduler, ReduceLROnPlateau):
            super().lr_scheduler_step(scheduler, metric)

    def on_validation_epoch_end(self) -> None:
        self._log_scores("val")
        if self.trainer.state.fn == "fit" and not self.trainer.sanity_checking:
            self._step_plateau()

    def _log_scores(self, stage: str) -> None:
        """Score the outputs gathered in `stage` ('val', 'test') and log the task's metrics."""
        raise NotImplementedError

    def _step_plateau(self) -> None:
        """Step ReduceLROnPlateau on the `monitor` value this validation logged."""
        schedulers = [c.scheduler for c in self.trainer.lr_scheduler_configs]
        plateaus = [s for s in schedulers if isinstance(s, ReduceLROnPlateau)]
        if not plateaus:
            return
        metrics = self.trainer.callback_metrics
        if self.monitor not in metrics:
            raise KeyError(
                f"ReduceLROnPlateau watches monitor={self.monitor!r}, which validation did not "
                f"log; it logged {sorted(metrics)}"
            )
        for scheduler in plateaus:
            scheduler.step(float(metrics[self.monitor]))

    # ---- checkpoints: what resuming needs beyond Lightning's own state ----------------------
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Refuse to write non-finite weights; keep, per process, the REINFORCE baseline and
        the random generators (dropout, sampled attention), which Lightning does not save."""
        for name, tensor in checkpoint["state_dict"].items():
            if isinstance(tensor, Tensor) and tensor.is_floating_point():
                if not torch.isfinite(tensor).all():
                    raise FloatingPointError(
                        f"not writing a checkpoint at step {self.global_step}: parameter "
                        f"{name} holds non-finite values"
                    )
        baseline = self.reward_baseline
        state = {
            "reward_baseline": None if baseline is None else baseline.detach().cpu(),
            "random": random_state(),
        }
        checkpoint[RESUME_KEY] = from_every_process(state)

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        states = checkpoint.get(RESUME_KEY)
        if states:  # a run resumed on fewer processes than it was saved on takes rank 0's
            self._resume_state = states[self.global_rank if self.global_rank < len(states) else 0]

    def on_train_start(self) -> None:
        # Set late, once the data loaders and the sanity check have drawn what they draw.
        state, self._resume_state = self._resume_state, None
        if state is not None and self.trainer.ckpt_path:
            baseline = state["reward_baseline"]
            self.reward_baseline = None if baseline is None else baseline.to(self.device)
            set_random_state(state["random"])

    # ---- decoding -------------------------------------------------------------------------
    @torch.no_grad()
    def decode(
        self,
        src: Tensor,
        src_mask: Tensor,
        beam_size: int = 1,
        n_best: int = 1,
        return_attention: bool = False,
    ) -> list[list[Hypothesis]]:
        """Encode a padded batch and `search`."""
        return self.search(self.encoder(src, src_mask), beam_size, n_best, return_attention)

    @torch.no_grad()
    def search(
        self,
        memory: Memory,
        beam_size: int = 1,
        n_best: int = 1,
        return_attention: bool = False,
    ) -> list[list[Hypothesis]]:
        """Greedy search for beam 1, batched beam search otherwise, within `search_limits`
        and under the task's `search_constraint`."""
        limit = self.search_limits(memory)
        constraint = self.search_constraint(memory)
        if beam_size == 1 and n_best == 1:
            return greedy(self.decoder, memory, BOS_ID, EOS_ID, limit, return_attention, constraint)
        return beam_search(
            self.decoder,
            memory,
            BOS_ID,
            EOS_ID,
            limit,
            beam_size,
            self.length_alpha,
            n_best,
            return_attention,
            constraint,
        )

    def search_limits(self, memory: Memory) -> Tensor:
        """(B,) output length limits: ratio · input length + offset."""
        return max_lengths(memory, self.max_length_ratio, self.max_length_offset)

    def search_constraint(self, memory: Memory) -> Constraint | None:
        """What the outputs must obey (a task with an output grammar overrides this)."""
        return None

    # ---- evaluation: results are gathered from every process, then scored once -------------
    def evaluation_losses(
        self, output: DecoderOutput, targets: Tensor, source_mask: Tensor
    ) -> list[tuple[float, int]]:
        """Per example of a batch: (its summed objective, its target tokens), for `Evaluated`."""
        objective = self.objective(output, targets, source_mask).tolist()
        return list(zip(objective, (targets != PAD_ID).sum(dim=1).tolist()))

    def gathered_outputs(self) -> list[Evaluated]:
        """The `Evaluated` records of the whole split, one per example, in split order.

        Under DDP each process decoded a shard (with repeats that even out the shards);
        everything is gathered and de-duplicated by index, so the scores equal one process's.
        """
        shards = from_every_process(self._eval_outputs)
        self._eval_outputs = []
        unique = {record.index: record for shard in shards for record in shard}
        return [unique[index] for index in sorted(unique)]

    def log_loss(self, stage: str, records: Sequence[Evaluated]) -> None:
        """`stage`/loss: the split's objective per target token, each example counted once."""
        tokens = sum(record.tokens for record in records)
        loss = sum(record.loss for record in records) / max(tokens, 1)
        self.log(f"{stage}/loss", loss, sync_dist=True)


def part_class(factory: Callable[..., Any], base: type) -> type | None:
    """The subclass of `base` that a part factory builds: a class, a `functools.partial` of
    one, or the partial jsonargparse makes of a `class_path` config; None if it cannot tell."""
    if isinstance(factory, type):
        return factory
    if isinstance(factory, functools.partial):
        for candidate in (factory.func, *factory.args):
            if isinstance(candidate, type) and issubclass(candidate, base):
                return candidate
    return None


def run_batches(
    work: Callable[[Sequence[int]], None],
    batches: Sequence[Sequence[int]],
    workers: int | None = None,
    device: str = "cpu",
) -> None:
    """Call `work(batch)` for every batch, under no_grad and the caller's autocast on `device`.

    On a CPU, `workers` threads (default: torch's thread count) take the batches in turn, each
    running its operations on one core: a search step is many small operations, which a second
    intra-op thread slows down rather than speeds up, whereas two batches side by side keep two
    cores busy (docs/parsing.md and docs/transformer.md, "Speed"). Elsewhere the default is one.
    torch's thread count is restored afterwards.
    """
    autocast_dtype = torch.get_autocast_dtype(device)
    autocast_on = torch.is_autocast_enabled(device)

    def run(batch: Sequence[int]) -> None:
        # no_grad and autocast are per thread: set them again in a worker.
        with torch.no_grad(), torch.autocast(device, autocast_dtype, autocast_on):
            work(batch)

    if workers is None:
        workers = torch.get_num_threads() if device == "cpu" else 1
    if workers <= 1 or len(batches) <= 1:
        for batch in batches:
            run(batch)
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(run, batches))
    finally:
        torch.set_num_threads(threads)


def from_every_process(value: Any) -> list[Any]:
    """`value` from every process, in rank order (under DDP); otherwise `[value]`."""
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        values: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(values, value)
        return values
    return [value]
