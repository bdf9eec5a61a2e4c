"""Machine translation: text in, text out, scored with sacreBLEU on detokenised text."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from seqtasks.data.batch import Batch, pad
from seqtasks.data.batching import TokenBucketSampler
from seqtasks.data.tokenizer import EOS_ID, PAD_ID, SentencePieceTokenizer
from seqtasks.data.translation import encode_source
from seqtasks.decoders.base import Decoder
from seqtasks.encoders.base import Encoder
from seqtasks.io.checkpoint_files import stored_entries
from seqtasks.layers.memory import Memory
from seqtasks.metrics.split_scores import Translated, TranslationScores
from seqtasks.search import run_batches
from seqtasks.search.hypothesis import Hypothesis
from seqtasks.tasks.base import EncoderDecoderTask

CHECKPOINT_KEY = "seqtasks"


@dataclass
class Translation:
    """One translation: its text, its subword pieces, its score (the log-probability, divided
    by the length penalty in beam search), and the attention behind each piece when asked for.
    `alternatives` holds the rest of an n-best list, best first."""

    text: str
    tokens: list[str]  # subword pieces, for plots
    score: float
    attention: Tensor | None = field(default=None, repr=False)  # (len(tokens), source + EOS)
    alternatives: list[Translation] = field(default_factory=list)


class TranslationTask(EncoderDecoderTask):
    """Translate with any encoder and decoder; validate with BLEU on detokenised text.

    The sentencepiece models come from the DataModule when training starts and are stored in
    every checkpoint, so `TranslationTask.load_from_checkpoint(path)` is all an app needs.

    Args:
        encoder: built as `encoder(src_vocab_size)`.
        decoder: built as `decoder(tgt_vocab_size, encoder.out_dim)`.
        src_vocab_size, tgt_vocab_size: linked from the DataModule by the CLI.
        share_embeddings: one table for source and target tokens (Press and Wolf 2017), for a
            joint vocabulary (`data_prep/multi30k.py --joint`); with a tied decoder it is also
            the output projection.
        (the rest `EncoderDecoderTask`'s, by keyword)
    """

    Scores = TranslationScores

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

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        if self.src_tokenizer is None or self.tgt_tokenizer is None:
            raise RuntimeError("cannot save a translation checkpoint without its tokenisers")
        super().on_save_checkpoint(checkpoint)
        checkpoint[CHECKPOINT_KEY] = {
            "task": "translation",
            "src_tokenizer": self.src_tokenizer.proto,
            "tgt_tokenizer": self.tgt_tokenizer.proto,
        }

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        src, tgt = stored_entries(checkpoint, "translation", ("src_tokenizer", "tgt_tokenizer"))
        self.set_tokenizers(
            SentencePieceTokenizer(src, "checkpoint source tokeniser"),
            SentencePieceTokenizer(tgt, "checkpoint target tokeniser"),
        )
        super().on_load_checkpoint(checkpoint)

    # ---- evaluation -----------------------------------------------------------------------
    def evaluation_records(
        self, batch: Batch, memory: Memory, beam: int, losses: list[tuple[float, int]]
    ) -> list[Translated]:
        texts = [self.tgt_tokenizer.decode(nbest[0].tokens) for nbest in self.search(memory, beam)]
        return [
            Translated(int(i), loss, tokens, source, text, reference)
            for i, (loss, tokens), source, text, reference in zip(
                batch.index, losses, batch.src_text, texts, batch.tgt_text
            )
        ]

    def predict_step(self, batch: Batch, batch_idx: int) -> list[tuple[int, str]]:
        """(index in the split, translation) for each sentence of the batch."""
        hypotheses = self.decode(batch.src, batch.src_mask, self.test_beam)
        return [
            (int(i), self.tgt_tokenizer.decode(nbest[0].tokens))
            for i, nbest in zip(batch.index, hypotheses)
        ]

    # ---- the API the apps use ---------------------------------------------------------------
    @torch.no_grad()
    def translate(
        self,
        sentences: Sequence[str],
        beam_size: int = 5,
        n_best: int = 1,
        max_tokens: int = 2000,
        max_length: int = 200,
        return_attention: bool = False,
        workers: int | None = None,
        stop: str | None = None,
    ) -> list[list[Translation]]:
        """Translate raw sentences in length-sorted batches of about `max_tokens` source tokens.

        An empty line translates to an empty string; sources longer than `max_length` subwords
        are cut with a warning. Returns, per sentence in input order, its n-best translations.
        On a CPU, `workers` threads (default: torch's thread count) take the batches in turn,
        each on one core (`run_batches`). The defaults measured fastest on a 2-core CPU
        (docs/transformer.md, "Speed"); the output does not depend on them. `stop`: beam
        search's stopping rule, if not the task's `beam_stop`.
        """
        if self.src_tokenizer is None or self.tgt_tokenizer is None:
            raise RuntimeError("the model has no tokenisers: load it from a checkpoint")
        self.eval()
        encoded = [encode_source(self.src_tokenizer, s.strip(), max_length) for s in sentences]
        results = [[Translation("", [], 0.0, None)] * n_best for _ in sentences]  # empty lines
        todo = [i for i, ids in enumerate(encoded) if ids]
        lengths = [len(encoded[i]) + 1 for i in todo]

        def translate_batch(chunk: Sequence[int]) -> None:
            rows = [todo[j] for j in chunk]
            src = pad([encoded[i] + [EOS_ID] for i in rows]).to(self.device)
            nbests = self.decode(src, src != PAD_ID, beam_size, n_best, return_attention, stop)
            for i, nbest in zip(rows, nbests):
                results[i] = [self._translation(h) for h in nbest]

        batches = TokenBucketSampler(lengths, max_tokens, shuffle=False).batches
        run_batches(translate_batch, batches, workers, self.device.type)
        return results

    def source_pieces(self, sentence: str, max_length: int = 200) -> list[str]:
        """The source subwords plus EOS: the columns of a `Translation.attention` matrix."""
        ids = encode_source(self.src_tokenizer, sentence.strip(), max_length) + [EOS_ID]
        return self.src_tokenizer.pieces(ids)

    def _translation(self, hypothesis: Hypothesis) -> Translation:
        return Translation(
            text=self.tgt_tokenizer.decode(hypothesis.tokens),
            tokens=self.tgt_tokenizer.pieces(hypothesis.tokens),
            score=hypothesis.score,
            attention=hypothesis.attention,
        )
