"""The DataModule for constituency parsing: treebank sentences in, bracket sequences out."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from nltk import Tree

from seqtasks.data.batch import UNPADDED, Batch, Padding, ParallelDataset, padded_batch
from seqtasks.data.module import BucketedData, report_skipped
from seqtasks.parsing.linearisation import linearise
from seqtasks.parsing.trees import read_treebank, to_line
from seqtasks.parsing.vocabulary import ParsingVocabulary


@dataclass
class ParseExample:
    src: list[int]
    tgt: list[int]
    unknown: list[int]  # per source position, the id of the word's unknown-word class
    drop: list[float]  # per source position, the chance of reading the word as its class
    words: str  # the sentence, space separated
    tree: str  # the gold tree on one line


def collate(
    items: list[tuple[int, ParseExample]], word_dropout: bool = False, padding: Padding = UNPADDED
) -> Batch:
    """A padded `Batch`: source words + EOS, BOS + target, target + EOS (each side's length
    padded by `padding`); `src_text` holds the sentence and `tgt_text` the gold tree. With
    `word_dropout`, words are read as their unknown-word class with each word's own
    probability."""
    index, examples = zip(*items)
    sources = [e.src for e in examples]
    if word_dropout:
        sources = [
            [u if random.random() < p else s for s, u, p in zip(e.src, e.unknown, e.drop)]
            for e in examples
        ]
    texts = [e.words for e in examples], [e.tree for e in examples]
    return padded_batch(index, sources, [e.tgt for e in examples], *texts, padding)


class ParsingData(BucketedData):
    """Cleaned trees, one per line, in `{split}.mrg` files of one folder, as written by
    `data_prep/ptb.py`. The vocabularies are built from the training split in `__init__`, so
    their sizes are known as soon as the module exists (the CLI links them into the model).
    The settings not listed below are `BucketedData`'s, taken by keyword.

    Args:
        data_dir: the folder.
        val_split: file stem of the validation split.
        tags: write POS tags instead of `XX` (the model then tags as it parses).
        reverse: feed the words in reverse order.
        min_count: words seen fewer times in training are read as their unknown-word class.
        word_dropout: α; a training word seen c times is read as its class with probability
            α / (α + c) (0 turns word dropout off).
        max_length: training trees whose bracket sequence is longer than this, like trees
            without words, are skipped with a warning that counts them (evaluation keeps
            every tree).
        source_tokenizer: a sentencepiece model file to read the words with, a word's pieces
            at a time, instead of a word vocabulary (the tokeniser of the encoder the parser
            starts from: `data/monolingual/spm.model`; `seqtasks.parsing.pieces`); then
            `min_count` has nothing to do, and `reverse` and `word_dropout` must be off.
    """

    def __init__(
        self,
        data_dir: str = "data/ptb",
        val_split: str = "dev",
        tags: bool = False,
        reverse: bool = False,
        min_count: int = 2,
        word_dropout: float = 0.25,
        max_length: int = 1000,
        source_tokenizer: str | None = None,
        **settings: Any,
    ):
        super().__init__(val_split=val_split, max_length=max_length, **settings)
        if source_tokenizer is not None and word_dropout > 0:
            raise ValueError(
                f"data.init_args.word_dropout {word_dropout} reads rare words as their "
                "unknown-word class, which a source_tokenizer's pieces have not: set it to 0"
            )
        if source_tokenizer is not None and reverse:
            raise ValueError(
                "data.init_args.reverse: a parser that reads a source_tokenizer's pieces reads "
                "them in order (each word's first piece stands for the word)"
            )
        tokenizer = None if source_tokenizer is None else Path(source_tokenizer)
        if tokenizer is not None and not tokenizer.is_file():
            raise FileNotFoundError(f"data.init_args.source_tokenizer {tokenizer} not found")
        self.data_dir = Path(data_dir)
        self.word_dropout = word_dropout
        train_split = self.splits["fit"]
        train, empty, long = self.training_trees(train_split)
        reasons = {
            "without words": empty,
            f"with a bracket sequence over max_length {max_length} tokens": long,
        }
        report_skipped(
            self.data_dir / f"{train_split}.mrg", len(train) + empty + long, "trees", reasons
        )
        self.counts = Counter(w for tree in train for w in tree.leaves())
        proto = None if tokenizer is None else tokenizer.read_bytes()
        self.vocabulary = ParsingVocabulary.build(train, tags, reverse, min_count, proto)

    def read(self, split: str) -> list[Tree]:
        path = self.data_dir / f"{split}.mrg"
        if not path.is_file():
            raise FileNotFoundError(
                f"{path} not found: prepare the treebank first, e.g. `python data_prep/ptb.py "
                f"--out {self.data_dir}` (the shared WSJ sample stops at wsj_0179 and has no "
                "test split: use --data.init_args.test_split dev)"
            )
        return read_treebank(path)

    def training_trees(self, split: str) -> tuple[list[Tree], int, int]:
        """The trees of `split` a model can learn from, and how many were skipped for having
        no words and for a bracket sequence over `max_length` tokens."""
        trees, empty, long = [], 0, 0
        for tree in self.read(split):
            if not tree.leaves():
                empty += 1
            elif len(linearise(tree)) > self.max_length:
                long += 1
            else:
                trees.append(tree)
        return trees, empty, long

    @property
    def src_vocab_size(self) -> int:
        return self.vocabulary.source.vocab_size

    @property
    def tgt_vocab_size(self) -> int:
        return self.vocabulary.target.vocab_size

    def example(self, tree: Tree) -> ParseExample:
        v, words = self.vocabulary, tree.leaves()
        alpha = self.word_dropout
        src = v.source.encode_words(words)
        if v.tokenizer_proto is None:
            drop = [alpha / (alpha + self.counts[w]) if alpha > 0 else 0.0 for w in words]
            unknown = v.source.ordered([v.source.unknown_id(w) for w in words])
            drop = v.source.ordered(drop)
        else:  # pieces: no unknown-word classes to drop words to
            unknown, drop = src, [0.0] * len(src)
        return ParseExample(
            src=src,
            tgt=v.target.encode_tree(tree),
            unknown=unknown,
            drop=drop,
            words=" ".join(words),
            tree=to_line(tree),
        )

    def load_split(self, split: str, train: bool) -> ParallelDataset:
        trees = self.training_trees(split)[0] if train else self.read(split)
        return ParallelDataset([self.example(tree) for tree in trees])

    def collate(self, stage: str) -> Callable[[list[tuple[int, ParseExample]]], Batch]:
        """Padded batches; training ones with word dropout."""
        dropout = stage == "fit" and self.word_dropout > 0
        return partial(collate, word_dropout=dropout, padding=self.padding)
