"""Masked language modelling (Devlin et al. 2019, BERT): any text encoder learns to give back
the pieces of its corrupted input (`masking.corrupt`), and, as an option, whether the second
of two sentences follows the first; its encoder then starts another task's
(`pretrained_encoder`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import lightning as L
import torch
import torch.nn.functional as F
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import Tensor, nn
from torchmetrics import SumMetric

from seqtasks.data.tokenizer import PAD_ID, SentencePieceTokenizer
from seqtasks.encoders.base import Encoder, Inputs
from seqtasks.pretraining import TASK
from seqtasks.pretraining.data import MaskedBatch
from seqtasks.tasks.parts import build_part, check_encoder
from seqtasks.tasks.stored import StoredEntries
from seqtasks.training.checkpoint_hooks import CheckpointHooks
from seqtasks.training.hooks import TrainingHooks
from seqtasks.training.positions import check_positions


class MaskedLMHead(nn.Module):
    """BERT's output layer (its `BertLMPredictionHead`): a dense layer, GELU and LayerNorm over
    each state, then logits over the pieces, by the encoder's own embedding table when it has
    one of the states' width (tied, as BERT ties them), else by a layer of its own."""

    def __init__(self, width: int, vocab_size: int, embedding: nn.Embedding | None):
        super().__init__()
        self.transform = nn.Sequential(nn.Linear(width, width), nn.GELU(), nn.LayerNorm(width))
        tied = embedding is not None and embedding.weight.shape == (vocab_size, width)
        self.embedding = embedding if tied else None  # not a parameter of its own: tied
        self.output = None if tied else nn.Linear(width, vocab_size, bias=False)
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, states: Tensor) -> Tensor:
        """(N, D) -> (N, V)."""
        hidden = self.transform(states)
        weight = self.embedding.weight if self.embedding is not None else self.output.weight
        return F.linear(hidden, weight, self.bias)


class NextSentenceHead(nn.Module):
    """BERT's pooler and classifier: tanh(W c + b) of the encoder's summary c, then two logits
    (B does not / does follow A)."""

    def __init__(self, width: int):
        super().__init__()
        self.pooler = nn.Linear(width, width)
        self.classifier = nn.Linear(width, 2)

    def forward(self, summary: Tensor) -> Tensor:
        return self.classifier(torch.tanh(self.pooler(summary)))


class MaskedLMObjective:
    """The loss: the mean cross-entropy of the chosen pieces, plus `next_sentence_weight` times
    that of next-sentence prediction. It has no REINFORCE term (`baseline` None, what the
    checkpoint hooks keep of an objective)."""

    baseline = None

    def __init__(self, next_sentence_weight: float):
        self.next_sentence_weight = next_sentence_weight


