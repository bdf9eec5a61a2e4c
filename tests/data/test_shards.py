"""Binary shards and ShardedTranslationData: the same ids and batches as TranslationData, atomic
writes, streamed text with the errors of `read_lines`, and refusals of mismatched shards."""

from __future__ import annotations

import functools
import gzip
import json
import pickle
import subprocess
import sys
from pathlib import Path

import lightning as L
import numpy as np
import pytest
import torch
from conftest import REPO, subprocess_env, write_toy_corpus

import seqtasks.translation.streaming.shards as shards
from seqtasks.data.text import read_lines
from seqtasks.data.tokenizer import train_sentencepiece
from seqtasks.decoders import LuongDecoder
from seqtasks.encoders import RNNEncoder
from seqtasks.translation.data import TranslationData
from seqtasks.translation.streaming.sharded_translation import ShardedTranslationData
from seqtasks.translation.streaming.shards import MANIFEST
from seqtasks.translation.streaming.write import stream_lines, write_shards
from seqtasks.translation.task import TranslationTask

LANGS = ("de", "en")


@pytest.fixture(scope="module")
def corpus(multi30k_lines, toy_tokenizers, tmp_path_factory) -> Path:
    """206 training lines: 200 Multi30k pairs, 4 with an empty or whitespace-only side and 2
    with a side of ~200 pieces; 20 validation pairs."""
    de, en = multi30k_lines["de"], multi30k_lines["en"]
    long_de, long_en = " ".join(de[:8]), " ".join(en[:8])
    train = (
        de[:100] + ["", "Ein Hund.", "  ", long_de, "\t"] + de[100:200] + [long_de],
        en[:100] + ["", "", "A dog.", long_en, "A cat."] + en[100:200] + ["short"],
    )
    val = (de[300:320], en[300:320])
    return write_toy_corpus(
        tmp_path_factory.mktemp("corpus"),
        toy_tokenizers,
        {"train": train, "val": val, "test_2016_flickr": val},
    )


def shard(folder: Path, out: Path, tokenizers, **kwargs) -> dict:
    """`write_shards` of `folder`'s training split into `out`."""
    paths = [folder / f"train.{lang}" for lang in LANGS]
    return write_shards(*paths, tokenizers=tokenizers, langs=LANGS, out=out, **kwargs)


@pytest.fixture(scope="module")
def shard_dir(corpus, toy_tokenizers, tmp_path_factory) -> Path:
    """The corpus in shards of 37 pairs (the last holds the remaining 15), read 16 lines at a
    time, so chunks and shards end in different places."""
    out = tmp_path_factory.mktemp("shards")
    shard(corpus, out, toy_tokenizers, shard_size=37, chunk=16)
    return out


def test_manifest_counts_what_was_skipped(shard_dir, toy_tokenizers):
    manifest = json.loads((shard_dir / MANIFEST).read_text())
    assert (manifest["lines"], manifest["pairs"]) == (206, 200)
    assert (manifest["skipped_empty"], manifest["skipped_too_long"]) == (4, 2)
    assert [s["pairs"] for s in manifest["shards"]] == [37] * 5 + [15]
    assert manifest["tokenizers"]["src"]["vocab_size"] == toy_tokenizers[0].vocab_size
    assert np.load(shard_dir / "00000.src.npy").dtype == np.uint8, "250 pieces fit a byte"
    assert np.load(shard_dir / "00005.index.npy").shape == (15, 4)


@pytest.mark.parametrize("max_length", [100, 30])
def test_shards_give_the_ids_and_batches_of_translation_data(corpus, shard_dir, max_length):
    """With the limit the shards were written with, and a lower one that leaves out more pairs
    when they are read."""
    memory = TranslationData(str(corpus), max_tokens=300, max_length=max_length, seed=3)
    streamed = ShardedTranslationData(
        str(corpus), str(shard_dir), max_tokens=300, max_length=max_length, seed=3
    )
    for data in (memory, streamed):
        data.setup("fit")
    kept, pairs = memory.datasets["fit"], streamed.datasets["fit"]
    assert len(pairs) == len(kept)
    assert (len(kept) == 200) == (max_length == 100) and len(kept) > 20
    for i, example in enumerate(kept.examples):
        index, read = pairs[i]
        assert index == i
        assert (read.src, read.tgt) == (example.src, example.tgt)
    assert pairs.lengths().tolist() == kept.lengths()

    for epoch in (0, 1):
        loaders = memory.train_dataloader(), streamed.train_dataloader()
        for loader in loaders:
            loader.batch_sampler.set_epoch(epoch)
        batches = list(zip(*loaders, strict=True))
        assert len(batches) > 2
        for a, b in batches:
            for field in ("src", "src_mask", "tgt_in", "tgt_out", "index"):
                assert torch.equal(getattr(a, field), getattr(b, field)), field

    # Validation is read from the text files, references included, as by TranslationData.
    assert streamed.datasets["validate"].examples == memory.datasets["validate"].examples


