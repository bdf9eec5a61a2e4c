"""The DataModule for any pair of line-aligned text files (Multi30k, or your own corpus)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from seqtasks.data.batch import UNPADDED, Batch, Padding, ParallelDataset, padded_batch
from seqtasks.data.module import BucketedData, report_skipped
from seqtasks.data.text import read_parallel
from seqtasks.data.tokenizer import SentencePieceTokenizer

log = logging.getLogger(__name__)


@dataclass
class Example:
    src: list[int]
    tgt: list[int]
    src_text: str
    tgt_text: str


def collate(items: list[tuple[int, Example]], padding: Padding = UNPADDED) -> Batch:
    """The pairs as a `padded_batch`."""
    index, examples = zip(*items)
    sources, targets = [e.src for e in examples], [e.tgt for e in examples]
    texts = [e.src_text for e in examples], [e.tgt_text for e in examples]
    return padded_batch(index, sources, targets, *texts, padding)


def encode_source(tokenizer: SentencePieceTokenizer, text: str, max_length: int) -> list[int]:
    """Source ids, cut to `max_length` tokens with a warning (EOS is added by `collate`)."""
    ids = tokenizer.encode(text)
    if len(ids) > max_length:
        log.warning("source of %d tokens cut to %d: %.60s…", len(ids), max_length, text)
        ids = ids[:max_length]
    return ids


class TranslationData(BucketedData):
    """Line-aligned `{split}.{lang}` files and sentencepiece models `spm.{lang}.model` in one
    folder, as written by `data_prep/multi30k.py` (or by you, for your own corpus).

    The tokenisers are loaded in `__init__`, so the vocabulary sizes are known as soon as the
    module exists (the CLI links them into the model).

    Training pairs with a side longer than `max_length` subwords, like those with an empty
    side, are skipped with a warning that counts them; evaluation sources are cut to it with a
    warning. The settings not listed below are `BucketedData`'s, taken by keyword.

    Args:
        data_dir: the folder.
        src_lang: file suffix of the source side.
        tgt_lang: file suffix of the target side.
        test_split: file stem of the test split.
    """

    def __init__(
        self,
        data_dir: str = "data/multi30k",
        src_lang: str = "de",
        tgt_lang: str = "en",
        test_split: str = "test_2016_flickr",
        **settings: Any,
    ):
        super().__init__(test_split=test_split, **settings)
        self.data_dir = Path(data_dir)
        self.src_lang, self.tgt_lang = src_lang, tgt_lang
        self.src_tokenizer = self._tokenizer(src_lang)
        self.tgt_tokenizer = self._tokenizer(tgt_lang)

    def _tokenizer(self, lang: str) -> SentencePieceTokenizer:
        path = self.data_dir / f"spm.{lang}.model"
        if not path.is_file():
            raise FileNotFoundError(
                f"{path} not found: prepare the data first, e.g. "
                f"`python data_prep/multi30k.py --out {self.data_dir}`"
            )
        return SentencePieceTokenizer.from_file(path)

    @property
    def src_vocab_size(self) -> int:
        return self.src_tokenizer.vocab_size

    @property
    def tgt_vocab_size(self) -> int:
        return self.tgt_tokenizer.vocab_size

    def load_split(self, split: str, train: bool) -> ParallelDataset:
        """Tokenise `split`. Training skips pairs with an empty side or a side over
        `max_length` subwords, with a warning that counts them; evaluation keeps every line
        (sources cut to `max_length` with a warning), so results stay aligned with the files."""
        src_path = self.data_dir / f"{split}.{self.src_lang}"
        tgt_path = self.data_dir / f"{split}.{self.tgt_lang}"
        src_lines, tgt_lines = read_parallel(src_path, tgt_path)
        examples, empty, long = [], 0, 0
        for src_text, tgt_text in zip(src_lines, tgt_lines):
            src_text, tgt_text = src_text.strip(), tgt_text.strip()
            if train:
                src, tgt = self.src_tokenizer.encode(src_text), self.tgt_tokenizer.encode(tgt_text)
                if not src or not tgt:
                    empty += 1
                    continue
                if max(len(src), len(tgt)) > self.max_length:
                    long += 1
                    continue
            else:
                src = encode_source(self.src_tokenizer, src_text, self.max_length)
                tgt = self.tgt_tokenizer.encode(tgt_text)[: self.max_length]
            examples.append(Example(src, tgt, src_text, tgt_text))
        if train:
            reasons = {
                "with an empty side": empty,
                f"with a side over max_length {self.max_length} tokens": long,
            }
            report_skipped(src_path, len(src_lines), "pairs", reasons)
        return ParallelDataset(examples)

    def collate(self, stage: str) -> Callable[[list[tuple[int, Example]]], Batch]:
        return partial(collate, padding=self.padding)
