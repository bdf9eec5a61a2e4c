"""Lightning callbacks every task's training can use: the summary at the end of a fit, and the
writer of `seqtasks predict`'s outputs."""

from __future__ import annotations

from pathlib import Path

import lightning as L
from lightning.pytorch.callbacks import BasePredictionWriter
from lightning.pytorch.utilities import rank_zero_only

from seqtasks.io.files import write_atomic
from seqtasks.metrics.formats import format_score


class FitSummary(L.Callback):
    """At the end of `fit`, print the best validation score, its checkpoint, the last scores
    (`metrics.formats`) and the plots."""

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        # Here, where every process asks: `log_dir` is a collective call under DDP.
        self.plots = Path(trainer.log_dir or trainer.default_root_dir) / "attention"

    @rank_zero_only
    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        checkpoint = trainer.checkpoint_callback
        lines = []
        if checkpoint is not None and checkpoint.best_model_path:
            score, monitor = checkpoint.best_model_score, checkpoint.monitor
            shown = "n/a" if score is None else format_score(monitor or "", float(score))
            lines.append(f"best {monitor} {shown}: {checkpoint.best_model_path}")
        settings = getattr(pl_module, "val_settings", None)
        if settings is not None:  # what the validation scores were searched with
            search = "greedy search" if settings.greedy else f"beam {settings.beam}"
            test = getattr(pl_module, "test_settings", settings)
            lines.append(
                f"validation searched with {search} (val_beam); testing, the commands and "
                f"the server search with beam {test.beam} (test_beam), so their scores differ"
                if test.beam != settings.beam
                else f"validation searched with {search}, as testing does"
            )
        for name, value in sorted(trainer.callback_metrics.items()):
            if name.startswith("val/"):
                lines.append(f"last {name} {format_score(name, value)}")
        if self.plots.is_dir():
            lines.append(f"attention plots: {self.plots}")
        print("\n".join(["", "== seqtasks fit summary ==", *lines]))


class TranslationWriter(BasePredictionWriter):
    """Write the translations of `seqtasks predict` to `output`, one line per source line, in
    the order of the input file (batches are bucketed by length, so they are put back).

    Args:
        output: the file to write; it is replaced only once complete.
    """

    def __init__(self, output: str = "predictions.txt"):
        super().__init__(write_interval="epoch")
        self.output = Path(output)

    def write_on_epoch_end(self, trainer, pl_module, predictions, batch_indices) -> None:
        pairs = sorted(pair for batch in predictions for pair in batch)
        write_atomic(self.output, "".join(text + "\n" for _, text in pairs))
        print(f"wrote {len(pairs)} translations to {self.output}")
