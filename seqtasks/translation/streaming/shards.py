"""Binary token shards: a parallel corpus tokenised once, streamed from its text files into
binary arrays that training reads pair by pair without holding the corpus in memory.

A shard folder holds `manifest.json` and, per shard k, three `.npy` arrays:

    {k:05d}.src.npy     (source tokens,) the ids of its pairs, end to end, no BOS/EOS
    {k:05d}.tgt.npy     (target tokens,) likewise
    {k:05d}.index.npy   (pairs, 4) int64: source offset, source length, target offset, length

Token arrays have the smallest unsigned dtype that holds the vocabulary (uint16 up to 65,536
pieces). The manifest records the languages, each sentencepiece model's SHA-256 (shards are
refused by a DataModule whose models differ), the length limit, and the counts. Pairs are
filtered as `TranslationData` filters its training split: lines are stripped, and a pair with
an empty side or a side over `max_length` subwords is skipped (and counted).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import numpy as np
from torch.utils.data import Dataset

from seqtasks.data.tokenizer import SentencePieceTokenizer
from seqtasks.translation.data import Example

FORMAT = "seqtasks-shards-1"


MANIFEST = "manifest.json"


SHARD_FILE = re.compile(r"\d{5}\.(src|tgt|index)\.npy")


SIDES = ("src", "tgt")


def digest(tokenizer: SentencePieceTokenizer) -> str:
    """SHA-256 of a sentencepiece model: what the manifest checks a DataModule's models by."""
    return hashlib.sha256(tokenizer.proto).hexdigest()


def token_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned integer type that holds ids below `vocab_size`."""
    for dtype in (np.uint8, np.uint16, np.uint32):
        if vocab_size <= np.iinfo(dtype).max + 1:
            return np.dtype(dtype)
    raise ValueError(f"vocabulary of {vocab_size} pieces does not fit 32-bit ids")


# ---- reading -------------------------------------------------------------------------------
def read_manifest(folder: Path) -> dict:
    """The manifest of a shard folder, with an error that says how to make one."""
    path = folder / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} not found: prepare the shards first (`python data_prep/shards.py --out "
            f"{folder} …`); a folder without one is incomplete"
        )
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path} is not valid JSON: {error}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ValueError(f"{path} is not a {FORMAT} manifest")
    return manifest


class ArrayFile:
    """A C-ordered `.npy` array whose rows are read with `os.pread`, never mapped: the bytes
    pass through the kernel's page cache (shared, reclaimable) into a short-lived buffer, so
    no page of the corpus counts in the process's resident memory, however much of it an
    epoch has touched. (A memory map would leave every touched page resident: a random-order
    epoch over 2 million pairs touched all 177 MiB of them within its first 500 batches.)
    The file is opened on the first read in each process, so DataLoader workers open their
    own."""

    def __init__(self, path: Path):
        self.path = path
        with path.open("rb") as f:
            version = np.lib.format.read_magic(f)
            read_header = (
                np.lib.format.read_array_header_1_0
                if version == (1, 0)
                else np.lib.format.read_array_header_2_0
            )
            shape, fortran_order, dtype = read_header(f)
            self.offset = f.tell()
        if fortran_order or not shape:
            raise ValueError(f"{path}: not a C-ordered array of rows")
        self.shape, self.dtype = shape, dtype
        self.row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize
        self._fd: int | None = None

    def __len__(self) -> int:
        return self.shape[0]

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_fd": None}

    def __del__(self) -> None:
        if getattr(self, "_fd", None) is not None:
            os.close(self._fd)

    def rows(self, start: int, stop: int) -> np.ndarray:
        """Rows start:stop (0 ≤ start ≤ stop ≤ len), read from the file."""
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY)
        size = (stop - start) * self.row_bytes
        data = os.pread(self._fd, size, self.offset + start * self.row_bytes)
        if len(data) != size:
            raise ValueError(f"{self.path}: rows {start}:{stop} lie past its end (truncated?)")
        return np.frombuffer(data, self.dtype).reshape(stop - start, *self.shape[1:])


class ShardedPairs(Dataset):
    """Training pairs read from the shard files, as (position, `Example`) items like
    `ParallelDataset`'s; the texts are empty (training reads only ids). Pairs with a side over
    `max_length` are left out, for a limit below the one the shards were written with.

    Memory holds each pair's length (4 bytes; the token-bucket sampler needs them all) and
    nothing else per pair: the index rows and tokens of a pair are read from the files
    (`ArrayFile`) when it is asked for, three small reads.
    """

    CHUNK = 1 << 20  # index rows read at a time while collecting the lengths

    def __init__(self, folder: Path, manifest: dict, max_length: int):
        self.starts = np.cumsum([0] + [s["pairs"] for s in manifest["shards"]])  # (shards + 1,)
        self.files = [
            tuple(ArrayFile(folder / f"{s['name']}.{part}.npy") for part in ("src", "tgt", "index"))
            for s in manifest["shards"]
        ]
        longest = []
        for shard, (src, tgt, index) in zip(manifest["shards"], self.files):
            found = (len(index), len(src), len(tgt))
            expected = (shard["pairs"], shard["src_tokens"], shard["tgt_tokens"])
            if found != expected or index.shape[1:] != (4,):
                raise ValueError(
                    f"{folder}: shard {shard['name']} holds (pairs, source tokens, target tokens)"
                    f" {found} but {MANIFEST} says {expected}: prepare the shards again"
                )
            for start in range(0, len(index), self.CHUNK):
                rows = index.rows(start, min(start + self.CHUNK, len(index)))  # (chunk, 4)
                longest.append(np.maximum(rows[:, 1], rows[:, 3]).astype(np.int32))
        longest = np.concatenate(longest) if longest else np.zeros(0, np.int32)  # (pairs,)
        self.keep = (
            np.flatnonzero(longest <= max_length) if longest.max(initial=0) > max_length else None
        )
        self._lengths = (longest if self.keep is None else longest[self.keep]) + 1

    def __len__(self) -> int:
        return len(self._lengths)

    def __getitem__(self, i: int) -> tuple[int, Example]:
        pair = i if self.keep is None else int(self.keep[i])
        k = int(np.searchsorted(self.starts, pair, side="right")) - 1
        src, tgt, index = self.files[k]
        row = pair - int(self.starts[k])
        src_off, src_len, tgt_off, tgt_len = index.rows(row, row + 1)[0].tolist()
        return i, Example(
            src.rows(src_off, src_off + src_len).tolist(),
            tgt.rows(tgt_off, tgt_off + tgt_len).tolist(),
            "",
            "",
        )

    def lengths(self) -> np.ndarray:
        """(pairs,) the longer side in tokens including BOS/EOS, as `ParallelDataset.lengths`."""
        return self._lengths
