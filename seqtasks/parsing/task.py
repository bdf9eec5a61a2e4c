"""Constituency parsing as translation (Vinyals et al. 2015, "Grammar as a Foreign Language"):
a sentence in, its tree's bracket sequence out, scored the way EVALB scores."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import Tensor

from seqtasks.data.batch import Batch
from seqtasks.data.tokenizer import EOS_ID
from seqtasks.decoders.base import Decoder
from seqtasks.encoders.base import Encoder
from seqtasks.layers.memory import Memory
from seqtasks.parsing import TASK
from seqtasks.parsing.constraint import BracketConstraint
from seqtasks.parsing.linearisation import tree_from_output
from seqtasks.parsing.pieces import SourcePieces, first_pieces
from seqtasks.parsing.scores import Parsed, ParseScores, sentence_f1
from seqtasks.parsing.trees import to_line
from seqtasks.parsing.vocabulary import SPECIALS, ParsingVocabulary
from seqtasks.search import Hypothesis
from seqtasks.tasks.base import EncoderDecoderTask, Losses
from seqtasks.tasks.stored import StoredEntries


class ParsingTask(StoredEntries, EncoderDecoderTask):
    """Parse with any encoder and decoder; validate with EVALB's F1 (`val/f1`).

    Trees are scored as the model writes them (its own tags, or XX) over the gold words, with
    the punctuation EVALB deletes decided by the gold tags (`seqtasks.parsing.parseval`), so
    the brackets score the same whatever the preterminals say. The vocabularies
    come from the DataModule when training starts and are stored in every checkpoint, so
    `ParsingTask.load_from_checkpoint(path)` (or `seqtasks.load`, which parses with it:
    `seqtasks.parsing.parser.Parser`) is all an app needs.

    Args:
        encoder: built as `encoder(src_vocab_size)`.
        decoder: built as `decoder(tgt_vocab_size, encoder.out_dim)`.
        src_vocab_size, tgt_vocab_size: linked from the DataModule by the CLI.
        constrained: search only well-formed bracket sequences (`BracketConstraint`);
            otherwise search freely and repair the output.
        **settings: the rest `EncoderDecoderTask`'s, by keyword; lengths count source words + EOS,
            and the limit never falls below what a bracket around all the words needs
    """

    Scores = ParseScores
    entry = TASK
    stored_keys, stored_as = ("vocabulary",), "vocabularies"
    rewards = ("f1",)

    def __init__(
        self,
        encoder: Callable[[int], Encoder],
        decoder: Callable[[int, int], Decoder],
        src_vocab_size: int,
        tgt_vocab_size: int,
        constrained: bool = True,
        monitor: str = "val/f1",
        test_beam: int = 10,
        length_alpha: float = 0.0,
        max_length_ratio: float = 4.0,
        max_length_offset: int = 5,
        **settings: Any,
    ):
        super().__init__(
            monitor=monitor,
            test_beam=test_beam,
            length_alpha=length_alpha,
            max_length_ratio=max_length_ratio,
            max_length_offset=max_length_offset,
            **settings,
        )
        self.save_hyperparameters()
        self.build_parts(encoder, decoder, tgt_vocab_size, src_vocab_size)
        self.constrained = constrained
        self.vocabulary: ParsingVocabulary | None = None

    # ---- the vocabularies travel with the checkpoint ----------------------------------------
    def setup(self, stage: str) -> None:
        datamodule = getattr(self.trainer, "datamodule", None) if self._trainer else None
        if self.vocabulary is None and datamodule is not None:
            self.set_vocabulary(datamodule.vocabulary)

    def set_vocabulary(self, vocabulary: ParsingVocabulary) -> None:
        found = (vocabulary.source.vocab_size, vocabulary.target.vocab_size)
        expected = (self.hparams.src_vocab_size, self.hparams.tgt_vocab_size)
        if found != expected:
            raise ValueError(
                f"vocabularies of sizes {found} but the model was built for {expected}"
            )
        self.vocabulary = vocabulary

    def stored(self) -> dict[str, Any] | None:
        return None if self.vocabulary is None else {"vocabulary": self.vocabulary.as_dict()}

    def restore(self, entries: dict[str, Any]) -> None:
        self.set_vocabulary(ParsingVocabulary.from_dict(entries["vocabulary"]))

    @classmethod
    def data_entries(cls, datamodule: Any) -> dict[str, Any]:
        return {"vocabulary": datamodule.vocabulary.as_dict()}

    @classmethod
    def source_tokenizer(cls, datamodule: Any) -> bytes | None:
        return datamodule.vocabulary.tokenizer_proto

    # ---- pieces read, words parsed ----------------------------------------------------------
    def encode_source(self, src: Tensor, src_mask: Tensor) -> Memory:
        """The encoder's memory; over a tokeniser's pieces, one annotation per word (its first
        piece's) and the EOS, so the decoder, the constraint and the trees see words."""
        memory = self.encoder(src, src_mask)
        source = self.vocabulary.source if self.vocabulary is not None else None
        if not isinstance(source, SourcePieces):
            return memory
        return first_pieces(memory, source.starts.to(src.device)[src])

    # ---- decoding: only well-formed trees over the input words --------------------------
    def search_constraint(self, memory: Memory) -> BracketConstraint | None:
        if not self.constrained:
            return None
        words = memory.lengths - 1
        return BracketConstraint(self.vocabulary.tokens, words, EOS_ID, len(SPECIALS))

    # ---- evaluation -----------------------------------------------------------------------
    def evaluation_records(
        self, batch: Batch, found: list[list[Hypothesis]], memory: Memory, losses: Losses
    ) -> list[Parsed]:
        written = [self.vocabulary.target.decode(nbest[0].tokens) for nbest in found]
        return [
            Parsed(int(i), loss, tokens, sequence, gold)
            for i, (loss, tokens), sequence, gold in zip(
                batch.index, losses, written, batch.tgt_text
            )
        ]

    def sequence_rewards(
        self, reward: str, batch: Batch, outputs: list[Hypothesis], k: int
    ) -> list[float]:
        """Each output's EVALB F1 against its gold tree, in [0, 1] (`sentence_f1`)."""
        pieces = self.vocabulary.target.pieces
        return [
            sentence_f1(batch.tgt_text[i // k], pieces(h.tokens)) for i, h in enumerate(outputs)
        ]

    def reported(self, scores: dict[str, float]) -> dict[str, float]:
        """All of EVALB's figures, but tagging accuracy only for a model that writes tags."""
        if self.vocabulary.tags:
            return scores
        return {name: value for name, value in scores.items() if name != "tagging_accuracy"}

    def predict_step(self, batch: Batch, batch_idx: int) -> list[tuple[int, str]]:
        """(index in the split, predicted tree on one line) for each sentence of the batch."""
        pieces = self.vocabulary.target.pieces
        return [
            (int(i), to_line(tree_from_output(pieces(nbest[0].tokens), words.split())[0]))
            for i, nbest, words in zip(batch.index, self.predicted(batch), batch.src_text)
        ]
