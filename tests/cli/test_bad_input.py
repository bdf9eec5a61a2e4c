"""Bad input, across the board: each case gets a message naming the file, line or field, and
no output file is lost or half written. Cases tested elsewhere are listed in docs/bad_input.md;
these are the rest. The apps and data_prep scripts run in process, on tiny untrained models."""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import logging
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path
from types import ModuleType

import pytest
import torch
from conftest import REPO, flickr8k_subset, load_script, save_checkpoint, write_toy_corpus

from seqtasks.captioning.captions import load_image
from seqtasks.captioning.data import CaptionData
from seqtasks.captioning.metrics import score_captions
from seqtasks.captioning.task import CaptioningTask
from seqtasks.cli.main import main as seqtasks_main
from seqtasks.data.words import WordTokenizer
from seqtasks.io import downloads
from seqtasks.io.files import remove_stale_temporaries, temporary_path
from seqtasks.io.plots import plot_bleu_by_length
from seqtasks.parsing.data import ParsingData
from seqtasks.parsing.linearisation import linearise
from seqtasks.parsing.task import ParsingTask
from seqtasks.parsing.trees import clean_tree, read_treebank, to_line
from seqtasks.parsing.vocabulary import ParsingVocabulary
from seqtasks.training.checkpoints import AtomicCheckpointIO
from seqtasks.translation.data import TranslationData
from seqtasks.translation.task import TranslationTask

SHARED = REPO.parent / "shared" / "data"


# ---- running the scripts in process -------------------------------------------------------------
@pytest.fixture(scope="module")
def scripts() -> dict[str, ModuleType]:
    paths = ["apps/translate.py", "apps/parse.py", "apps/caption.py", "apps/evaluate.py"]
    paths += ["apps/average_checkpoints.py", "data_prep/multi30k.py", "data_prep/ptb.py"]
    paths += ["data_prep/captions.py", "data_prep/shards.py", "data_prep/shapes.py"]
    return {path: load_script(path) for path in paths}


@pytest.fixture
def call(scripts, monkeypatch, capsys):
    """call(script, *args, stdin=b"") -> (exit status, stdout, stderr), as a user sees them:
    stdin is bytes (decoded by the script), `sys.exit("message")` is status 1 and the message."""

    def run(script: str, *args: str, stdin: bytes = b"") -> tuple[int, str, str]:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
        try:
            status = scripts[script].main(list(args))
            message = ""
        except SystemExit as stop:
            status, message = (
                (1, f"{stop.code}\n") if isinstance(stop.code, str) else (stop.code, "")
            )
        out, err = capsys.readouterr()
        assert "Traceback" not in err
        return status or 0, out, err + message

    return run


# ---- tiny untrained checkpoints, written the way the CLI writes them ----------------------------
RNN = {
    "class_path": "seqtasks.encoders.RNNEncoder",
    "init_args": {"embed_dim": 8, "hidden_size": 8},
}
LUONG = {
    "class_path": "seqtasks.decoders.LuongDecoder",
    "init_args": {"embed_dim": 8, "hidden_size": 16},
}
CONV = {"class_path": "seqtasks.encoders.ConvEncoder", "init_args": {"channels": [4, 8]}}
SOFT = {
    "class_path": "seqtasks.decoders.SoftAttentionDecoder",
    "init_args": {"embed_dim": 8, "hidden_size": 8},
}


def sample_trees(count: int):
    """The first `count` cleaned trees of the shared WSJ sample."""
    trees = []
    for path in sorted((SHARED / "ptb_sample").glob("wsj_*.mrg")):
        trees += [clean_tree(tree) for tree in read_treebank(path)]
        if len(trees) >= count:
            return trees[:count]
    raise AssertionError(f"the WSJ sample has fewer than {count} trees")


@pytest.fixture(scope="module")
def checkpoints(toy_tokenizers, tmp_path_factory) -> dict[str, Path]:
    """{task: path} of a tiny translation, parsing and captioning checkpoint."""
    folder = tmp_path_factory.mktemp("checkpoints")
    torch.manual_seed(0)
    src, tgt = toy_tokenizers
    sizes = {"src_vocab_size": src.vocab_size, "tgt_vocab_size": tgt.vocab_size}
    return {
        "translation": save_checkpoint(
            TranslationTask,
            {
                "_class_path": "seqtasks.translation.task.TranslationTask",
                "encoder": RNN,
                "decoder": LUONG,
            }
            | sizes,
            lambda model: model.set_tokenizers(src, tgt),
            folder / "translation.ckpt",
        ),
        "parsing": parsing_checkpoint(folder / "parsing.ckpt"),
        "captioning": captioning_checkpoint(folder / "captioning.ckpt"),
    }


def parsing_checkpoint(path: Path) -> Path:
    """An untrained BiGRU + Luong parser over the vocabulary of 3 WSJ sample trees."""
    vocabulary = ParsingVocabulary.build(sample_trees(3), tags=False, reverse=False, min_count=1)
    return save_checkpoint(
        ParsingTask,
        {"_class_path": "seqtasks.parsing.task.ParsingTask", "encoder": RNN, "decoder": LUONG}
        | {"src_vocab_size": len(vocabulary.words), "tgt_vocab_size": len(vocabulary.tokens)},
        lambda model: model.set_vocabulary(vocabulary),
        path,
    )


def captioning_checkpoint(path: Path) -> Path:
    """An untrained CNN + soft-attention captioner of 32-pixel images, saying at most 4 words."""
    words = WordTokenizer(["a", "dog", "runs"])
    return save_checkpoint(
        CaptioningTask,
        {"_class_path": "seqtasks.captioning.task.CaptioningTask", "encoder": CONV, "decoder": SOFT}
        | {"tgt_vocab_size": words.vocab_size, "max_caption_length": 4},
        lambda model: model.set_preprocessing(words, 32),
        path,
    )


def edited(checkpoint: Path, path: Path, **changes) -> Path:
    """A copy of `checkpoint` whose stored task entries are changed (None deletes one)."""
    stored = torch.load(checkpoint, map_location="cpu", weights_only=True)
    for key, value in changes.items():
        if value is None:
            del stored["seqtasks"][key]
        else:
            stored["seqtasks"][key] = value
    torch.save(stored, path)
    return path


# ---- captioned images: a few real Flickr8k photos ------------------------------------------------
def caption_folder(folder: Path, rows: list[str] | None = None, names: int = 5) -> Path:
    """`folder` with `names` photos of the shared Flickr8k subset in images/ and captions.txt
    (`rows` if given, else each photo's first caption)."""
    subset = flickr8k_subset()
    with open(subset / "captions.txt", newline="", encoding="utf-8") as f:
        table = list(csv.reader(f))[1:]
    first = {}
    for name, caption in table:
        first.setdefault(name, caption)
    chosen = sorted(first)[:names]
    (folder / "images").mkdir(parents=True, exist_ok=True)
    for name in chosen:
        shutil.copyfile(subset / "images" / name, folder / "images" / name)
    if rows is None:
        rows = [f"{name},{first[name]}" for name in chosen]
    (folder / "captions.txt").write_text("image,caption\n" + "".join(r + "\n" for r in rows))
    return folder


def photo(folder: Path, i: int) -> str:
    """The name of the i-th photo of a `caption_folder`, in the order of its captions.txt."""
    return sorted(p.name for p in (folder / "images").iterdir())[i]


def caption_data(folder: Path, **kwargs) -> CaptionData:
    return CaptionData(
        str(folder),
        image_size=16,
        min_freq=1,
        val_images=1,
        test_images=1,
        batch_size=2,
        feature_cache=None,
        **kwargs,
    )


