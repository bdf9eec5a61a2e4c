"""Writing shards: a parallel corpus streamed from its text files, tokenised in parallel, and
written shard by shard (each file atomically, the manifest last). The format is in
`seqtasks.translation.streaming.shards`.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from itertools import chain, compress, islice
from pathlib import Path

import numpy as np

from seqtasks.data.tokenizer import SentencePieceTokenizer
from seqtasks.io.files import open_atomic, write_atomic
from seqtasks.io.preparation import Preparation
from seqtasks.translation.streaming.shards import (
    FORMAT,
    MANIFEST,
    SHARD_FILE,
    SIDES,
    digest,
    token_dtype,
)


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
    `chunk` lines at a time (each side encoded by sentencepiece on `threads` threads), saying on
    stderr how far it has got (`Preparation`), and return the manifest.

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
    start = f"tokenising {src_path} and {tgt_path} into {out}"
    with Preparation("shards", start, unit="lines") as preparation:
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
            preparation.advance(len(src_lines))
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
