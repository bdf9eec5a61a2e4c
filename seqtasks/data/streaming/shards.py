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

import gzip
import hashlib
import json
import os
import re
from collections.abc import Iterator
from itertools import chain, compress, islice
from pathlib import Path

import numpy as np
from torch.utils.data import Dataset

from seqtasks.data.tokenizer import SentencePieceTokenizer
from seqtasks.data.translation import Example
from seqtasks.io.files import open_atomic, write_atomic

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


# ---- reading text a block at a time ---------------------------------------------------------
def stream_lines(path: Path, block_size: int = 1 << 24) -> Iterator[str]:
    """The lines of a UTF-8 text file (gzipped if it ends in .gz), read `block_size` bytes at a
    time; lines end and errors read as in `seqtasks.data.text.read_lines`.

    Raises:
        FileNotFoundError: naming the path.
        ValueError: for invalid UTF-8, naming the file and the line.
    """
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    opener = gzip.open if path.suffix == ".gz" else open
    number = 0
    with opener(path, "rb") as f:
        while block := f.read(block_size):
            block += f.readline()  # end on "\n", so no line break is split between blocks
            for line in block.splitlines():
                number += 1
                try:
                    yield line.decode("utf-8")
                except UnicodeDecodeError as error:
                    raise ValueError(
                        f"{path}:{number}: invalid UTF-8 at byte {error.start} of the line"
                    ) from None


def stream_pairs(
    src_path: Path, tgt_path: Path, chunk: int
) -> Iterator[tuple[list[str], list[str]]]:
    """Aligned chunks of up to `chunk` lines of two files; rejects files whose line counts
    differ, naming both (the rest of the longer file is counted for the message)."""
    src, tgt = stream_lines(src_path), stream_lines(tgt_path)
    done = 0
    while True:
        src_lines, tgt_lines = list(islice(src, chunk)), list(islice(tgt, chunk))
        if len(src_lines) != len(tgt_lines):
            src_count = done + len(src_lines) + sum(1 for _ in src)
            tgt_count = done + len(tgt_lines) + sum(1 for _ in tgt)
            raise ValueError(
                f"misaligned parallel files: {src_path} has {src_count} lines but {tgt_path} "
                f"has {tgt_count}"
            )
        if not src_lines:
            return
        done += len(src_lines)
        yield src_lines, tgt_lines


# ---- writing -------------------------------------------------------------------------------
def save_atomic(path: Path, array: np.ndarray) -> None:
    """`np.save` through `open_atomic`: `path` appears only once complete."""
    with open_atomic(path) as f:
        np.save(f, array)


class _ShardWriter:
    """Collects tokenised pairs and writes every `shard_size` of them as one shard."""

    def __init__(self, out: Path, shard_size: int):
        self.out, self.shard_size = out, shard_size
        self.pending: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self.pending_pairs = 0
        self.shards: list[dict] = []

    def add(self, src: np.ndarray, src_len: np.ndarray, tgt: np.ndarray, tgt_len: np.ndarray):
        """Pairs as flat token arrays and (pairs,) lengths; writes the shards they complete."""
        self.pending.append((src, src_len, tgt, tgt_len))
        self.pending_pairs += len(src_len)
        while self.pending_pairs >= self.shard_size:
            self._write(self.shard_size)

    def close(self) -> list[dict]:
        if self.pending_pairs:
            self._write(self.pending_pairs)
        return self.shards

    def _write(self, pairs: int) -> None:
        src, src_len, tgt, tgt_len = (np.concatenate(a) for a in zip(*self.pending))
        src_off = np.concatenate([[0], np.cumsum(src_len)])  # (pending + 1,)
        tgt_off = np.concatenate([[0], np.cumsum(tgt_len)])
        name = f"{len(self.shards):05d}"
        index = np.stack([src_off[:pairs], src_len[:pairs], tgt_off[:pairs], tgt_len[:pairs]], 1)
        save_atomic(self.out / f"{name}.src.npy", src[: src_off[pairs]])
        save_atomic(self.out / f"{name}.tgt.npy", tgt[: tgt_off[pairs]])
        save_atomic(self.out / f"{name}.index.npy", index.astype(np.int64))
        self.shards.append(
            {
                "name": name,
                "pairs": pairs,
                "src_tokens": int(src_off[pairs]),
                "tgt_tokens": int(tgt_off[pairs]),
            }
        )
        rest = (src[src_off[pairs] :], src_len[pairs:], tgt[tgt_off[pairs] :], tgt_len[pairs:])
        self.pending = [rest] if len(rest[1]) else []
        self.pending_pairs = len(rest[1])