# ---- empty lines and lines over the length limit, in training data ------------------------------
def test_translation_training_counts_what_it_skips(
    multi30k_lines, toy_tokenizers, tmp_path, caplog
):
    de, en = multi30k_lines["de"], multi30k_lines["en"]
    long_de = " ".join(de[:8])  # about 200 pieces
    train = (de[:4] + ["", "  ", long_de, "Ein Hund."], en[:4] + ["A dog.", "", en[5], "\t"])
    folder = write_toy_corpus(tmp_path, toy_tokenizers, {"train": train, "val": (de[:2], en[:2])})
    with caplog.at_level(logging.WARNING):
        data = TranslationData(str(folder), max_length=100)
        data.setup("fit")
    assert len(data.datasets["fit"]) == 4
    assert (
        f"{folder / 'train.de'}: skipped 4 of 8 training pairs: 3 with an empty side, 1 with a "
        "side over max_length 100 tokens" in caplog.text
    )


def test_parsing_training_skips_trees_without_words_or_too_long(tmp_path, caplog):
    trees = sample_trees(4)
    lines = [to_line(tree) for tree in trees]
    (tmp_path / "train.mrg").write_text("\n".join([lines[0], "(TOP )", lines[1], lines[2]]))
    (tmp_path / "dev.mrg").write_text(lines[3] + "\n(TOP )\n")
    lengths = sorted(len(linearise(tree)) for tree in trees[:3])
    assert lengths[1] < lengths[2], "the sample's first trees differ in length"
    with caplog.at_level(logging.WARNING):
        data = ParsingData(str(tmp_path), max_length=lengths[1])
        data.setup("fit")
    assert len(data.datasets["fit"]) == 2 and len(data.datasets["validate"]) == 2
    assert (
        f"{tmp_path / 'train.mrg'}: skipped 2 of 4 training trees: 1 without words, 1 with a "
        f"bracket sequence over max_length {lengths[1]} tokens" in caplog.text
    )
    assert all(example.src and example.tgt for example in data.datasets["fit"].examples)


def test_caption_sources_skip_blank_lines_and_captions_without_words(tmp_path, caplog):
    folder = caption_folder(tmp_path)
    names = [photo(folder, i) for i in range(5)]
    rows = [f"{names[0]},A dog runs.", "", f"{names[1]},   ", f"{names[1]},...", "  ,  "]
    rows += [f"{names[2]},A cat.", f"{names[2]},", f"{names[3]},Two dogs.", f"{names[4]},A car."]
    caption_folder(folder, rows)
    with caplog.at_level(logging.WARNING):
        data = caption_data(folder)
    assert "captions.txt: skipped 2 blank lines" in caplog.text
    assert "left out 3 captions without a word, and 1 images left with no caption" in caplog.text
    kept = {image.name: image.captions for images in data.images.values() for image in images}
    assert kept == {
        names[0]: ["A dog runs."],
        names[2]: ["A cat."],
        names[3]: ["Two dogs."],
        names[4]: ["A car."],
    }


def test_caption_training_skips_captions_over_max_length(tmp_path, caplog):
    folder = caption_folder(tmp_path)
    names = [photo(folder, i) for i in range(5)]
    rows = [f"{names[0]},a dog", f"{names[0]},a dog runs on the grass", f"{names[1]},a cat"]
    caption_folder(folder, rows + [f"{name},a bird" for name in names[2:]])
    data = caption_data(folder, max_length=3)
    with caplog.at_level(logging.WARNING):
        data.setup("fit")
    assert len(data.datasets["fit"]) == 3  # of 4: the last two images are validation and test
    message = f"{folder}: skipped 1 of 4 training captions: 1 with more than max_length 3 words"
    assert message in caplog.text


# ---- invalid UTF-8, misaligned files, unreadable trees, in training data ------------------------
@pytest.mark.parametrize(
    "case, message",
    [
        ("invalid_utf8", "val.en:2: invalid UTF-8 at byte 4 of the line"),
        ("misaligned", "val.de has 2 lines but {folder}/val.en has 3"),
    ],
)
def test_translation_data_names_the_bad_file(
    multi30k_lines, toy_tokenizers, tmp_path, case, message
):
    de, en = multi30k_lines["de"], multi30k_lines["en"]
    folder = write_toy_corpus(tmp_path, toy_tokenizers, {"train": (de[:4], en[:4])})
    (folder / "val.de").write_text(f"{de[10]}\n{de[11]}\n")
    if case == "invalid_utf8":
        (folder / "val.en").write_bytes(en[10].encode() + b"\nA do\xe9g.\n")
    else:
        (folder / "val.en").write_text(f"{en[10]}\n{en[11]}\n{en[12]}\n")
    data = TranslationData(str(folder))
    with pytest.raises(ValueError, match="misaligned|invalid") as error:
        data.setup("fit")
    assert message.format(folder=folder) in str(error.value)


@pytest.mark.parametrize(
    "content, message",
    [
        (
            b"%s\n(TOP (S\n  (NP (NN a))\n  (VP x y)))\n",
            "tree 2 (line 2): (VP …) holds 'y' beside ",
        ),
        (b"%s\n\n(TOP (S\n  (NP (NN a))\n", "tree 2 (line 3): unbalanced brackets: 2 still open"),
        (b"%s\n(TOP (S\n  (NP (NN caf\xe9))))\n", "tree 2 (line 2): invalid UTF-8 at line 3"),
    ],
)
def test_an_unreadable_tree_is_named_by_file_and_the_line_it_starts_on(tmp_path, content, message):
    good = to_line(sample_trees(1)[0]).encode()
    (tmp_path / "train.mrg").write_bytes(good + b"\n")
    (tmp_path / "dev.mrg").write_bytes(content % good)
    data = ParsingData(str(tmp_path))
    with pytest.raises(ValueError) as error:
        data.setup("fit")
    assert f"{tmp_path / 'dev.mrg'}: {message}" in str(error.value)


@pytest.mark.parametrize(
    "file, content, message",
    [
        (
            "captions.txt",
            b"image,caption\n{0},a dog\n{1},caf\xe9\n",
            "captions.txt:3: invalid UTF-8",
        ),
        ("captions.txt", b"image,caption\n{0},a dog\n{1}\n", "captions.txt:3: expected 'image,"),
        ("splits.json", b'{"train": [{0}]}', "splits.json:1: invalid JSON: Expecting value"),
        ("scenes.json", b'{"x": \xff}', "scenes.json: invalid UTF-8 at byte 6"),
    ],
)
def test_caption_folders_name_the_bad_file_and_line(tmp_path, file, content, message):
    folder = caption_folder(tmp_path)
    (folder / file).write_bytes(content.replace(b"{0}", b"x.jpg").replace(b"{1}", b"y.jpg"))
    with pytest.raises(ValueError) as error:
        caption_data(folder)
    assert f"{folder / message}" in str(error.value)


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"images": [', "k.json:1: invalid JSON"),
        ('{"pictures": []}', "k.json lists no images"),
        (
            '{"images": [{"filename": "a.jpg", "split": "train", "sentences": [{"tokens": ["a"]}]},'
            ' {"filename": "b.jpg", "split": "train"}]}',
            "k.json: images[1] needs filename, split and sentences[].tokens (KeyError: 'sent",
        ),
    ],
)
def test_karpathy_files_name_the_bad_field(tmp_path, content, message):
    (tmp_path / "k.json").write_text(content)
    with pytest.raises(ValueError) as error:
        caption_data(tmp_path / "k.json")
    assert str(tmp_path / message) in str(error.value)


