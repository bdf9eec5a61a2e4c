"""Machine translation: text in, text out, scored with sacreBLEU on detokenised text."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from seqtasks.data.batch import Batch
from seqtasks.data.tokenizer import SentencePieceTokenizer
from seqtasks.decoders.base import Decoder
from seqtasks.encoders.base import Encoder
from seqtasks.layers.memory import Memory
from seqtasks.search import Hypothesis
from seqtasks.tasks.base import EncoderDecoderTask, Losses
from seqtasks.tasks.stored import StoredEntries
from seqtasks.translation import TASK
from seqtasks.translation.scores import Translated, TranslationScores


class TranslationTask(StoredEntries, EncoderDecoderTask):
    """Translate with any encoder and decoder; validate with BLEU on detokenised text.

    The sentencepiece models come from the DataModule when training starts and are stored in
    every checkpoint, so `TranslationTask.load_from_checkpoint(path)` (or `seqtasks.load`, which
    translates with it: `seqtasks.translation.translator.Translator`) is all an app needs.

    Args:
        encoder: built as `encoder(src_vocab_size)`.
        decoder: built as `decoder(tgt_vocab_size, encoder.out_dim)`.
        src_vocab_size, tgt_vocab_size: linked from the DataModule by the CLI.
        share_embeddings: one table for source and target tokens (Press and Wolf 2017), for a
            joint vocabulary (`data_prep/multi30k.py --joint`); with a tied decoder it is also
            the output projection.
        **settings: the rest `EncoderDecoderTask`'s, by keyword
    """

    Scores = TranslationScores
    entry = TASK
    stored_keys, stored_as = ("src_tokenizer", "tgt_tokenizer"), "tokenisers"
    rewards = ("bleu", "chrf")

    def __init__(
        self,
        encoder: Callable[[int], Encoder],
        decoder: Callable[[int, int], Decoder],
        src_vocab_size: int,
        tgt_vocab_size: int,
        share_embeddings: bool = False,
        monitor: str = "val/bleu",
        **settings: Any,
    ):
        super().__init__(monitor=monitor, **settings)
        self.save_hyperparameters()
        self.build_parts(encoder, decoder, tgt_vocab_size, src_vocab_size)
        if share_embeddings:
            if src_vocab_size != tgt_vocab_size:
                raise ValueError(
                    f"share_embeddings needs one joint vocabulary, but the source has "
                    f"{src_vocab_size} entries and the target {tgt_vocab_size}"
                )
            self.decoder.embedding.weight = self.encoder.embedding.weight
        self.src_tokenizer: SentencePieceTokenizer | None = None
        self.tgt_tokenizer: SentencePieceTokenizer | None = None

    # ---- tokenisers travel with the checkpoint ---------------------------------------------
    def setup(self, stage: str) -> None:
        datamodule = getattr(self.trainer, "datamodule", None) if self._trainer else None
        if self.src_tokenizer is None and datamodule is not None:
            self.set_tokenizers(datamodule.src_tokenizer, datamodule.tgt_tokenizer)

    def set_tokenizers(self, src: SentencePieceTokenizer, tgt: SentencePieceTokenizer) -> None:
        expected = (self.hparams.src_vocab_size, self.hparams.tgt_vocab_size)
        if (src.vocab_size, tgt.vocab_size) != expected:
            raise ValueError(
                f"tokenisers have vocabularies {(src.vocab_size, tgt.vocab_size)} but the model "
                f"was built for {expected}"
            )
        if self.hparams.share_embeddings and src.proto != tgt.proto:
            raise ValueError(
                "share_embeddings needs one joint sentencepiece model for both languages "
                "(data_prep/multi30k.py --joint)"
            )
        self.src_tokenizer, self.tgt_tokenizer = src, tgt

    def stored(self) -> dict[str, Any] | None:
        if self.src_tokenizer is None or self.tgt_tokenizer is None:
            return None
        return {
            "src_tokenizer": self.src_tokenizer.proto,
            "tgt_tokenizer": self.tgt_tokenizer.proto,
        }

    def restore(self, entries: dict[str, Any]) -> None:
        self.set_tokenizers(
            SentencePieceTokenizer(entries["src_tokenizer"], "checkpoint source tokeniser"),
            SentencePieceTokenizer(entries["tgt_tokenizer"], "checkpoint target tokeniser"),
        )

    @classmethod
    def data_entries(cls, datamodule: Any) -> dict[str, Any]:
        return {
            "src_tokenizer": datamodule.src_tokenizer.proto,
            "tgt_tokenizer": datamodule.tgt_tokenizer.proto,
        }

    # ---- evaluation -----------------------------------------------------------------------
    def evaluation_records(
        self, batch: Batch, found: list[list[Hypothesis]], memory: Memory, losses: Losses
    ) -> list[Translated]:
        texts = [self.tgt_tokenizer.decode(nbest[0].tokens) for nbest in found]
        return [
            Translated(int(i), loss, tokens, source, text, reference)
            for i, (loss, tokens), source, text, reference in zip(
                batch.index, losses, batch.src_text, texts, batch.tgt_text
            )
        ]

    def sequence_rewards(
        self, reward: str, batch: Batch, outputs: list[Hypothesis], k: int
    ) -> list[float]:
        """Sentence-level sacreBLEU (with its effective order, so a short output scores) or
        chrF of each output against its reference, in [0, 1]."""
        import sacrebleu

        score = sacrebleu.sentence_bleu if reward == "bleu" else sacrebleu.sentence_chrf
        return [
            score(self.tgt_tokenizer.decode(h.tokens), [batch.tgt_text[i // k]]).score / 100
            for i, h in enumerate(outputs)
        ]

    def predict_step(self, batch: Batch, batch_idx: int) -> list[tuple[int, str]]:
        """(index in the split, translation) for each sentence of the batch."""
        return [
            (int(i), self.tgt_tokenizer.decode(nbest[0].tokens))
            for i, nbest in zip(batch.index, self.predicted(batch))
        ]
