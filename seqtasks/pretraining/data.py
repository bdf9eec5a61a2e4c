"""The DataModule of pre-training: unlabelled text a sentence a line (documents between empty
lines), as `data_prep/monolingual.py` writes it, corrupted as BERT corrupts its input."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from seqtasks.data.batch import UNPADDED, Padding, ParallelDataset, Travels, pad
from seqtasks.data.module import BucketedData, report_skipped
from seqtasks.data.text import read_lines
from seqtasks.data.tokenizer import EOS_ID, PAD_ID, SentencePieceTokenizer
from seqtasks.pretraining.masking import corrupt


@dataclass
class Sentences:
    """One input: a sentence, or with next-sentence prediction two (A EOS B, the EOS between
    them BERT's [SEP]) and whether B follows A in its document."""

    src: list[int]
    text: str
    is_next: int = -1  # 1: B follows A; 0: B is drawn from another document; -1: no B


@dataclass
class MaskedBatch(Travels):
    """Corrupted inputs + EOS (B, S), their mask, the original pieces at the positions to
    predict and PAD_ID elsewhere (B, S), and per row whether its B follows its A (B,)."""

    src: Tensor
    src_mask: Tensor
    targets: Tensor
    is_next: Tensor
    index: Tensor
    src_text: list[str]

    def __len__(self) -> int:
        return self.src.size(0)


class SentenceDataset(ParallelDataset):
    """`ParallelDataset`'s examples without a target side: what padding costs is the source's."""

    def lengths(self) -> list[int]:
        return [len(e.src) + 1 for e in self.examples]


def collate(
    items: list[tuple[int, Sentences]],
    vocab_size: int,
    rate: float,
    fixed: bool,
    padding: Padding = UNPADDED,
) -> MaskedBatch:
    """A padded `MaskedBatch`, each input `corrupt`ed: afresh for every batch in training
    (dynamic masking, as RoBERTa does), the same in every evaluation (`fixed`: seeded by the
    example's index), so that validations compare."""
    index, examples = zip(*items)
    inputs, targets = [], []
    for i, example in zip(index, examples):
        rng = random.Random(i) if fixed else random
        corrupted, predicted = corrupt(example.src, vocab_size, rng, rate)
        inputs.append(corrupted)
        targets.append(predicted)
    src = pad(inputs, padding, end=EOS_ID)
    return MaskedBatch(
        src,
        src != PAD_ID,
        pad(targets, padding, end=PAD_ID),
        torch.tensor([e.is_next for e in examples]),
        torch.tensor(index),
        [e.text for e in examples],
    )


def documents(path: Path) -> list[list[str]]:
    """A text file's documents: its lines, an empty line between two documents."""
    found: list[list[str]] = [[]]
    for line in read_lines(path):
        if line.strip():
            found[-1].append(line.strip())
        elif found[-1]:
            found.append([])
    return [d for d in found if d]


class MonolingualData(BucketedData):
    """`train.txt`, `val.txt` and `spm.model` in one folder, as `data_prep/monolingual.py`
    writes them. The tokeniser is loaded in `__init__`, so its size is known as soon as the
    module exists (the CLI links it into the model). The settings not listed below are
    `BucketedData`'s, taken by keyword.

    Args:
        data_dir: the folder.
        tokenizer: a sentencepiece model to read with instead of the folder's `spm.model` (the
            tokeniser of the task the encoder is pre-trained for: `data/multi30k/spm.de.model`).
        mask_rate: the share of pieces chosen for prediction (BERT's 15 %).
        next_sentence: pair each sentence A with a B, its successor in the document half the
            time and a sentence of another document otherwise (BERT's next-sentence prediction).
        max_length: training inputs over this many pieces are skipped, with a warning that
            counts them (evaluation inputs are cut to it).
    """

    def __init__(
        self,
        data_dir: str = "data/monolingual",
        tokenizer: str | None = None,
        mask_rate: float = 0.15,
        next_sentence: bool = False,
        max_length: int = 128,
        **settings: Any,
    ):
        super().__init__(max_length=max_length, **settings)
        if not 0 < mask_rate < 1:
            raise ValueError(f"mask_rate must be between 0 and 1, got {mask_rate}")
        self.data_dir = Path(data_dir)
        self.mask_rate, self.next_sentence = mask_rate, next_sentence
        path = Path(tokenizer) if tokenizer else self.data_dir / "spm.model"
        if not path.is_file():
            raise FileNotFoundError(
                f"{path} not found: prepare the text first, e.g. "
                f"`python data_prep/monolingual.py --out {self.data_dir}`"
            )
        self.src_tokenizer = SentencePieceTokenizer.from_file(path)

    @property
    def src_vocab_size(self) -> int:
        return self.src_tokenizer.vocab_size

    def load_split(self, split: str, train: bool) -> SentenceDataset:
        """Tokenise `split`'s sentences (or, with `next_sentence`, its pairs, drawn once from
        the module's seed); training skips inputs over `max_length` pieces, with a warning."""
        path = self.data_dir / f"{split}.txt"
        if not path.is_file():
            raise FileNotFoundError(
                f"{path} not found: `python data_prep/monolingual.py --out {self.data_dir}` "
                "writes train.txt and val.txt"
            )
        text = documents(path)
        encoded = [[self.src_tokenizer.encode(s) for s in d] for d in text]
        if self.next_sentence:
            examples = self._pairs(encoded, text)
        else:
            examples = [Sentences(ids, t) for e, d in zip(encoded, text) for ids, t in zip(e, d)]
        examples = [e for e in examples if e.src]
        if not train:
            for e in examples:
                e.src = e.src[: self.max_length]
            return SentenceDataset(examples)
        kept = [e for e in examples if len(e.src) <= self.max_length]
        reasons = {f"over max_length {self.max_length} pieces": len(examples) - len(kept)}
        report_skipped(path, len(examples), "inputs", reasons)
        return SentenceDataset(kept)

    def _pairs(self, encoded: list[list[list[int]]], text: list[list[str]]) -> list[Sentences]:
        """Each sentence that has a successor in its document as A, with its successor as B
        or, half the time, a sentence of another document (BERT's sampling, from `seed`)."""
        rng = random.Random(self.seed)
        every = [(d, s) for d, document in enumerate(encoded) for s in range(len(document))]
        pairs = []
        for d, document in enumerate(encoded):
            for s in range(len(document) - 1):
                is_next = len(encoded) < 2 or rng.random() < 0.5
                other = (d, s + 1)
                while not is_next and other[0] == d:
                    other = rng.choice(every)
                b, b_text = encoded[other[0]][other[1]], text[other[0]][other[1]]
                pairs.append(
                    Sentences(
                        document[s] + [EOS_ID] + b, f"{text[d][s]} ||| {b_text}", int(is_next)
                    )
                )
        return pairs

    def collate(self, stage: str) -> Callable[[list[tuple[int, Sentences]]], MaskedBatch]:
        """Batches corrupted afresh in training, the same way in every evaluation."""
        return partial(
            collate,
            vocab_size=self.src_vocab_size,
            rate=self.mask_rate,
            fixed=stage != "fit",
            padding=self.padding,
        )