# ---- missing and corrupt images -----------------------------------------------------------------
def test_a_missing_training_image_is_named_before_training(tmp_path):
    folder = caption_folder(tmp_path)
    missing = folder / "images" / photo(folder, 1)
    missing.unlink()
    with pytest.raises(FileNotFoundError) as error:
        caption_data(folder)
    assert str(error.value) == f"1 images of {folder} are missing, e.g. {missing}"


def test_a_corrupt_training_image_is_an_error_naming_it(tmp_path):
    folder = caption_folder(tmp_path)
    broken = folder / "images" / photo(folder, 0)
    broken.write_bytes(broken.read_bytes()[:100])  # a truncated JPEG
    data = caption_data(folder)
    data.setup("fit")
    with pytest.raises(OSError, match=f"cannot read image {broken}"):
        list(data.train_dataloader())


def png_with_a_damaged_chunk() -> bytes:
    """A 40×30 PNG whose pixels are in two IDAT chunks, the second with a type that is no chunk
    name: Pillow opens it, and raises SyntaxError when it decodes the pixels."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        checksum = struct.pack(">I", zlib.crc32(kind + data))
        return struct.pack(">I", len(data)) + kind + data + checksum

    pixels = zlib.compress(b"".join(b"\x00" + bytes([200, 10, 10]) * 40 for _ in range(30)))
    half = len(pixels) // 2
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 40, 30, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", pixels[:half])
        + chunk(b"ID T", pixels[half:])
        + chunk(b"IEND", b"")
    )


def damage_image(path: Path, problem: str) -> None:
    """Make the image at `path` missing, cut short, or a PNG with a damaged chunk."""
    if problem == "missing":
        path.unlink()
    elif problem == "truncated":
        path.write_bytes(path.read_bytes()[:2000])
    else:
        path.write_bytes(png_with_a_damaged_chunk())


def test_load_image_names_a_png_with_a_damaged_chunk(tmp_path):
    path = tmp_path / "damaged.png"
    path.write_bytes(png_with_a_damaged_chunk())
    with pytest.raises(OSError) as error:
        load_image(path, 16)
    assert str(error.value) == f"cannot read image {path}: broken PNG file (chunk b'ID T')"


def test_caption_records_images_it_cannot_decode_and_captions_the_rest(checkpoints, call, tmp_path):
    folder = caption_folder(tmp_path)
    images = folder / "images"
    names = [photo(folder, i) for i in range(5)]
    damage_image(images / names[1], "damaged PNG chunk")
    damage_image(images / names[3], "truncated")
    out = tmp_path / "captions.jsonl"
    status, _, err = call(
        *("apps/caption.py", str(images), "--checkpoint", str(checkpoints["captioning"])),
        *("--beam", "1", "--batch-size", "2", "--out", str(out), "--device", "cpu"),
    )
    assert status == 1
    assert f"error: cannot read image {images / names[1]}: broken PNG file" in err
    assert f"error: cannot read image {images / names[3]}: image file is truncated" in err
    assert "captioned 3 images" in err and "2 could not be read" in err
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [record["image"] for record in records] == [str(images / name) for name in names]
    assert [sorted(record) for record in records] == [
        ["caption", "image", "score"],
        ["error", "image"],
        ["caption", "image", "score"],
        ["error", "image"],
        ["caption", "image", "score"],
    ]


@pytest.mark.parametrize("problem", ["missing", "truncated", "damaged PNG chunk"])
def test_evaluate_captioning_scores_the_readable_images_and_says_so_first(
    checkpoints, call, tmp_path, problem
):
    folder = caption_folder(tmp_path / "photos")
    names = [photo(folder, i) for i in range(5)]
    (folder / "splits.json").write_text(
        json.dumps({"train": names[:1], "val": names[1:2], "test": names[2:]})
    )
    unreadable = folder / "images" / names[3]
    damage_image(unreadable, problem)
    output = tmp_path / "captions.jsonl"
    status, out, err = call(
        *("apps/evaluate.py", "captioning", "--checkpoint", str(checkpoints["captioning"])),
        *("--source", str(folder), "--output", str(output), "--no-meteor", "--json"),
        *("--beam", "1", "--device", "cpu"),
    )
    assert status == 1
    assert out.splitlines()[0] == (
        "WARNING: scores over 2 of the 3 images of the split: 1 could not be read (named on "
        "stderr). Do not compare them with scores over the whole split."
    )
    assert f"error: cannot read image {unreadable}: " in err
    report = json.loads(out.splitlines()[-1])
    assert report["images"] == 2 and report["images_unreadable"] == [str(unreadable)]
    records = [json.loads(line) for line in output.read_text().splitlines()]
    assert [r["image"] for r in records] == [str(folder / "images" / n) for n in names[2:]]
    assert "error" in records[1] and "error" not in records[0] and "error" not in records[2]
    # The scores are those of the two readable images' captions, scored on their own.
    with open(folder / "captions.txt", newline="") as f:
        references = {row["image"]: [row["caption"]] for row in csv.DictReader(f)}
    expected = score_captions(
        [records[0]["caption"], records[2]["caption"]],
        [references[names[2]], references[names[4]]],
        with_meteor=False,
    )
    assert {key: report[key] for key in ("bleu1", "bleu4", "cider")} == pytest.approx(
        {"bleu1": expected.bleu1, "bleu4": expected.bleu4, "cider": expected.cider}, abs=1e-6
    )  # --json keeps 6 decimals


def test_evaluate_captioning_with_no_readable_image_is_an_error(checkpoints, call, tmp_path):
    folder = caption_folder(tmp_path)
    test_image = folder / "images" / photo(folder, 4)  # the last image: the test split
    damage_image(test_image, "damaged PNG chunk")
    status, _, err = call(
        *("apps/evaluate.py", "captioning", "--checkpoint", str(checkpoints["captioning"])),
        *("--source", str(folder), "--val-images", "1", "--test-images", "1", "--no-meteor"),
        *("--device", "cpu"),
    )
    assert status == 2 and f"error: cannot read image {test_image}: broken PNG file" in err
    assert "error: none of the 1 images of the split can be read" in err


# ---- caption sources may only name images inside their image folder ---------------------------
@pytest.mark.parametrize(
    "layout", ["absolute path", "climbing out with ..", "Karpathy filepath", "Flickr8k token file"]
)
def test_caption_sources_naming_images_outside_their_folder_are_refused(call, tmp_path, layout):
    source, out = tmp_path / "source", tmp_path / "out"
    folder = caption_folder(source)
    secret = tmp_path / "secret.jpg"
    shutil.copyfile(folder / "images" / photo(folder, 0), secret)  # an image, readable
    good = f"{photo(folder, 1)},A photo."
    if layout == "absolute path":
        caption_folder(folder, [good, f"{secret},A secret."])
        where, name, given = f"{folder / 'captions.txt'}:3", str(secret), folder
    elif layout == "climbing out with ..":
        caption_folder(folder, ["../../secret.jpg,A secret.", good])
        where, name, given = f"{folder / 'captions.txt'}:2", "../../secret.jpg", folder
    elif layout == "Karpathy filepath":
        entry = {"filename": "secret.jpg", "split": "train", "sentences": [{"tokens": ["a"]}]}
        given = folder / "karpathy.json"
        given.write_text(json.dumps({"images": [entry | {"filepath": "../.."}]}))
        where, name = f"{given}: images[0]", "../../secret.jpg"
    else:
        (folder / "Flicker8k_Dataset").mkdir()
        (folder / "captions.txt").unlink()
        (folder / "Flickr8k.token.txt").write_text("../secret.jpg#0\tA secret.\n")
        where, name, given = f"{folder / 'Flickr8k.token.txt'}:1", "../secret.jpg", folder
    status, _, err = call("data_prep/captions.py", "--source", str(given), "--out", str(out))
    assert status == 2
    assert f"error: {where}: image {name!r} is not inside the image folder" in err
    assert not out.exists(), "nothing is copied"
    if layout != "Flickr8k token file":  # CaptionData reads these two layouts too
        with pytest.raises(ValueError, match=re.escape(f"{where}: image {name!r} is not inside")):
            caption_data(given)


def test_captions_prep_refuses_two_images_of_one_name_and_replaces_stale_copies(call, tmp_path):
    """A Karpathy file whose two subfolders hold an image of the same name would have one image
    take the other's captions in the flat `images/` folder: refused, naming both. An image of
    that name left in `--out` by an earlier source is replaced, not kept."""
    source, out = tmp_path / "source", tmp_path / "out"
    folder = caption_folder(source)
    for sub, number in (("a", 0), ("b", 1)):
        (folder / sub).mkdir()
        shutil.copyfile(folder / "images" / photo(folder, number), folder / sub / "x.jpg")
    entries = [
        {"filepath": sub, "filename": "x.jpg", "split": "train", "sentences": [{"tokens": [w]}]}
        for sub, w in (("a", "one"), ("b", "two"))
    ]
    karpathy = folder / "karpathy.json"
    karpathy.write_text(json.dumps({"images": entries}))
    status, _, err = call("data_prep/captions.py", "--source", str(karpathy), "--out", str(out))
    assert status == 2
    assert f"two images would both be written as images/x.jpg: {folder / 'a' / 'x.jpg'} and " in err
    assert not out.exists()

    karpathy.write_text(json.dumps({"images": entries[1:]}))
    (out / "images").mkdir(parents=True)
    (out / "images" / "x.jpg").write_bytes(b"an earlier source's image")
    status, _, _ = call("data_prep/captions.py", "--source", str(karpathy), "--out", str(out))
    assert status == 0
    assert (out / "images" / "x.jpg").read_bytes() == (folder / "b" / "x.jpg").read_bytes()


# ---- invalid UTF-8 and line alignment in the apps ----------------------------------------------
BAD_TEXT = b"Ein Hund.\nZwei Hunde \xff laufen.\n"


@pytest.mark.parametrize(
    "where", ["translate stdin", "translate --input", "parse stdin", "evaluate --ref"]
)
def test_apps_name_invalid_utf8_by_file_and_line(checkpoints, call, tmp_path, where):
    bad, good, output = tmp_path / "bad.txt", tmp_path / "good.txt", tmp_path / "out.txt"
    bad.write_bytes(BAD_TEXT)
    good.write_text("A dog.\nTwo dogs run.\n")
    output.write_text("an earlier, good output\n")
    translate = ("apps/translate.py", "--checkpoint", str(checkpoints["translation"]))
    runs = {
        "translate stdin": (translate, "<stdin>"),
        "translate --input": ((*translate, "--input", str(bad), "--output", str(output)), bad),
        "parse stdin": (("apps/parse.py", "--checkpoint", str(checkpoints["parsing"])), "<stdin>"),
        "evaluate --ref": (
            ("apps/evaluate.py", "translation", "--checkpoint", str(checkpoints["translation"]))
            + ("--src", str(good), "--ref", str(bad), "--output", str(output)),
            bad,
        ),
    }
    args, named = runs[where]
    status, out, err = call(*args, "--device", "cpu", stdin=BAD_TEXT)
    assert status == 2 and out == ""
    assert f"error: {named}:2: invalid UTF-8 at byte 11 of the line" in err
    if "--output" in args:
        assert output.read_text() == "an earlier, good output\n", "the earlier output is kept"


def test_translate_keeps_one_line_per_line_through_unicode_breaks(checkpoints, call):
    # U+2028, U+0085 and form feed end lines for str.splitlines, but not for files.
    lines = ["Ein Hund\u2028läuft.", "", "Eine\x85Katze.", "   ", "Zwei\x0cHunde."]
    status, out, _ = call(
        *("apps/translate.py", "--checkpoint", str(checkpoints["translation"]), "--beam", "1"),
        *("--device", "cpu"),
        stdin="".join(line + "\n" for line in lines).encode(),
    )
    assert status == 0
    rows = out.split("\n")[:-1]
    assert len(rows) == len(lines) and rows[1] == rows[3] == ""


# ---- several checkpoints of one file name ------------------------------------------------------
def test_evaluate_translation_writes_one_output_per_checkpoint_of_the_same_name(
    checkpoints, call, tmp_path
):
    runs = [tmp_path / "run1" / "last.ckpt", tmp_path / "run2" / "last.ckpt"]
    stored = torch.load(checkpoints["translation"], map_location="cpu", weights_only=True)
    for number, run in enumerate(runs):
        run.parent.mkdir()
        torch.manual_seed(number)  # two models that translate differently
        weights = stored["state_dict"]
        stored["state_dict"] = {k: torch.randn_like(v) for k, v in weights.items()}
        torch.save(stored, run)
    source = tmp_path / "src.de"
    source.write_text("Ein Hund läuft.\nZwei Katzen schlafen.\n")
    status, out, _ = call(
        *("apps/evaluate.py", "translation", "--checkpoint", *map(str, runs), "--beam", "1"),
        *("--src", str(source), "--ref", str(source), "--output", str(tmp_path / "hyp.txt")),
        *("--device", "cpu", "--json"),
    )
    assert status == 0
    outputs = [tmp_path / "hyp.1-last.txt", tmp_path / "hyp.2-last.txt"]
    assert [m["output"] for m in json.loads(out.splitlines()[-1])["models"]] == list(
        map(str, outputs)
    )
    for run, output in zip(runs, outputs):
        assert f"translations written to {output}" in out
        status, translated, _ = call(
            *("apps/translate.py", "--checkpoint", str(run), "--input", str(source)),
            *("--beam", "1", "--device", "cpu"),
        )
        assert output.read_text() == translated, f"{output} holds the translations of {run}"
    assert outputs[0].read_text() != outputs[1].read_text()


def test_output_names_for_several_checkpoints():
    from seqtasks.translation.report import output_paths as names

    out = Path("out/hyp.txt")
    assert names(out, [Path("a/best.ckpt")]) == [out]
    assert names(out, [Path("a/best.ckpt"), Path("a/last.ckpt")]) == [
        Path("out/hyp.best.txt"),
        Path("out/hyp.last.txt"),
    ]
    assert names(Path("hyp"), [Path("a/last.ckpt"), Path("b/last.ckpt"), Path("c.ckpt")]) == [
        Path("hyp.1-last"),
        Path("hyp.2-last"),
        Path("hyp.3-c"),
    ]


# ---- checkpoints of another task, or without their vocabularies --------------------------------
def app_call(app: str, checkpoint: Path, folder: Path) -> tuple[str, ...]:
    """The arguments that run `app` on `checkpoint` with inputs in `folder`."""
    if app in ("translate", "parse"):
        return (f"apps/{app}.py", "--checkpoint", str(checkpoint))
    if app == "caption":
        return ("apps/caption.py", str(folder), "--checkpoint", str(checkpoint))
    task = app.removeprefix("evaluate ")
    args = ("apps/evaluate.py", task, "--checkpoint", str(checkpoint))
    if task == "translation":
        (folder / "src.txt").write_text("Ein Hund.\n")
        return args + ("--src", str(folder / "src.txt"), "--ref", str(folder / "src.txt"))
    if task == "parsing":
        (folder / "gold.mrg").write_text(to_line(sample_trees(1)[0]) + "\n")
        return args + ("--gold", str(folder / "gold.mrg"))
    source = caption_folder(folder / "photos")
    return args + ("--source", str(source), "--val-images", "1", "--test-images", "1")


APP_TASKS = {
    "translate": "translation",
    "parse": "parsing",
    "caption": "captioning",
    "evaluate translation": "translation",
    "evaluate parsing": "parsing",
    "evaluate captioning": "captioning",
}
STORED = {"translation": "src_tokenizer", "parsing": "vocabulary", "captioning": "image_size"}


@pytest.mark.parametrize("app", list(APP_TASKS))
def test_a_checkpoint_without_its_vocabulary_says_so(checkpoints, call, tmp_path, app):
    task = APP_TASKS[app]
    stripped = edited(checkpoints[task], tmp_path / "stripped.ckpt", **{STORED[task]: None})
    status, _, err = call(*app_call(app, stripped, tmp_path), "--device", "cpu", stdin=b"x\n")
    assert status == 2
    assert f"error: {stripped}: this {task} checkpoint lacks {STORED[task]}" in err


@pytest.mark.parametrize("app", [app for app in APP_TASKS if app.startswith("evaluate")])
def test_evaluate_names_the_task_of_another_checkpoint(checkpoints, call, tmp_path, app):
    task = APP_TASKS[app]
    other = "parsing" if task == "translation" else "translation"
    status, _, err = call(*app_call(app, checkpoints[other], tmp_path), "--device", "cpu")
    assert status == 2
    assert f"error: {checkpoints[other]} is a {other} checkpoint, not a {task} one" in err


def test_resuming_from_a_checkpoint_of_another_task_names_it(checkpoints):
    """What `seqtasks fit/test --ckpt_path` meets: Lightning calls `on_load_checkpoint`."""
    model = TranslationTask.load_from_checkpoint(checkpoints["translation"])
    stored = torch.load(checkpoints["parsing"], map_location="cpu", weights_only=True)
    with pytest.raises(ValueError, match=r"not a translation checkpoint \(task: parsing\)"):
        model.on_load_checkpoint(stored)


# ---- damaged checkpoints ------------------------------------------------------------------------
def without_entry(checkpoint: Path, path: Path, entry: str) -> Path:
    """A copy of the zip archive `checkpoint` without its entry ending in `/entry`."""
    with zipfile.ZipFile(checkpoint) as original, zipfile.ZipFile(path, "w") as copy:
        for item in original.infolist():
            if not item.filename.endswith(f"/{entry}"):
                copy.writestr(item, original.read(item.filename))
    return path


def damaged(checkpoint: Path, folder: Path, kind: str) -> tuple[Path, str]:
    """(a copy of `checkpoint` damaged the `kind` way, what the error message says of it)."""
    path = folder / f"{kind.replace(' ', '_')}.ckpt"
    data = checkpoint.read_bytes()
    if kind.startswith("random bytes"):  # torch.load raises the error named in `kind`
        path.write_bytes(random.Random(2 if "IndexError" in kind else 20).randbytes(3000))
        start = path.read_bytes()[:4].hex(" ")
        return path, f"it is not the zip archive torch.save writes (it starts with bytes {start})"
    if kind == "truncated":
        path.write_bytes(data[: len(data) // 2])
        return path, (
            f"the zip archive ends after {len(data) // 2} bytes without its table of contents: "
            "was its writing or download cut short?"
        )
    if kind == "empty":
        path.write_bytes(b"")
        return path, "the file is empty (0 bytes): was its writing or download cut short?"
    if kind.startswith("without"):
        entry = "data.pkl" if kind == "without data.pkl" else "data/0"
        return without_entry(checkpoint, path, entry), f"the zip archive lacks its entry {entry!r}"
    if kind == "a flipped bit":  # PyTorch does not check CRCs: this loads a wrong weight
        with zipfile.ZipFile(checkpoint) as archive:
            entry = next(name for name in archive.namelist() if name.endswith("/data/0"))
            start = data.index(archive.read(entry))
        path.write_bytes(data[: start + 5] + bytes([data[start + 5] ^ 1]) + data[start + 6 :])
        return path, f"the zip archive's entry {entry!r} does not match its CRC"
    torch.save({"state_dict": {}, "made_in": Path("elsewhere")}, path)  # pickled code objects
    return path, "it holds a pathlib.PosixPath object, which loading with weights_only refuses"


DAMAGE = ["random bytes (IndexError)", "random bytes (KeyError)", "truncated", "empty"]
DAMAGE += ["without data.pkl", "without a tensor", "a flipped bit", "objects"]


@pytest.mark.parametrize("kind", DAMAGE)
@pytest.mark.parametrize("app", [*APP_TASKS, "average_checkpoints"])
def test_every_app_names_a_damaged_checkpoint_and_what_is_wrong(
    checkpoints, call, tmp_path, app, kind
):
    path, problem = damaged(checkpoints[APP_TASKS.get(app, "translation")], tmp_path, kind)
    if app == "average_checkpoints":
        args = ("apps/average_checkpoints.py", str(path), "--out", str(tmp_path / "mean.ckpt"))
    else:
        args = (*app_call(app, path, tmp_path), "--device", "cpu")
    status, _, err = call(*args, stdin=b"Ein Hund.\n")
    assert status == 2
    assert f"error: {path} is not a readable PyTorch checkpoint: {problem}" in err


@pytest.mark.parametrize(
    "subcommand, kind",
    [("validate", "random bytes (IndexError)"), ("test", "truncated")]
    + [("predict", "without data.pkl"), ("validate", "a flipped bit")]
    + [("fit", "empty"), ("validate", "parsing checkpoint")],
)
def test_seqtasks_refuses_a_damaged_or_foreign_ckpt_path_by_name(
    checkpoints, tmp_path, capsys, monkeypatch, subcommand, kind
):
    monkeypatch.setattr(sys, "argv", ["seqtasks"])  # the arguments are these, not pytest's
    if kind == "parsing checkpoint":
        path = checkpoints["parsing"]
        message = f"{path} is a parsing checkpoint, not a translation one"
    else:
        path, problem = damaged(checkpoints["translation"], tmp_path, kind)
        message = f"{path} is not a readable PyTorch checkpoint: {problem}"
    config = REPO / "configs/translation/rnn_bahdanau.yaml"
    with pytest.raises(SystemExit) as stop:
        seqtasks_main([subcommand, "--config", str(config), "--ckpt_path", str(path)])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[0].startswith(f"error: {message}")


@pytest.mark.parametrize("kind", ["truncated", "a flipped bit", "parsing checkpoint"])
def test_resuming_from_a_damaged_or_foreign_last_checkpoint_names_it(
    checkpoints, toy_data_dir, tmp_path, capsys, monkeypatch, kind
):
    """`--ckpt_path last`: Lightning finds the file itself, after the model and data are built."""
    monkeypatch.setattr(sys, "argv", ["seqtasks"])
    last = tmp_path / "checkpoints" / "last.ckpt"  # where a run without a logger keeps it
    last.parent.mkdir()
    if kind == "parsing checkpoint":
        shutil.copyfile(checkpoints["parsing"], last)
        message = f"{last}: not a translation checkpoint (task: parsing)"
    else:
        path, problem = damaged(checkpoints["translation"], tmp_path, kind)
        path.replace(last)
        message = f"{last} is not a readable PyTorch checkpoint: {problem}"
    with pytest.raises(SystemExit) as stop:
        seqtasks_main(
            ["fit", "--config", str(REPO / "configs/translation/rnn_bahdanau.yaml")]
            + ["--data.init_args.data_dir", str(toy_data_dir), "--trainer.logger", "false"]
            + ["--trainer.default_root_dir", str(tmp_path), "--ckpt_path", "last"]
        )
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].startswith(f"error: {message}")


# ---- numbers and files on the command line ----------------------------------------------------
ARGUMENT_ERRORS = [
    ("apps/translate.py", ["--beam", "0"], "--beam: must be a positive integer, got 0"),
    ("apps/translate.py", ["--max-length", "0"], "--max-length: must be a positive integer, got 0"),
    (
        "apps/translate.py",
        ["--max-length", "-5"],
        "--max-length: must be a positive integer, got -5",
    ),
    ("apps/translate.py", ["--max-tokens", "0"], "--max-tokens: must be a positive integer, got 0"),
    (
        "apps/translate.py",
        ["--beam", "2", "--n-best", "3"],
        "--n-best: must be at most --beam (2), got 3",
    ),
    ("apps/parse.py", ["--beam", "0"], "--beam: must be a positive integer, got 0"),
    ("apps/parse.py", ["--max-words", "0"], "--max-words: must be a positive integer, got 0"),
    ("apps/caption.py", ["x.png", "--beam", "0"], "--beam: must be a positive integer, got 0"),
    (
        "apps/caption.py",
        ["x.png", "--batch-size", "0"],
        "--batch-size: must be a positive integer, got 0",
    ),
    (
        "apps/average_checkpoints.py",
        ["a.ckpt", "--out", "b.ckpt", "--last", "0"],
        "--last: must be a positive integer, got 0",
    ),
    ("evaluate translation", ["--src", "{empty}"], "--src: {empty} is empty"),
    ("evaluate translation", ["--ref", "{empty}"], "--ref: {empty} is empty"),
    ("evaluate translation", ["--ref", ""], "--ref: needs a file name, got ''"),
    ("evaluate translation", ["--ref", "{folder}"], "--ref: {folder} is not a file"),
    (
        "evaluate translation",
        ["--src", "{folder}/nowhere"],
        "--src: no such file: {folder}/nowhere",
    ),
    ("evaluate translation", ["--beam", "0"], "--beam: must be a positive integer, got 0"),
    (
        "evaluate translation",
        ["--max-tokens", "0"],
        "--max-tokens: must be a positive integer, got 0",
    ),
    ("evaluate translation", ["--buckets", "20", "10"], "--buckets: must increase, got 20 10"),
    (
        "evaluate translation",
        ["--buckets", "0", "10"],
        "--buckets: must be a positive integer, got 0",
    ),
    ("evaluate parsing", ["--beam", "0"], "--beam: must be a positive integer, got 0"),
    ("evaluate parsing", ["--buckets", "10", "10"], "--buckets: must increase, got 10 10"),
    (
        "evaluate captioning",
        ["--batch-size", "0"],
        "--batch-size: must be a positive integer, got 0",
    ),
    ("evaluate captioning", ["--beam", "none"], "--beam: must be a positive integer, got none"),
    (
        "evaluate captioning",
        ["--test-images", "-1"],
        "--test-images: must be an integer >= 0, got -1",
    ),
    (
        "data_prep/multi30k.py",
        ["--vocab-size", "0"],
        "--vocab-size: must be a positive integer, got 0",
    ),
    (
        "data_prep/shards.py",
        ["--source", ".", "--shard-size", "0"],
        "--shard-size: must be a positive integer, got 0",
    ),
    (
        "data_prep/shards.py",
        ["--source", ".", "--max-length", "0"],
        "--max-length: must be a positive integer, got 0",
    ),
    ("data_prep/shapes.py", ["--train", "-1"], "--train: must be an integer >= 0, got -1"),
    (
        "data_prep/shapes.py",
        ["--image-size", "0"],
        "--image-size: must be a positive integer, got 0",
    ),
]


@pytest.mark.parametrize(
    "script, args, message",
    ARGUMENT_ERRORS,
    ids=[f"{s} {' '.join(a)}" for s, a, _ in ARGUMENT_ERRORS],
)
def test_bad_numbers_and_files_are_argument_errors(call, tmp_path, script, args, message):
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "text.txt").write_text("Ein Hund.\n")
    names = {"empty": tmp_path / "empty.txt", "folder": tmp_path}
    args = [arg.format(**names) for arg in args]
    model = tmp_path / "model.ckpt"  # there, so that the argument at fault is the one refused
    model.touch()
    if script.startswith("evaluate"):
        task = script.split()[1]
        given = {
            "translation": ["--checkpoint", str(model)]
            + ["--src", str(tmp_path / "text.txt"), "--ref", str(tmp_path / "text.txt")],
            "parsing": ["--gold", "gold.mrg", "--pred", "pred.mrg"],
            "captioning": ["--checkpoint", str(model), "--source", "photos"],
        }[task]
        script, args = "apps/evaluate.py", [task, *given, *args]
    elif script in ("apps/translate.py", "apps/parse.py", "apps/caption.py"):
        args = [*args, "--checkpoint", str(model)]
    status, _, err = call(script, *args)
    assert status == 2
    assert f"error: argument {message.format(**names)}\n" in err


# ---- configs -----------------------------------------------------------------------------------
CONFIG_ERRORS = {
    "unknown key in the YAML": (
        ("max_tokens: 4096", "max_tokens: 4096\n    max_tokenz: 5"),
        [],
        "data.init_args.max_tokenz: not a parameter of seqtasks.translation.data.TranslationData",
    ),
    "wrong type in the YAML": (
        ("max_tokens: 4096", "max_tokens: many"),
        [],
        "data.init_args.max_tokens: expected an int, got 'many'",
    ),
    "wrong type on the command line": (
        None,
        ["--model.init_args.val_beam", "wide"],
        "model.init_args.val_beam: expected an int, got 'wide'",
    ),
    "unknown key on the command line": (
        None,
        ["--model.init_args.bogus", "1"],
        "model.init_args.bogus: not a parameter of seqtasks.translation.task.TranslationTask",
    ),
    "wrong type deep inside": (
        ("hidden_size: 512", "hidden_size: big"),
        [],
        "model.init_args.decoder.init_args.hidden_size: expected an int, got 'big'",
    ),
    "unknown key deep inside": (
        ("readout_dim: 256", "readout_dimm: 256"),
        [],
        "model.init_args.decoder.init_args.readout_dimm: not a parameter of "
        "seqtasks.decoders.BahdanauDecoder",
    ),
    "unknown key of a callback": (
        ("patience: 4", "patienc: 4"),
        [],
        "trainer.callbacks[EarlyStopping].init_args.patienc: not a parameter of "
        "lightning.pytorch.callbacks.EarlyStopping",
    ),
    "wrong type of an optimizer argument": (
        ("lr: 0.002", "lr: fast"),
        [],
        "model.init_args.optimizer.init_args.lr: expected a float, got 'fast'",
    ),
    "unknown trainer option": (
        ("max_epochs: 25", "max_epochz: 25"),
        [],
        "trainer.max_epochz: no such option",
    ),
    "wrong type of a trainer option": (
        None,
        ["--trainer.max_epochs", "lots"],
        "trainer.max_epochs: expected an int, got 'lots'",
    ),
    "misspelt class_path": (
        ("seqtasks.translation.data.TranslationData", "seqtasks.data.TranslationDat"),
        [],
        "data.class_path: cannot use 'seqtasks.data.TranslationDat': module 'seqtasks.data' "
        "has no attribute 'TranslationDat'",
    ),
    "YAML syntax": (
        ("seed_everything: 1", "seed_everything: [1"),
        [],
        "the config is not valid YAML at line {next_line}, column {column}: did not find "
        "expected ',' or ']'",
    ),
}


@pytest.mark.parametrize("where", ["yaml", "command line"])
@pytest.mark.parametrize("split", ["train", "holdout"])
def test_a_setting_renamed_since_0_1_is_answered_with_its_new_name(
    where, split, tmp_path, capsys, monkeypatch
):
    """ShapesData's `num_train…` of 0.1 are `counts.train…` now (`seqtasks.old_names`)."""
    monkeypatch.setattr(sys, "argv", ["seqtasks"])
    args = ["--config", str(REPO / "configs/captioning/shapes_soft.yaml")]
    if where == "yaml":
        old = tmp_path / "old.yaml"
        old.write_text(f"data:\n  init_args:\n    num_{split}: 64\n")
        args += ["--config", str(old)]
    else:
        args += [f"--data.init_args.num_{split}", "64"]
    with pytest.raises(SystemExit) as stop:
        seqtasks_main(["fit", *args])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[0] == (
        f"error: data.init_args.num_{split}: renamed to data.init_args.counts.{split} in "
        "seqtasks 0.2 (CHANGELOG.md)"
    )


