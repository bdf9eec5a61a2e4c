"""What every encoder–decoder task shares: the loss, optimisation, decoding, gathering results."""

from __future__ import annotations

from typing import Any

import lightning as L
import torch
import torch.distributed as dist
import torch.nn.functional as F
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import Tensor

from seqtasks.data.tokenizer import BOS_ID, EOS_ID, PAD_ID
from seqtasks.decoders.base import Decoder, DecoderOutput
from seqtasks.encoders.base import Encoder
from seqtasks.memory import Memory
from seqtasks.search import Hypothesis, beam_search, greedy, max_lengths


class EncoderDecoderTask(L.LightningModule):
    """The system around an `encoder` and a `decoder` that subclasses build in `__init__`.

    Args:
        label_smoothing: ε of label smoothing (Szegedy et al. 2016) in the cross-entropy.
        optimizer: builds the optimiser from the parameters (YAML: `class_path`/`init_args`).
        lr_scheduler: builds a scheduler from the optimiser; ReduceLROnPlateau watches `monitor`,
            any other scheduler steps every training step.
        monitor: the validation metric that plateau scheduling uses (and configs checkpoint on).
        val_beam: beam size when decoding the validation set (1 = greedy).
        test_beam: beam size when decoding the test set and in `predict`.
        length_alpha: α of the length penalty in beam search.
        max_length_ratio, max_length_offset: outputs are cut at ratio · input length + offset.
        torch_compile: compile the encoder's and decoder's forward passes with `torch.compile`
            (dynamic shapes, since every batch has its own lengths); search steps stay eager.
    """

    encoder: Encoder
    decoder: Decoder

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
        self._eval_outputs: list[tuple[int, str, str, str]] = []

    def configure_model(self) -> None:
        if self.torch_compile and not getattr(self, "_compiled", False):
            self.encoder.compile(dynamic=True)
            self.decoder.compile(dynamic=True)
            self._compiled = True

    # ---- training -------------------------------------------------------------------------
    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> DecoderOutput:
        return self.decoder(self.encoder(src, src_mask), tgt_in)

    def token_loss(self, logits: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
        """Label-smoothed cross-entropy per target token; returns (mean loss, token count)."""
        total = F.cross_entropy(
            logits.flatten(0, 1).float(),
            targets.flatten(),
            ignore_index=PAD_ID,
            label_smoothing=self.label_smoothing,
            reduction="sum",
        )
        tokens = (targets != PAD_ID).sum()
        return total / tokens.clamp(min=1), tokens

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        output = self(batch.src, batch.src_mask, batch.tgt_in)
        loss, _ = self.token_loss(output.logits, batch.tgt_out)
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

    def configure_optimizers(self) -> Any:
        optimizer = self.optimizer(self.parameters())
        if self.lr_scheduler is None:
            return optimizer
        scheduler = self.lr_scheduler(optimizer)
        if isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
            config = {"scheduler": scheduler, "monitor": self.monitor, "interval": "epoch"}
        else:
            config = {"scheduler": scheduler, "interval": "step"}
        return {"optimizer": optimizer, "lr_scheduler": config}

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
        """Encode a padded batch and search: greedy for beam 1, batched beam search otherwise."""
        memory: Memory = self.encoder(src, src_mask)
        limit = max_lengths(memory, self.max_length_ratio, self.max_length_offset)
        if beam_size == 1 and n_best == 1:
            return greedy(self.decoder, memory, BOS_ID, EOS_ID, limit, return_attention)
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
        )

    # ---- evaluation: results are gathered from every process, then scored once -------------
    def gathered_outputs(self) -> list[tuple[int, str, str, str]]:
        """(index, source, hypothesis, reference) of the whole split, in split order.

        Under DDP each process decoded a shard (with repeats that even out the shards);
        everything is gathered and de-duplicated by index, so the score equals one process's.
        """
        outputs = self._eval_outputs
        self._eval_outputs = []
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            shards: list[Any] = [None] * dist.get_world_size()
            dist.all_gather_object(shards, outputs)
            outputs = [item for shard in shards for item in shard]
        return sorted({item[0]: item for item in outputs}.values())
