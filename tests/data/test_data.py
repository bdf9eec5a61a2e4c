"""Reading text, TranslationData, collation, and the generated dates corpus."""

from __future__ import annotations

import datetime as dt
import gzip

import pytest
import torch
from conftest import write_toy_corpus

from seqtasks.data.text import read_lines, read_parallel
from seqtasks.data.tokenizer import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    SentencePieceTokenizer,
    train_sentencepiece,
)
from seqtasks.translation.data import TranslationData, collate
from seqtasks.translation.dates import (
    DatesData,
    generate,
    ordinal_suffix,
    ordinal_words,
    write_dates,
)

# ---- text files -----------------------------------------------------------------------------


def test_read_lines_plain_and_gzip(tmp_path):
    text = "erste Zeile\nzweite Zeile – ü\r\n\nvierte\n"
    plain = tmp_path / "a.de"
    plain.write_bytes(text.encode("utf-8"))
    zipped = tmp_path / "a.de.gz"
    zipped.write_bytes(gzip.compress(text.encode("utf-8")))
    expected = ["erste Zeile", "zweite Zeile – ü", "", "vierte"]
    assert read_lines(plain) == expected
    assert read_lines(zipped) == expected


def test_read_lines_invalid_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "broken.de"
    path.write_bytes(b"gut\nauch gut\nschlecht \xff\xfe hier\nnoch eine\n")
    with pytest.raises(ValueError) as error:
        read_lines(path)
    message = str(error.value)
    assert str(path) in message
    assert ":3:" in message or "line 3" in message


def test_read_lines_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        read_lines(tmp_path / "nope.txt")
    with pytest.raises(FileNotFoundError, match=f"^{tmp_path} is a folder, not a text file$"):
        read_lines(tmp_path)


def test_read_parallel_misaligned_names_both_counts(tmp_path):
    src, tgt = tmp_path / "x.de", tmp_path / "x.en"
    src.write_text("a\nb\nc\n")
    tgt.write_text("a\nb\n")
    with pytest.raises(ValueError) as error:
        read_parallel(src, tgt)
    message = str(error.value)
    assert "3" in message and "2" in message
    assert str(src) in message and str(tgt) in message
    tgt.write_text("a\nb\nc\n")
    assert read_parallel(src, tgt) == (["a", "b", "c"], ["a", "b", "c"])


# ---- tokeniser --------------------------------------------------------------------------------


def test_tokenizer_special_ids_and_round_trip(toy_tokenizers, multi30k_lines):
    de, _ = toy_tokenizers
    assert (PAD_ID, 1, BOS_ID, EOS_ID) == (0, 1, 2, 3)
    assert de.sp.pad_id() == PAD_ID and de.sp.eos_id() == EOS_ID and de.sp.bos_id() == BOS_ID
    assert 200 <= de.vocab_size <= 260
    sentence = multi30k_lines["de"][5]
    ids = de.encode(sentence)
    assert BOS_ID not in ids and EOS_ID not in ids
    assert de.decode(ids) == sentence
    assert "".join(de.pieces(ids)).replace("▁", " ").strip() == sentence
    copy = SentencePieceTokenizer(de.proto)
    assert copy.encode(sentence) == ids


def test_tokenizer_with_other_special_ids_rejected(tmp_path):
    import io

    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(["a b c d e f g"] * 20),
        model_writer=model,
        vocab_size=12,
        hard_vocab_limit=False,
        minloglevel=2,
    )
    path = tmp_path / "spm.xx.model"
    path.write_bytes(model.getvalue())
    with pytest.raises(ValueError, match="train_sentencepiece"):
        SentencePieceTokenizer.from_file(path)


# ---- TranslationData --------------------------------------------------------------------------

MAX_LENGTH = 100  # the toy tokenisers cut Multi30k lines into at most ~60 pieces