@pytest.mark.parametrize("edit, args, message", CONFIG_ERRORS.values(), ids=CONFIG_ERRORS)
def test_config_errors_say_first_which_key_is_wrong_and_why(
    tmp_path, capsys, monkeypatch, edit, args, message
):
    monkeypatch.setattr(sys, "argv", ["seqtasks"])  # the arguments are `args`, not pytest's
    config = (REPO / "configs/translation/rnn_bahdanau.yaml").read_text()
    if edit is not None:
        assert edit[0] in config
        config = config.replace(*edit)
    (tmp_path / "config.yaml").write_text(config)
    with pytest.raises(SystemExit) as stop:
        seqtasks_main(["fit", "--config", str(tmp_path / "config.yaml"), *args])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    if "{next_line}" in message:  # YAML finds the bracket unclosed at the next line's colon
        number = config.splitlines().index(edit[1]) + 2
        column = config.splitlines()[number - 1].index(":") + 1
        message = message.format(next_line=number, column=column)
    assert err.splitlines()[0] == f"error: {message}"
    assert "Traceback" not in err and "usage:" not in err


@pytest.mark.parametrize(
    "config, prepare",
    [
        ("translation/rnn_bahdanau.yaml", "python data_prep/multi30k.py --out {folder}"),
        ("parsing/lstm_attention_fast.yaml", "python data_prep/ptb.py --out {folder}"),
    ],
)
def test_seqtasks_names_data_that_was_not_prepared(tmp_path, capsys, monkeypatch, config, prepare):
    """A valid config whose data folder holds no prepared data: the DataModule's own message,
    which names the missing file and the preparation step, not jsonargparse's tracebacks."""
    monkeypatch.setattr(sys, "argv", ["seqtasks"])
    folder = tmp_path / "not-prepared"
    with pytest.raises(SystemExit) as stop:
        seqtasks_main(
            ["fit", "--config", str(REPO / "configs" / config)]
            + ["--data.init_args.data_dir", str(folder)]
        )
    assert stop.value.code == 2
    err = capsys.readouterr().err
    (line,) = [line for line in err.splitlines() if line.startswith("error: ")]
    assert f"{folder}/" in line and prepare.format(folder=folder) in line
    assert "Traceback" not in err


