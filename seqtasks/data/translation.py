"""The DataModule for any pair of line-aligned text files (Multi30k, or your own corpus)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import lightning as L
import torch
from torch.utils.data import DataLoader

from seqtasks.data.batch import Batch, ParallelDataset, pad
from seqtasks.data.batching import bucketed_loader
from seqtasks.data.text import read_parallel
from seqtasks.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, SentencePieceTokenizer

log = logging.getLogger(__name__)


@dataclass
class Example:
    src: list[int]
    tgt: list[int]
    src_text: str
    tgt_text: str


def collate(items: list[tuple[int, Example]]) -> Batch:
    index, examples = zip(*items)
    src = pad([e.src + [EOS_ID] for e in examples])
    return Batch(
        src=src,
        src_mask=src != PAD_ID,
        tgt_in=pad([[BOS_ID] + e.tgt for e in examples]),
        tgt_out=pad([e.tgt + [EOS_ID] for e in examples]),
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


class TranslationData(L.LightningDataModule):
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
    ):
        super().__init__()
        self.data_dir = Path(data_dir)
        self.src_lang, self.tgt_lang = src_lang, tgt_lang
        self.splits = {
            "fit": train_split,
            "validate": val_split,
            "test": test_split,
            "predict": test_split,
        }
        self.max_tokens, self.max_length = max_tokens, max_length
        self.num_workers, self.seed = num_workers, seed
        self.src_tokenizer = self._tokenizer(src_lang)
        self.tgt_tokenizer = self._tokenizer(tgt_lang)
        self.datasets: dict[str, ParallelDataset] = {}

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
        if empty or long:
            log.warning(
                "%s: skipped %d of %d training pairs: %d with an empty side, %d with a side over "
                "max_length %d tokens",
                src_path,
                empty + long,
                len(src_lines),
                empty,
                long,
                self.max_length,
            )
        return ParallelDataset(examples)

    def setup(self, stage: str) -> None:
        needed = {
            "fit": ["fit", "validate"],
            "validate": ["validate"],
            "test": ["test"],
            "predict": ["predict"],
        }
        for name in needed.get(stage, []):
            if name not in self.datasets:
                self.datasets[name] = self.load_split(self.splits[name], train=name == "fit")

    def _loader(self, name: str, train: bool) -> DataLoader:
        dataset = self.datasets[name]
        return bucketed_loader(
            dataset,
            dataset.lengths(),
            self.max_tokens,
            train,
            self.seed,
            collate,
            self.num_workers,
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader("fit", train=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("validate", train=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", train=False)

    def predict_dataloader(self) -> DataLoader:
        """The test split's sources (`seqtasks predict`; see `callbacks.TranslationWriter`)."""
        return self._loader("predict", train=False)