@pytest.fixture(scope="module")
def messy_dir(multi30k_lines, toy_tokenizers, tmp_path_factory):
    """Training and validation splits with empty lines and an over-long pair."""
    de, en = multi30k_lines["de"], multi30k_lines["en"]
    long_de, long_en = " ".join(de[:8]), " ".join(en[:8])  # about 200 pieces each
    train = (
        de[:40] + ["", "Ein Hund.", "", long_de, "  "],
        en[:40] + ["", "", "A dog.", long_en, "A cat."],
    )
    val = (
        de[300:310] + ["", long_de, "Ein Hund."],
        en[300:310] + ["A lonely target.", "short", ""],
    )
    return write_toy_corpus(
        tmp_path_factory.mktemp("messy"),
        toy_tokenizers,
        {"train": train, "val": val, "test_2016_flickr": val},
    )


def test_translation_data_training_skips_empty_and_long(messy_dir, toy_tokenizers):
    data = TranslationData(str(messy_dir), max_length=MAX_LENGTH, max_tokens=300)
    assert data.src_vocab_size == toy_tokenizers[0].vocab_size
    assert data.tgt_vocab_size == toy_tokenizers[1].vocab_size
    data.setup("fit")
    train = data.datasets["fit"]
    assert len(train) == 40, "5 empty or over-long training pairs are skipped"
    assert all(e.src and e.tgt for e in train.examples)
    assert all(max(len(e.src), len(e.tgt)) <= MAX_LENGTH for e in train.examples)
    assert train.examples[0].src_text == data.src_tokenizer.decode(train.examples[0].src)


def test_translation_data_evaluation_keeps_every_line(messy_dir):
    data = TranslationData(str(messy_dir), max_length=MAX_LENGTH, max_tokens=300)
    data.setup("validate")
    val = data.datasets["validate"]
    assert len(val) == 13
    empty, long, no_target = val.examples[10], val.examples[11], val.examples[12]
    assert empty.src == [] and empty.src_text == "" and empty.tgt_text == "A lonely target."
    assert len(long.src) == MAX_LENGTH, "over-long evaluation sources are cut"
    assert no_target.tgt == [] and no_target.src
    batches = list(data.val_dataloader())
    indices = sorted(i for batch in batches for i in batch.index.tolist())
    assert indices == list(range(13))
    for batch in batches:
        for row, i in enumerate(batch.index.tolist()):
            assert batch.src_text[row] == val.examples[i].src_text
            if i == 10:  # the empty source is EOS alone
                assert batch.src[row][batch.src_mask[row]].tolist() == [EOS_ID]
    data.setup("test")
    assert len(data.datasets["test"]) == 13


def test_collate_shifts_targets_and_masks_padding(toy_data_dir):
    data = TranslationData(str(toy_data_dir), max_tokens=400)
    data.setup("fit")
    loader = data.train_dataloader()
    seen = 0
    for batch in loader:
        assert len(batch) == batch.src.size(0) == batch.tgt_in.size(0) == batch.tgt_out.size(0)
        assert len(batch) * max(batch.src.size(1), batch.tgt_in.size(1)) <= 400
        assert torch.equal(batch.src_mask, batch.src != PAD_ID)
        assert torch.all(batch.tgt_in[:, 0] == BOS_ID)
        for row, i in enumerate(batch.index.tolist()):
            example = data.datasets["fit"].examples[i]
            n_src, n_tgt = len(example.src), len(example.tgt)
            assert batch.src[row, :n_src].tolist() == example.src
            assert batch.src[row, n_src] == EOS_ID
            assert int(batch.src_mask[row].sum()) == n_src + 1
            assert batch.tgt_in[row, : n_tgt + 1].tolist() == [BOS_ID] + example.tgt
            assert batch.tgt_out[row, : n_tgt + 1].tolist() == example.tgt + [EOS_ID]
            assert torch.all(batch.tgt_in[row, n_tgt + 1 :] == PAD_ID)
            assert torch.all(batch.tgt_out[row, n_tgt + 1 :] == PAD_ID)
            assert batch.tgt_text[row] == example.tgt_text
            seen += 1
    assert seen == len(data.datasets["fit"]) == 200