# ---- downloads: https only, pinned checksums, a cache keyed by URL ------------------------------
@pytest.fixture
def served(monkeypatch) -> dict[str, bytes]:
    """{url: bytes} that `seqtasks.io.downloads` gets instead of going to the network; the URLs
    it asked for are in `served["asked"]`, in order."""
    files: dict = {"asked": []}

    def open_url(url: str) -> io.BytesIO:
        files["asked"].append(url)
        return io.BytesIO(files[url])

    monkeypatch.setattr(downloads, "open_url", open_url)
    return files


@pytest.mark.parametrize(
    "script, source, message",
    [
        (
            "data_prep/multi30k.py",
            "http://example.org/raw",
            "cannot read train.de from http://example.org/raw: refusing to download "
            "http://example.org/raw/train.de.gz: only https:// URLs are fetched",
        ),
        (
            "data_prep/ptb.py",
            "http://example.org/treebank.zip",
            "cannot read http://example.org/treebank.zip: refusing to download "
            "http://example.org/treebank.zip: only https:// URLs are fetched",
        ),
        (
            "data_prep/captions.py",
            "ftp://example.org/Flickr8k_text.zip",
            "refusing to download ftp://example.org/Flickr8k_text.zip: only https:// URLs",
        ),
    ],
)
def test_data_prep_refuses_urls_that_are_not_https(call, served, tmp_path, script, source, message):
    status, _, err = call(script, "--source", source, "--out", str(tmp_path / "out"))
    assert status != 0 and f"error: {message}" in err
    assert served["asked"] == [] and not (tmp_path / "out").exists()