def _encode(
    tokenizer: SentencePieceTokenizer, lines: list[str], threads: int
) -> tuple[list[list[int]], np.ndarray]:
    """Stripped lines -> (ids per line, (lines,) lengths)."""
    ids = tokenizer.sp.encode([line.strip() for line in lines], num_threads=threads)
    return ids, np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))


def _flatten(
    ids: list[list[int]], lengths: np.ndarray, keep: np.ndarray, dtype: np.dtype
) -> tuple[np.ndarray, np.ndarray]:
    """The kept lines' ids end to end, and their (kept,) lengths."""
    kept = lengths[keep]
    return np.fromiter(chain.from_iterable(compress(ids, keep)), dtype, int(kept.sum())), kept


def write_shards(
    src_path: Path,
    tgt_path: Path,
    tokenizers: tuple[SentencePieceTokenizer, SentencePieceTokenizer],
    langs: tuple[str, str],
    out: Path,
    shard_size: int = 1_000_000,
    max_length: int = 100,
    threads: int = 1,
    chunk: int = 20_000,
) -> dict:
    """Tokenise two line-aligned files into shards of `shard_size` pairs in `out`, reading
    `chunk` lines at a time (each side encoded by sentencepiece on `threads` threads), and
    return the manifest.

    The old manifest is removed first and the new one written last, so a folder is usable only
    once complete; each file is written to a temporary name and renamed. Shards of an earlier
    preparation that the new manifest does not name are deleted.
    """
    if shard_size < 1 or max_length < 1:
        raise ValueError(
            f"need shard_size >= 1 and max_length >= 1, got {shard_size}, {max_length}"
        )
    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST).unlink(missing_ok=True)
    dtypes = tuple(token_dtype(t.vocab_size) for t in tokenizers)
    writer = _ShardWriter(out, shard_size)
    lines = empty = too_long = 0
    for src_lines, tgt_lines in stream_pairs(src_path, tgt_path, chunk):
        (src, src_len), (tgt, tgt_len) = (
            _encode(t, side, threads) for t, side in zip(tokenizers, (src_lines, tgt_lines))
        )
        is_empty = (src_len == 0) | (tgt_len == 0)
        is_long = ~is_empty & (np.maximum(src_len, tgt_len) > max_length)
        keep = ~(is_empty | is_long)  # (chunk,)
        lines += len(src_lines)
        empty += int(is_empty.sum())
        too_long += int(is_long.sum())
        writer.add(
            *_flatten(src, src_len, keep, dtypes[0]), *_flatten(tgt, tgt_len, keep, dtypes[1])
        )
    shards = writer.close()
    manifest = {
        "format": FORMAT,
        "sources": [str(src_path), str(tgt_path)],
        "langs": dict(zip(SIDES, langs)),
        "tokenizers": {
            side: {"sha256": digest(t), "vocab_size": t.vocab_size, "dtype": dtype.name}
            for side, t, dtype in zip(SIDES, tokenizers, dtypes)
        },
        "max_length": max_length,
        "lines": lines,
        "pairs": sum(s["pairs"] for s in shards),
        "skipped_empty": empty,
        "skipped_too_long": too_long,
        "shards": shards,
    }
    write_atomic(out / MANIFEST, json.dumps(manifest, indent=1) + "\n")
    named = {f"{s['name']}.{part}.npy" for s in shards for part in ("src", "tgt", "index")}
    for path in out.iterdir():
        if SHARD_FILE.fullmatch(path.name) and path.name not in named:
            path.unlink()
    return manifest


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