class MaskedLMTask(StoredEntries, TrainingHooks, CheckpointHooks, L.LightningModule):
    """A text encoder under BERT's masked-LM head (and next-sentence head, with
    `next_sentence_weight` > 0 and data of sentence pairs); its checkpoints keep the
    tokeniser as `src_tokenizer`, the name every task's source tokeniser has, so that a task
    that starts from this encoder is checked to read with the very same one.

    Args:
        encoder: built as `encoder(src_vocab_size)`; any encoder that reads tokens.
        src_vocab_size: linked from the DataModule by the CLI.
        next_sentence_weight: the weight of next-sentence prediction (0: no such head).
        optimizer, lr_scheduler, monitor: as every task's (`EncoderDecoderTask`).
    """

    entry = TASK
    reads: ClassVar[Inputs] = "tokens"
    stored_keys, stored_as = ("src_tokenizer",), "tokeniser"
    test_settings = None  # no search: the model fills in pieces (`MaskFiller`)

    def __init__(
        self,
        encoder: Callable[[int], Encoder],
        src_vocab_size: int,
        next_sentence_weight: float = 0.0,
        optimizer: OptimizerCallable = torch.optim.Adam,
        lr_scheduler: LRSchedulerCallable | None = None,
        monitor: str = "val/accuracy",
    ):
        super().__init__()
        self.save_hyperparameters()
        check_encoder(self, encoder)
        self.encoder: Encoder = build_part("encoder", encoder, Encoder, src_vocab_size)
        width = self.encoder.out_dim
        self.head = MaskedLMHead(width, src_vocab_size, getattr(self.encoder, "embedding", None))
        self.next_sentence = NextSentenceHead(width) if next_sentence_weight > 0 else None
        self.objective = MaskedLMObjective(next_sentence_weight)
        self.optimizer, self.lr_scheduler, self.monitor = optimizer, lr_scheduler, monitor
        summed = ("loss", "correct", "chosen") + (
            ("next_correct", "pairs") if self.next_sentence else ()
        )
        self.sums = nn.ModuleDict({name: SumMetric() for name in summed})
        self.src_tokenizer: SentencePieceTokenizer | None = None

    # ---- the tokeniser travels with the checkpoint -----------------------------------------
    def setup(self, stage: str) -> None:
        datamodule = getattr(self.trainer, "datamodule", None) if self._trainer else None
        if self.src_tokenizer is None and datamodule is not None:
            self.set_tokenizer(datamodule.src_tokenizer)

    def set_tokenizer(self, tokenizer: SentencePieceTokenizer) -> None:
        if tokenizer.vocab_size != self.hparams.src_vocab_size:
            raise ValueError(
                f"the tokeniser has {tokenizer.vocab_size} pieces but the model was built for "
                f"{self.hparams.src_vocab_size}"
            )
        self.src_tokenizer = tokenizer

    def stored(self) -> dict[str, Any] | None:
        return None if self.src_tokenizer is None else {"src_tokenizer": self.src_tokenizer.proto}

    def restore(self, entries: dict[str, Any]) -> None:
        self.set_tokenizer(SentencePieceTokenizer(entries["src_tokenizer"], "checkpoint tokeniser"))

    @classmethod
    def data_entries(cls, datamodule: Any) -> dict[str, Any]:
        return {"src_tokenizer": datamodule.src_tokenizer.proto}

    def configure_model(self) -> None:
        """Refuse an encoder too short for the data's inputs, before any step."""
        trainer = self._trainer
        if trainer is not None and trainer.datamodule is not None:
            check_positions(self.encoder, None, trainer.datamodule, trainer.state.fn.value)

    # ---- the objective ----------------------------------------------------------------------
    def forward(self, src: Tensor, src_mask: Tensor) -> tuple[Tensor, Tensor | None]:
        """(B, S) corrupted ids and mask -> (B, S, V) piece logits, and (B, 2) next-sentence
        logits (None without that head)."""
        memory = self.encoder(src, src_mask)
        nsp = None if self.next_sentence is None else self.next_sentence(memory.summary)
        return self.head(memory.states), nsp

    def losses(self, batch: MaskedBatch) -> dict[str, Tensor]:
        """Summed over the batch: the chosen pieces' cross-entropy and how many were right and
        chosen; with next-sentence prediction, its cross-entropy and right answers."""
        memory = self.encoder(batch.src, batch.src_mask)
        chosen = batch.targets != PAD_ID
        logits = self.head(memory.states[chosen])  # only the chosen positions: (N, V)
        targets = batch.targets[chosen]
        found = {
            "loss": F.cross_entropy(logits.float(), targets, reduction="sum"),
            "correct": (logits.argmax(-1) == targets).sum(),
            "chosen": chosen.sum(),
        }
        if self.next_sentence is not None:
            if bool((batch.is_next < 0).any()):
                raise ValueError(
                    "next_sentence_weight > 0 needs sentence pairs: set "
                    "data.init_args.next_sentence true"
                )
            nsp = self.next_sentence(memory.summary)
            found["next_loss"] = F.cross_entropy(nsp.float(), batch.is_next, reduction="sum")
            found["next_correct"] = (nsp.argmax(-1) == batch.is_next).sum()
            found["pairs"] = torch.tensor(len(batch), device=nsp.device)
        return found

    def loss(self, found: dict[str, Tensor]) -> Tensor:
        """The mean over chosen pieces, plus the weighted mean over pairs (`MaskedLMObjective`)."""
        loss = found["loss"] / found["chosen"].clamp(min=1)
        if "next_loss" in found:
            loss = loss + self.objective.next_sentence_weight * found["next_loss"] / found["pairs"]
        return loss

    def training_step(self, batch: MaskedBatch, batch_idx: int) -> Tensor:
        found = self.losses(batch)
        loss = self.loss(found)
        self.log("train/loss", loss, prog_bar=True, batch_size=len(batch))
        self.watch_loss(loss, batch_idx)
        return loss

    # ---- evaluation: summed over the split, logged once -------------------------------------
    def validation_step(self, batch: MaskedBatch, batch_idx: int) -> None:
        for name, value in self.losses(batch).items():
            if name in self.sums:
                self.sums[name].update(value)

    test_step = validation_step

    def on_validation_epoch_end(self) -> None:
        self._log_scores("val")
        super().on_validation_epoch_end()  # plateau schedulers step on what was just logged

    def on_test_epoch_end(self) -> None:
        self._log_scores("test")

    def scores(self) -> dict[str, float]:
        """The split's masked-piece loss (nats a piece), perplexity and accuracy, and the
        next-sentence accuracy when there is that head."""
        sums = {name: float(metric.compute()) for name, metric in self.sums.items()}
        for metric in self.sums.values():
            metric.reset()
        chosen = max(sums["chosen"], 1.0)
        loss = sums["loss"] / chosen
        found = {
            "loss": loss,
            "perplexity": float(torch.tensor(loss).exp()),
            "accuracy": 100 * sums["correct"] / chosen,
        }
        if self.next_sentence is not None:
            found["next_accuracy"] = 100 * sums["next_correct"] / max(sums["pairs"], 1.0)
        return found

    def _log_scores(self, stage: str) -> None:
        for name, value in self.scores().items():
            key = f"{stage}/{name}"
            self.log(key, value, prog_bar=key == self.monitor, sync_dist=True)

    def attach(self, encoder: Encoder, decoder: Any) -> None:
        """Masked language models are not ensembled (`seqtasks.load` of several)."""
        raise ValueError("masked language models are not ensembled: load one at a time")