def test_the_pinned_multi30k_checksums_are_those_of_the_shared_copies(served, tmp_path):
    multi30k = load_script("data_prep/multi30k.py")
    shared = [
        url for url in multi30k.SHA256 if (SHARED / "multi30k" / url.rsplit("/")[-1]).is_file()
    ]
    assert len(shared) == 9, "de, en and fr of three splits are in ../shared/data/multi30k"
    for url in shared:
        served[url] = (SHARED / "multi30k" / url.rsplit("/")[-1]).read_bytes()
        assert downloads.download(url, tmp_path, multi30k.SHA256[url]).read_bytes() == served[url]
    text = multi30k.fetch(multi30k.DEFAULT_SOURCE, "val.en", tmp_path)  # from the cache now
    assert text == gzip.decompress(served[f"{multi30k.DEFAULT_SOURCE}/val.en.gz"])
    assert served["asked"] == shared


@pytest.mark.parametrize("script", ["data_prep/multi30k.py", "data_prep/ptb.py"])
def test_a_download_that_differs_from_its_pinned_checksum_is_refused(
    call, served, tmp_path, script
):
    module, out = load_script(script), tmp_path / "out"
    first = "/train.de.gz" if script == "data_prep/multi30k.py" else ""  # the first it fetches
    url = module.DEFAULT_SOURCE + first
    served[url] = b"not what was published"
    found = hashlib.sha256(served[url]).hexdigest()
    status, _, err = call(script, "--out", str(out))
    assert status == 1
    assert (
        f"{url}: the download's sha256 is {found}, but {module.SHA256[url]} was expected; it "
        "was not kept" in err
    )
    assert [p for p in out.rglob("*") if p.is_file()] == [], "nothing kept, nothing written"