def test_collate_directly():
    from seqtasks.translation.data import Example

    batch = collate(
        [(4, Example([5, 6, 7], [8], "a", "b")), (9, Example([5], [8, 9, 10], "c", "d"))]
    )
    assert batch.src.tolist() == [[5, 6, 7, EOS_ID], [5, EOS_ID, PAD_ID, PAD_ID]]
    assert batch.src_mask.tolist() == [[True] * 4, [True, True, False, False]]
    assert batch.tgt_in.tolist() == [[BOS_ID, 8, PAD_ID, PAD_ID], [BOS_ID, 8, 9, 10]]
    assert batch.tgt_out.tolist() == [[8, EOS_ID, PAD_ID, PAD_ID], [8, 9, 10, EOS_ID]]
    assert batch.index.tolist() == [4, 9]
    assert batch.src_text == ["a", "c"] and batch.tgt_text == ["b", "d"]


def test_translation_data_without_models_says_how_to_prepare(tmp_path):
    with pytest.raises(FileNotFoundError, match="multi30k.py"):
        TranslationData(str(tmp_path))


def test_train_sentencepiece_ids(multi30k_lines):
    tokenizer = train_sentencepiece(multi30k_lines["en"][:100], 120, model_type="bpe")
    assert tokenizer.sp.unk_id() == 1 and tokenizer.sp.pad_id() == PAD_ID


# ---- dates ------------------------------------------------------------------------------------


def test_dates_generator_is_deterministic():
    assert generate(100, seed=3) == generate(100, seed=3)
    assert generate(100, seed=3) != generate(100, seed=4)


def test_dates_targets_are_iso_dates_in_range():
    pairs = generate(500, seed=0)
    formats = set()
    for text, iso in pairs:
        date = dt.date.fromisoformat(iso)
        assert dt.date(1900, 1, 1) <= date <= dt.date(2099, 12, 31)
        assert str(date.year) in text
        assert text == text.strip() and text
        formats.add(text.split()[0].rstrip(","))
    assert len({iso[:4] for _, iso in pairs}) > 100, "years spread over two centuries"
    assert len(formats) > 10, "many spellings"


@pytest.mark.parametrize(
    "day,words,suffixed",
    [
        (1, "first", "1st"),
        (2, "second", "2nd"),
        (3, "third", "3rd"),
        (4, "fourth", "4th"),
        (10, "tenth", "10th"),
        (11, "eleventh", "11th"),
        (12, "twelfth", "12th"),
        (13, "thirteenth", "13th"),
        (20, "twentieth", "20th"),
        (21, "twenty-first", "21st"),
        (22, "twenty-second", "22nd"),
        (23, "twenty-third", "23rd"),
        (29, "twenty-ninth", "29th"),
        (30, "thirtieth", "30th"),
        (31, "thirty-first", "31st"),
    ],
)
def test_ordinals(day, words, suffixed):
    assert ordinal_words(day) == words
    assert ordinal_suffix(day) == suffixed


def test_dates_data_generates_its_corpus(tmp_path):
    folder = tmp_path / "dates"
    data = DatesData(str(folder), num_train=300, max_tokens=500)
    for name in ("train.text", "train.iso", "val.text", "test.iso", "spm.text.model"):
        assert (folder / name).is_file()
    assert len((folder / "train.iso").read_text().splitlines()) == 300
    data.setup("fit")
    assert len(data.datasets["fit"]) == 300
    example = data.datasets["validate"].examples[0]
    assert data.tgt_tokenizer.decode(example.tgt) == example.tgt_text
    dt.date.fromisoformat(example.tgt_text)
    # A second module on the same folder reuses the files.
    stamp = (folder / "train.text").stat().st_mtime_ns
    DatesData(str(folder), num_train=300)
    assert (folder / "train.text").stat().st_mtime_ns == stamp


def test_write_dates_is_reproducible(tmp_path):
    write_dates(tmp_path / "a", train=50, val=5, test=5, seed=2)
    write_dates(tmp_path / "b", train=50, val=5, test=5, seed=2)
    for name in ("train.text", "train.iso", "val.text", "test.iso"):
        assert (tmp_path / "a" / name).read_text() == (tmp_path / "b" / name).read_text()
