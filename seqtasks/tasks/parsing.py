"""Constituency parsing as translation (Vinyals et al. 2015, "Grammar as a Foreign Language"):
a sentence in, its tree's bracket sequence out, scored the way EVALB scores."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from nltk import Tree
from torch import Tensor

from seqtasks.data.batch import Batch, pad
from seqtasks.data.batching import TokenBucketSampler
from seqtasks.data.tokenizer import EOS_ID, PAD_ID
from seqtasks.decoders.base import Decoder
from seqtasks.encoders.base import Encoder
from seqtasks.io.checkpoint_files import stored_entries
from seqtasks.layers.memory import Memory
from seqtasks.metrics.split_scores import Parsed, ParseScores
from seqtasks.parsing.constraint import BracketConstraint
from seqtasks.parsing.linearisation import tree_from_output
from seqtasks.parsing.trees import ROOT, to_line
from seqtasks.parsing.vocabulary import SPECIALS, ParsingVocabulary
from seqtasks.search import run_batches
from seqtasks.search.hypothesis import Hypothesis
from seqtasks.tasks.base import EncoderDecoderTask

CHECKPOINT_KEY = "seqtasks"


@dataclass
class Parse:
    """One parse: its tree, the bracket sequence the decoder wrote, its score, and the edits
    that made that sequence well formed (0 when it already was). `alternatives` holds the rest
    of an n-best list, best first."""

    tree: Tree
    tokens: list[str]
    score: float
    repairs: int
    alternatives: list[Parse] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The tree on one line, as the treebank writes it."""
        return to_line(self.tree)


class ParsingTask(EncoderDecoderTask):
    """Parse with any encoder and decoder; validate with EVALB's F1 (`val/f1`).

    Trees are scored as the model writes them (its own tags, or XX) over the gold words, with
    the punctuation EVALB deletes decided by the gold tags (`seqtasks.metrics.parseval`), so
    the brackets score the same whatever the preterminals say. The vocabularies
    come from the DataModule when training starts and are stored in every checkpoint, so
    `ParsingTask.load_from_checkpoint(path)` is all an app needs.

    Args:
        encoder: built as `encoder(src_vocab_size)`.
        decoder: built as `decoder(tgt_vocab_size, encoder.out_dim)`.
        src_vocab_size, tgt_vocab_size: linked from the DataModule by the CLI.
        constrained: search only well-formed bracket sequences (`BracketConstraint`);
            otherwise search freely and repair the output.
        (the rest `EncoderDecoderTask`'s, by keyword; lengths count source words + EOS, and
        the limit never falls below what a bracket around all the words needs)
    """

    Scores = ParseScores

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

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        if self.vocabulary is None:
            raise RuntimeError("cannot save a parsing checkpoint without its vocabularies")
        super().on_save_checkpoint(checkpoint)
        checkpoint[CHECKPOINT_KEY] = {"task": "parsing", "vocabulary": self.vocabulary.as_dict()}

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        (vocabulary,) = stored_entries(checkpoint, "parsing", ("vocabulary",))
        self.set_vocabulary(ParsingVocabulary.from_dict(vocabulary))
        super().on_load_checkpoint(checkpoint)

    # ---- decoding: only well-formed trees over the input words --------------------------
    def search_limits(self, memory: Memory) -> Tensor:
        words = memory.lengths - 1  # the source is words + EOS
        return torch.maximum(super().search_limits(memory), words + 3)  # room for one bracket

    def search_constraint(self, memory: Memory) -> BracketConstraint | None:
        if not self.constrained:
            return None
        words = memory.lengths - 1
        return BracketConstraint(self.vocabulary.tokens, words, EOS_ID, len(SPECIALS))

    def read_output(
        self, hypothesis: Hypothesis, words: Sequence[str], tags: Sequence[str] | None = None
    ) -> Parse:
        """The parse a hypothesis describes over `words`, its preterminals tagged with `tags`
        when given, else with what the model wrote (`XX` or its own tags)."""
        tokens = self.vocabulary.target.pieces(hypothesis.tokens)
        tree, repairs = tree_from_output(tokens, words, tags)
        return Parse(tree, tokens, hypothesis.score, repairs)

    # ---- evaluation -----------------------------------------------------------------------
    def evaluation_records(
        self, batch: Batch, memory: Memory, beam: int, losses: list[tuple[float, int]]
    ) -> list[Parsed]:
        written = [self.vocabulary.target.decode(n[0].tokens) for n in self.search(memory, beam)]
        return [
            Parsed(int(i), loss, tokens, sequence, gold)
            for i, (loss, tokens), sequence, gold in zip(
                batch.index, losses, written, batch.tgt_text
            )
        ]

    def reported(self, scores: dict[str, float]) -> dict[str, float]:
        """All of EVALB's figures, but tagging accuracy only for a model that writes tags."""
        if self.vocabulary.tags:
            return scores
        return {name: value for name, value in scores.items() if name != "tagging_accuracy"}

    def predict_step(self, batch: Batch, batch_idx: int) -> list[tuple[int, str]]:
        """(index in the split, predicted tree on one line) for each sentence of the batch."""
        hypotheses = self.decode(batch.src, batch.src_mask, self.test_beam)
        return [
            (int(i), to_line(self.read_output(nbest[0], words.split()).tree))
            for i, nbest, words in zip(batch.index, hypotheses, batch.src_text)
        ]

    # ---- the API the apps use ---------------------------------------------------------------
    @torch.no_grad()
    def parse(
        self,
        sentences: Sequence[Sequence[str]],
        beam_size: int = 10,
        tags: Sequence[Sequence[str]] | None = None,
        max_tokens: int = 2000,
        max_rows: int = 40000,
        workers: int | None = None,
        n_best: int = 1,
        stop: str | None = None,
    ) -> list[Parse]:
        """Parse tokenised sentences in length-sorted batches of at most `max_tokens` padded
        words and `max_rows` search rows (words × beam); one `Parse` per sentence, in input
        order, with `n_best` − 1 `alternatives`. With `tags` (e.g. gold tags) the preterminals
        carry them; an empty sentence gives `(TOP )`. `stop`: beam search's stopping rule, if
        not the task's `beam_stop`.

        On a CPU, `workers` threads (default: torch's thread count) take the batches in turn,
        each on one core (`run_batches`). The defaults measured fastest on a 2-core CPU, greedy
        and with beam 10 (docs/parsing.md, "Speed"); the output does not depend on them except
        through the batching.
        """
        if self.vocabulary is None:
            raise RuntimeError("the model has no vocabularies: load it from a checkpoint")
        self.eval()
        results = [Parse(Tree(ROOT, []), [], 0.0, 0) for _ in sentences]
        todo = [i for i, words in enumerate(sentences) if words]
        lengths = [len(sentences[i]) + 1 for i in todo]
        budget = max(min(max_tokens, max_rows // beam_size), 1)
        batches = TokenBucketSampler(lengths, budget, shuffle=False).batches

        def parse_batch(chunk: Sequence[int]) -> None:
            rows = [todo[j] for j in chunk]
            src = pad([self.vocabulary.source.encode_words(sentences[i]) + [EOS_ID] for i in rows])
            src = src.to(self.device)
            nbests = self.decode(src, src != PAD_ID, beam_size, n_best, False, stop)
            for i, nbest in zip(rows, nbests):
                best, *others = [self.read_output(h, sentences[i], tags and tags[i]) for h in nbest]
                results[i] = replace(best, alternatives=others)

        run_batches(parse_batch, batches, workers, self.device.type)
        return results