def test_the_download_cache_is_keyed_by_url_not_by_file_name(served, tmp_path, capsys):
    first, second = "https://a.example/data/treebank.zip", "https://b.example/treebank.zip"
    served[first], served[second] = b"the first", b"the second"
    paths = [downloads.download(url, tmp_path, None) for url in (first, second, first)]
    assert paths[0] != paths[1] and paths[0] == paths[2]
    assert [path.name for path in paths] == ["treebank.zip"] * 3
    assert [path.read_bytes() for path in paths] == [b"the first", b"the second", b"the first"]
    assert served["asked"] == [first, second], "the second time, the first comes from the cache"
    err = capsys.readouterr().err
    found = hashlib.sha256(b"the second").hexdigest()
    assert f"warning: {second} has no pinned sha256; the file downloaded has sha256 {found}" in err


def test_a_cached_download_that_no_longer_matches_its_pin_is_fetched_again(served, tmp_path):
    url = "https://example.org/corpus.gz"
    served[url] = b"the published corpus"
    pinned = hashlib.sha256(served[url]).hexdigest()
    path = downloads.download(url, tmp_path, pinned)
    path.write_bytes(b"damaged on disk")
    assert downloads.download(url, tmp_path, pinned).read_bytes() == b"the published corpus"
    assert served["asked"] == [url, url]


