"""The translation DataModule for corpora larger than memory: training from binary shards."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from seqtasks.translation.data import TranslationData
from seqtasks.translation.streaming.shards import (
    MANIFEST,
    SIDES,
    ShardedPairs,
    digest,
    read_manifest,
)

log = logging.getLogger(__name__)


class ShardedTranslationData(TranslationData):
    """`TranslationData` that trains from shards written by `data_prep/shards.py`.

    Training pairs are read from `shard_dir` as batches ask for them: memory holds no tokens,
    only each pair's length and place in a batch (12 bytes a pair). Validation and test read
    the `{split}.{lang}` files of `data_dir` as `TranslationData` does (they are small, and
    BLEU needs their references). The sentencepiece models are `data_dir`'s, and must be the
    ones the shards were written with. The other settings are `TranslationData`'s, by keyword:
    `max_length` at most the limit the shards were written with, a lower one leaving out the
    longer pairs; `train_split` unused.

    Args:
        shard_dir: the shard folder (default `data_dir`/shards).
    """

    def __init__(
        self, data_dir: str = "data/multi30k", shard_dir: str | None = None, **translation: Any
    ):
        super().__init__(data_dir, **translation)
        self.shard_dir = Path(shard_dir) if shard_dir is not None else self.data_dir / "shards"

    def check_manifest(self) -> dict:
        """The shards' manifest, after checking it was written for this module's languages,
        sentencepiece models and a length limit no lower than `max_length`."""
        manifest = read_manifest(self.shard_dir)
        where = self.shard_dir / MANIFEST
        langs = (self.src_lang, self.tgt_lang)
        if tuple(manifest["langs"][side] for side in SIDES) != langs:
            raise ValueError(
                f"{where}: shards are {manifest['langs']}, not {dict(zip(SIDES, langs))}"
            )
        for side, lang, tokenizer in zip(SIDES, langs, (self.src_tokenizer, self.tgt_tokenizer)):
            written = manifest["tokenizers"][side]["sha256"]
            if written != digest(tokenizer):
                raise ValueError(
                    f"{where}: the shards were tokenised with another {side} sentencepiece model "
                    f"(sha256 {written[:12]}…) than {self.data_dir / f'spm.{lang}.model'} "
                    f"(sha256 {digest(tokenizer)[:12]}…): prepare them again with this one"
                )
        if self.max_length > manifest["max_length"]:
            raise ValueError(
                f"{where}: shards hold pairs of up to {manifest['max_length']} subwords, fewer "
                f"than max_length {self.max_length}: prepare them again with --max-length "
                f"{self.max_length}"
            )
        return manifest

    def setup(self, stage: str) -> None:
        if stage == "fit" and "fit" not in self.datasets:
            manifest = self.check_manifest()
            self.datasets["fit"] = ShardedPairs(self.shard_dir, manifest, self.max_length)
            log.info(
                "%s: %d training pairs in %d shards (of %d lines, %d empty and %d over-long "
                "skipped when written)",
                self.shard_dir,
                len(self.datasets["fit"]),
                len(manifest["shards"]),
                manifest["lines"],
                manifest["skipped_empty"],
                manifest["skipped_too_long"],
            )
        super().setup(stage)
