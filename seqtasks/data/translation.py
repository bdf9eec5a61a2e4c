"""The DataModule for any pair of line-aligned text files (Multi30k, or your own corpus)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch

from seqtasks.data.batch import UNPADDED, Batch, Padding, ParallelDataset, pad, teacher_forcing
from seqtasks.data.module import BucketedData, report_skipped
from seqtasks.data.text import read_parallel
from seqtasks.data.tokenizer import EOS_ID, PAD_ID, SentencePieceTokenizer

log = logging.getLogger(__name__)


@dataclass
class Example:
    src: list[int]
    tgt: list[int]
    src_text: str
    tgt_text: str


def collate(items: list[tuple[int, Example]], padding: Padding = UNPADDED) -> Batch:
    """A padded `Batch`: source + EOS, BOS + target, target + EOS, each side's length padded
    by `padding`."""
    index, examples = zip(*items)
    src = pad([e.src for e in examples], padding, end=EOS_ID)
    tgt_in, tgt_out = teacher_forcing([e.tgt for e in examples], padding)
    return Batch(
        src=src,
        src_mask=src != PAD_ID,
        tgt_in=tgt_in,
        tgt_out=tgt_out,
        index=torch.tensor(index),
        src_text=[e.src_text for e in examples],
        tgt_text=[e.tgt_text for e in examples],
    )


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

    Args:
        data_dir: the folder.
        src_lang, tgt_lang: file suffixes of the two sides.
        train_split, val_split, test_split: file stems of the splits.
        max_tokens: padded tokens per training batch (evaluation uses twice as many).
        max_length: training pairs with a side longer than this (in subwords), like those
            with an empty side, are skipped with a warning that counts them; evaluation
            sources are cut to it with a warning.
        num_workers: DataLoader worker processes.
        seed: seed of the batch order.
        pad_to_multiple, length_buckets: each side of a batch is padded to a multiple of
            `pad_to_multiple`, or to the first of `length_buckets` that holds it (`Padding`):
            few batch shapes, for torch.compile and CUDA graphs on a GPU. 1 and none (the
            default): to the longest sequence only.
        prefetch_factor: batches each worker prepares ahead.
    """

    def __init__(
        self,
        data_dir: str = "data/multi30k",
        src_lang: str = "de",
        tgt_lang: str = "en",
        train_split: str = "train",
        val_split: str = "val",
        test_split: str = "test_2016_flickr",
        max_tokens: int = 4096,
        max_length: int = 100,
        num_workers: int = 0,
        seed: int = 0,
        pad_to_multiple: int = 1,
        length_buckets: tuple[int, ...] = (),
        prefetch_factor: int = 2,
    ):
        super().__init__(
            train_split,
            val_split,
            test_split,
            max_tokens,
            max_length,
            num_workers,
            seed,
            Padding(pad_to_multiple, tuple(length_buckets)),
            prefetch_factor,
        )
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