# ---- temporary files of killed writers ----------------------------------------------------------
def test_a_checkpoint_cut_short_by_a_kill_is_invisible_and_removed_at_the_next_save(
    tmp_path, child_env
):
    folder = tmp_path / "checkpoints"
    writer = subprocess.Popen(  # writes last.ckpt through open_atomic, and is killed mid-write
        [sys.executable, "-c", WRITE_AND_WAIT, str(folder / "last.ckpt")],
        stdout=subprocess.PIPE,
        env=child_env | {"PYTHONPATH": str(REPO)},
    )
    assert writer.stdout.readline() == b"writing\n"
    writer.kill()
    writer.wait()
    (left,) = folder.iterdir()
    assert left.name.startswith(".last.ckpt.") and left.stat().st_size > 0
    assert list(folder.glob("*.ckpt")) == [] and list(folder.glob("last*")) == []
    AtomicCheckpointIO().save_checkpoint({"global_step": 1}, folder / "epoch0.ckpt")
    assert [path.name for path in folder.iterdir()] == ["epoch0.ckpt"]
    assert torch.load(folder / "epoch0.ckpt", weights_only=True) == {"global_step": 1}


WRITE_AND_WAIT = """
import sys, time
from seqtasks.io.files import open_atomic
with open_atomic(sys.argv[1]) as f:
    f.write(b"half a checkpoint")
    f.flush()
    print("writing", flush=True)
    time.sleep(60)
"""


def test_only_temporaries_of_dead_processes_of_this_machine_are_removed(tmp_path):
    finished = subprocess.Popen([sys.executable, "-c", ""])
    finished.wait()
    dead = finished.pid
    own = temporary_path(tmp_path / "last.ckpt").name  # .last.ckpt.HOST-PID.tmp.ckpt
    host = own.removeprefix(".last.ckpt.").rsplit("-", 1)[0]
    names = {
        "running": f".last.ckpt.{host}-{os.getpid()}.tmp",
        "dead": f".last.ckpt.{host}-{dead}.tmp",
        "dead, with a format suffix": f".map.png.{host}-{dead}.tmp.png",
        "dead, of an earlier version": f".epoch3.ckpt.{dead}.tmp.ckpt",
        "of another machine": f".last.ckpt.elsewhere-{dead}.tmp",
        "a file of the user's": f".notes.{dead}.tmp",
        "a checkpoint": "last.ckpt",
    }
    for name in names.values():
        (tmp_path / name).write_bytes(b"")
    removed = remove_stale_temporaries(tmp_path)
    stale = [key for key in names if key.startswith("dead")]
    assert sorted(path.name for path in removed) == sorted(names[key] for key in stale)
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(
        name for key, name in names.items() if key not in stale
    )


def test_figures_keep_their_format_through_the_temporary_file(tmp_path):
    path = plot_bleu_by_length({"model": [("1-10", 30.0), ("11+", 20.0)]}, tmp_path / "bleu.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["bleu.png"]


# ---- data_prep: a missing --source, bad files; nothing is written before all is read ------------
@pytest.mark.parametrize(
    "script, message",
    [
        (
            "data_prep/multi30k.py",
            "cannot read train.de from {source}: neither {source}/train.de.gz",
        ),
        ("data_prep/ptb.py", "cannot read {source}: no such folder or zip file: {source}"),
        ("data_prep/captions.py", "no such source: {source}"),
    ],
)
def test_data_prep_names_a_missing_source(call, tmp_path, script, message):
    source, out = tmp_path / "nowhere", tmp_path / "out"
    status, _, err = call(script, "--source", str(source), "--out", str(out))
    assert status != 0 and f"error: {message.format(source=source)}" in err
    assert not out.exists()


@pytest.mark.parametrize(
    "case, message",
    [
        ("invalid_utf8", "{source}/val.en:2: invalid UTF-8 at byte 4 of the line"),
        ("misaligned", "misaligned parallel files: val.de has 3 lines but val.en has 2"),
    ],
)
def test_multi30k_prep_checks_every_file_before_replacing_any(
    multi30k_lines, call, tmp_path, case, message
):
    source, out = tmp_path / "source", tmp_path / "out"
    source.mkdir()
    for split, start in (("train", 0), ("val", 100), ("test_2016_flickr", 200)):
        for lang in ("de", "en"):
            lines = multi30k_lines[lang][start : start + 3]
            (source / f"{split}.{lang}").write_text("".join(line + "\n" for line in lines))
    if case == "invalid_utf8":
        (source / "val.en").write_bytes(b"A dog.\nA do\xe9g.\nA cat.\n")
    else:
        (source / "val.en").write_text("A dog.\nA cat.\n")
    out.mkdir()
    (out / "train.de").write_text("an earlier, good corpus\n")
    status, _, err = call("data_prep/multi30k.py", "--source", str(source), "--out", str(out))
    assert status == 1 and f"error: {message.format(source=source)}" in err
    assert [p.name for p in out.iterdir()] == ["train.de"]
    assert (out / "train.de").read_text() == "an earlier, good corpus\n"


def test_ptb_prep_names_an_unreadable_tree_and_writes_nothing(call, tmp_path):
    source, out = tmp_path / "wsj", tmp_path / "out"
    source.mkdir()
    raw = (SHARED / "ptb_sample" / "wsj_0001.mrg").read_text()
    (source / "wsj_0001.mrg").write_text(raw + "( (S\n    (NP (NN a))\n")
    status, _, err = call("data_prep/ptb.py", "--source", str(source), "--out", str(out))
    first_line = raw.count("\n") + 1
    assert status == 1
    assert f"{source / 'wsj_0001.mrg'}: tree 3 (line {first_line}): unbalanced brackets" in err
    assert not out.exists()


@pytest.mark.parametrize(
    "content, message",
    [
        (b"a.jpg#0\tA dog.\nb.jpg#0\tA caf\xe9.\n", "Flickr8k.token.txt:2: invalid UTF-8"),
        (
            b"a.jpg#0\tA dog.\n\nb.jpg#0 A cat.\n",
            "Flickr8k.token.txt:3: expected 'image#n<TAB>caption'",
        ),
    ],
)
def test_captions_prep_names_the_bad_line_of_a_flickr8k_token_file(
    call, tmp_path, content, message
):
    source, out = tmp_path / "flickr", tmp_path / "out"
    (source / "Flicker8k_Dataset").mkdir(parents=True)
    (source / "Flickr8k.token.txt").write_bytes(content)
    status, _, err = call("data_prep/captions.py", "--source", str(source), "--out", str(out))
    assert status == 2 and f"error: {source / message}" in err
    assert not out.exists()
