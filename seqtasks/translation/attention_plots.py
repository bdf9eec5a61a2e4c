"""A Lightning callback that shows what a translation model attends to while it trains."""

from __future__ import annotations

from pathlib import Path

import lightning as L
from lightning.pytorch.loggers import TensorBoardLogger
from lightning.pytorch.utilities import rank_zero_only

from seqtasks.io.plots import plot_attention, png_pixels
from seqtasks.translation.task import TranslationTask
from seqtasks.translation.translator import Translator


class AttentionPlots(L.Callback):
    """After each validation, plot the attention of the first `num_examples` validation
    sentences to `<log dir>/attention/example<i>.png` (greedy decoding), and show each to every
    TensorBoard logger as the image `attention/example<i>` at the global step.

    Args:
        num_examples: how many validation sentences to draw.
    """

    def __init__(self, num_examples: int = 2):
        self.num_examples = num_examples
        self.folder: Path | None = None

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if not isinstance(pl_module, TranslationTask):
            raise ValueError(
                f"AttentionPlots draws a translation model's attention, not a "
                f"{type(pl_module).__name__}'s: for images use seqtasks caption --attention-maps"
            )
        if not pl_module.decoder.gives_attention:
            raise ValueError(
                f"AttentionPlots draws attention weights, but {type(pl_module.decoder).__name__} "
                "has no attention: remove the callback or choose a decoder with attention"
            )
        # Here, where every process asks: `log_dir` is a collective call under DDP.
        self.folder = Path(trainer.log_dir or trainer.default_root_dir) / "attention"

    @rank_zero_only
    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        examples = trainer.datamodule.datasets["validate"].examples[: self.num_examples]
        sentences = [e.src_text for e in examples]
        translator = Translator(pl_module, [])  # the model as it is now, not a checkpoint
        results = translator.translate(sentences, beam=1, attention=True)
        boards = [logger for logger in trainer.loggers if isinstance(logger, TensorBoardLogger)]
        for i, (sentence, best) in enumerate(zip(sentences, results)):
            if best.attention is None:  # an empty translation
                continue
            path = plot_attention(
                best.attention,
                translator.source_pieces(sentence),
                best.tokens,
                self.folder / f"example{i}.png",
                title=f"epoch {trainer.current_epoch}: {sentence} → {best.text}",
            )
            if boards:
                pixels = png_pixels(path)  # (H, W, 3): the PNG's very pixels
                for board in boards:
                    board.experiment.add_image(
                        f"attention/example{i}", pixels, trainer.global_step, dataformats="HWC"
                    )