def test_dataset_pickles_without_its_arrays(corpus, shard_dir):
    """DataLoader workers started by spawn receive the dataset pickled: they open the files
    themselves instead of receiving copies of the tokens or the parent's file descriptors."""
    data = ShardedTranslationData(str(corpus), str(shard_dir), max_tokens=300)
    data.setup("fit")
    pairs = data.datasets["fit"]
    copy = pickle.loads(pickle.dumps(pairs))
    index_bytes = sum(path.stat().st_size for path in shard_dir.glob("*.index.npy"))
    assert len(pickle.dumps(pairs)) < index_bytes / 2
    assert [copy[i][1].src for i in (0, 199)] == [pairs[i][1].src for i in (0, 199)]
    fresh = pickle.loads(pickle.dumps(pairs))  # of a dataset whose files are open
    assert all(file._fd is None for files in fresh.files for file in files)


def prepare(*args: str) -> subprocess.CompletedProcess:
    """`python data_prep/shards.py ARGS` in a subprocess."""
    return subprocess.run(
        [sys.executable, str(REPO / "data_prep" / "shards.py"), *args],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=120,
    )


@pytest.mark.slow
def test_gzipped_files_through_the_command_line(corpus, shard_dir, tmp_path):
    """data_prep/shards.py reads .gz files and models from another folder and writes the same
    arrays as plain files do."""
    source = tmp_path / "source"
    source.mkdir()
    for lang in LANGS:
        data = (corpus / f"train.{lang}").read_bytes()
        (source / f"train.{lang}.gz").write_bytes(gzip.compress(data))
    out = tmp_path / "out"
    result = prepare(
        *("--source", str(source), "--models", str(corpus), "--out", str(out)),
        *("--shard-size", "37", "--threads", "2"),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = "206 lines: 200 pairs in 6 shards; skipped 4 with an empty side and 2 over 100"
    assert summary in result.stdout
    for path in shard_dir.glob("*.npy"):
        assert np.array_equal(np.load(path), np.load(out / path.name)), path.name


@pytest.mark.slow
def test_a_missing_source_file_is_named(tmp_path):
    result = prepare("--source", str(tmp_path))
    assert result.returncode != 0
    assert f"error: neither {tmp_path / 'train.de'} nor {tmp_path / 'train.de'}.gz" in result.stderr


# ---- streaming text ----------------------------------------------------------------------------

# Every line end, a form feed and U+2028 that end no line, no final line end.
TRICKY = b"one\r\ntwo\rthree\n\nfive \xc3\xa4\x0c\xe2\x80\xa8\n\r\nseven"
TRICKY_LINES = ["one", "two", "three", "", "five \u00e4\x0c\u2028", "", "seven"]


@pytest.mark.parametrize("block_size", [1, 3, 4, 1 << 20])
def test_stream_lines_reads_as_read_lines(tmp_path, block_size):
    """Blocks end on "\\n", so no "\\r\\n" is split and the lines are those of `read_lines`."""
    for name, data in (("plain.txt", TRICKY), ("packed.txt.gz", gzip.compress(TRICKY))):
        path = tmp_path / name
        path.write_bytes(data)
        assert list(stream_lines(path, block_size)) == read_lines(path) == TRICKY_LINES


def test_invalid_utf8_is_named_by_file_and_line(corpus, toy_tokenizers, tmp_path):
    lines = (corpus / "train.de").read_bytes().splitlines(keepends=True)
    bad = tmp_path / "bad"
    write_toy_corpus(bad, toy_tokenizers, {})
    (bad / "train.de").write_bytes(b"".join(lines[:150] + [b"Ein \xff Hund\n"] + lines[151:]))
    (bad / "train.en").write_bytes((corpus / "train.en").read_bytes())
    with pytest.raises(ValueError, match=rf"{bad / 'train.de'}:151: invalid UTF-8 at byte 4"):
        shard(bad, tmp_path / "out", toy_tokenizers, chunk=16)
    assert not (tmp_path / "out" / MANIFEST).exists()


@pytest.mark.parametrize("extra", [1, 40])
def test_misaligned_files_are_named_with_both_counts(corpus, toy_tokenizers, tmp_path, extra):
    """Found when the shorter file ends, after 206 lines; the longer one is counted to its end."""
    folder = tmp_path / "misaligned"
    write_toy_corpus(folder, toy_tokenizers, {})
    (folder / "train.de").write_bytes((corpus / "train.de").read_bytes())
    en = (corpus / "train.en").read_text(encoding="utf-8")
    (folder / "train.en").write_text(en + "More.\n" * extra, encoding="utf-8")
    message = (
        f"misaligned parallel files: {folder / 'train.de'} has 206 lines but "
        f"{folder / 'train.en'} has {206 + extra}"
    )
    with pytest.raises(ValueError, match=message):
        shard(folder, tmp_path / "out", toy_tokenizers, chunk=16)


# ---- atomic writes -----------------------------------------------------------------------------


def test_an_interrupted_preparation_leaves_no_usable_folder(
    corpus, toy_tokenizers, tmp_path, monkeypatch
):
    """Re-preparing a complete folder and failing at the third shard: the old manifest is gone
    (the DataModule says to prepare the shards), every file present is whole, no temporary
    file is left; preparing again with larger shards deletes the shards it does not name."""
    out = tmp_path / "shards"
    shard(corpus, out, toy_tokenizers, shard_size=37)
    saved = {path.name: np.load(path) for path in out.glob("*.npy")}
    real_save = np.save

    def fail_at_shard_2(file, array):  # `file`: the open temporary file
        if Path(file.name).name.startswith(".00002"):
            file.write(b"half a file")
            raise OSError("disk full")
        real_save(file, array)

    monkeypatch.setattr(shards.np, "save", fail_at_shard_2)
    with pytest.raises(OSError, match="disk full"):
        shard(corpus, out, toy_tokenizers, shard_size=37)
    monkeypatch.undo()
    assert not (out / MANIFEST).exists()
    assert sorted(path.name for path in out.iterdir()) == sorted(saved)
    for name, array in saved.items():
        assert np.array_equal(np.load(out / name), array), name
    data = ShardedTranslationData(str(corpus), str(out))
    with pytest.raises(FileNotFoundError, match=r"manifest.json not found: prepare the shards"):
        data.setup("fit")

    shard(corpus, out, toy_tokenizers, shard_size=100)
    assert sorted(path.name for path in out.glob("*.npy")) == [
        f"0000{k}.{part}.npy" for k in (0, 1) for part in ("index", "src", "tgt")
    ]


def test_a_shard_that_disagrees_with_the_manifest_is_refused(corpus, toy_tokenizers, tmp_path):
    out = tmp_path / "shards"
    shard(corpus, out, toy_tokenizers, shard_size=37)
    np.save(out / "00003.tgt.npy", np.load(out / "00003.tgt.npy")[:-1])
    with pytest.raises(ValueError, match=rf"{out}: shard 00003 holds .* but manifest.json says"):
        ShardedTranslationData(str(corpus), str(out)).setup("fit")


def test_a_truncated_shard_file_is_named_when_read(corpus, toy_tokenizers, tmp_path):
    """A file cut short after it was written (a copy that ran out of disk) still has the
    header the manifest agrees with; reading past its end names the file."""
    out = tmp_path / "shards"
    shard(corpus, out, toy_tokenizers, shard_size=1000)
    path = out / "00000.tgt.npy"
    path.write_bytes(path.read_bytes()[:-8])
    data = ShardedTranslationData(str(corpus), str(out))
    data.setup("fit")
    pairs = data.datasets["fit"]
    assert pairs[0][1].tgt
    last = max(range(len(pairs)), key=lambda i: int(pairs.files[0][2].rows(i, i + 1)[0, 2]))
    with pytest.raises(ValueError, match=rf"{path}: rows .* past its end \(truncated\?\)"):
        pairs[last]


# ---- refusals ----------------------------------------------------------------------------------


def test_shards_of_another_tokeniser_are_refused(corpus, shard_dir, multi30k_lines, tmp_path):
    other = train_sentencepiece(multi30k_lines["en"][:300], 200)
    folder = write_toy_corpus(tmp_path / "other", (other, other), {})
    data = ShardedTranslationData(str(folder), str(shard_dir))
    with pytest.raises(
        ValueError, match=r"another src sentencepiece model .* than .*other/spm\.de\.model"
    ):
        data.setup("fit")


def test_shards_of_other_languages_or_a_shorter_limit_are_refused(corpus, shard_dir):
    swapped = ShardedTranslationData(str(corpus), str(shard_dir), src_lang="en", tgt_lang="de")
    with pytest.raises(ValueError, match=r"shards are \{'src': 'de', 'tgt': 'en'\}"):
        swapped.setup("fit")
    longer = ShardedTranslationData(str(corpus), str(shard_dir), max_length=150)
    with pytest.raises(ValueError, match=r"up to 100 subwords, fewer than max_length 150"):
        longer.setup("fit")


def test_a_bad_manifest_is_named(corpus, tmp_path):
    (tmp_path / MANIFEST).write_text("{not json")
    with pytest.raises(ValueError, match=rf"{tmp_path / MANIFEST} is not valid JSON"):
        ShardedTranslationData(str(corpus), str(tmp_path)).setup("fit")


# ---- training ----------------------------------------------------------------------------------


def test_fit_and_validate_from_shards(corpus, shard_dir, tmp_path):
    """The CLI's links: vocabulary sizes and tokenisers come from the DataModule; a
    fast_dev_run step trains on shard batches and validates on the text files."""
    data = ShardedTranslationData(str(corpus), str(shard_dir), max_tokens=300)
    torch.manual_seed(0)
    model = TranslationTask(
        encoder=functools.partial(RNNEncoder, embed_dim=16, hidden_size=16),
        decoder=functools.partial(LuongDecoder, embed_dim=16, hidden_size=32),
        src_vocab_size=data.src_vocab_size,
        tgt_vocab_size=data.tgt_vocab_size,
    )
    trainer = L.Trainer(
        fast_dev_run=2,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )
    trainer.fit(model, datamodule=data)
    assert trainer.global_step == 2
    assert model.src_tokenizer is data.src_tokenizer
    assert "val/bleu" in trainer.callback_metrics
