"""Bad input, across the board: each case gets a message naming the file, line or field, and
no output file is lost or half written. Cases tested elsewhere are listed in docs/bad_input.md;
these are the rest. The apps and data_prep scripts run in process, on tiny untrained models."""

from __future__ import annotations

import csv
import io
import logging
import shutil
import sys
from pathlib import Path
from types import ModuleType

import lightning as L
import pytest
import torch
from conftest import REPO, flickr8k_subset, load_script, write_toy_corpus
from lightning.pytorch.cli import instantiate_module

from seqtasks.cli import main as seqtasks_main
from seqtasks.data import CaptionData, ParsingData, TranslationData
from seqtasks.data.parsing import ParsingVocabulary
from seqtasks.data.words import WordTokenizer
from seqtasks.linearisation import linearise
from seqtasks.tasks import CaptioningTask, ParsingTask, TranslationTask
from seqtasks.trees import clean_tree, read_treebank, to_line

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


# ---- running the scripts in process -------------------------------------------------------------
@pytest.fixture(scope="module")
def scripts() -> dict[str, ModuleType]:
    paths = ["apps/translate.py", "apps/parse.py", "apps/caption.py", "apps/evaluate.py"]
    paths += ["data_prep/multi30k.py", "data_prep/ptb.py", "data_prep/captions.py"]
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


def save_checkpoint(task_class: type[L.LightningModule], hparams: dict, prepare, path: Path):
    """An untrained `task_class` model built from CLI-style `hparams`, given its vocabulary by
    `prepare(model)`, saved with what `load_from_checkpoint` needs."""
    model = instantiate_module(task_class, hparams)
    prepare(model)
    checkpoint = {
        "state_dict": model.state_dict(),
        "hyper_parameters": {
            **hparams,
            "_instantiator": "lightning.pytorch.cli.instantiate_module",
        },
        "pytorch-lightning_version": L.__version__,
    }
    model.on_save_checkpoint(checkpoint)
    torch.save(checkpoint, path)
    return path


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
    vocabulary = ParsingVocabulary.build(sample_trees(3), tags=False, reverse=False, min_count=1)
    words = WordTokenizer(["a", "dog", "runs"])
    return {
        "translation": save_checkpoint(
            TranslationTask,
            {"_class_path": "seqtasks.tasks.TranslationTask", "encoder": RNN, "decoder": LUONG}
            | sizes,
            lambda model: model.set_tokenizers(src, tgt),
            folder / "translation.ckpt",
        ),
        "parsing": save_checkpoint(
            ParsingTask,
            {"_class_path": "seqtasks.tasks.ParsingTask", "encoder": RNN, "decoder": LUONG}
            | {"src_vocab_size": len(vocabulary.words), "tgt_vocab_size": len(vocabulary.tokens)},
            lambda model: model.set_vocabulary(vocabulary),
            folder / "parsing.ckpt",
        ),
        "captioning": save_checkpoint(
            CaptioningTask,
            {"_class_path": "seqtasks.tasks.CaptioningTask", "encoder": CONV, "decoder": SOFT}
            | {"tgt_vocab_size": words.vocab_size, "max_caption_length": 4},
            lambda model: model.set_preprocessing(words, 32),
            folder / "captioning.ckpt",
        ),
    }


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
    kept = {image.name: image.captions for images in data.splits.values() for image in images}
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
    assert "skipped 1 of 4 training captions with more than max_length 3 words" in caplog.text


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


@pytest.mark.parametrize("problem", ["missing", "corrupt"])
def test_evaluate_captioning_names_an_unreadable_image(checkpoints, call, tmp_path, problem):
    folder = caption_folder(tmp_path)
    test_image = folder / "images" / photo(folder, 4)  # the last image: the test split
    if problem == "missing":
        test_image.unlink()
    else:
        test_image.write_bytes(b"\xff\xd8 not really a JPEG")
    status, _, err = call(
        *("apps/evaluate.py", "captioning", "--checkpoint", str(checkpoints["captioning"])),
        *("--source", str(folder), "--val-images", "1", "--test-images", "1", "--no-meteor"),
        *("--device", "cpu"),
    )
    assert status == 2 and f"error: cannot read image {test_image}" in err


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


# ---- configs -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "edit, args, message",
    [
        (
            ("max_tokens: 4096", "max_tokens: 4096\n    max_tokenz: 5"),
            [],
            "'max_tokenz' is not accepted",
        ),
        (("max_tokens: 4096", "max_tokens: many"), [], 'key "max_tokens":\n'),
        (None, ["--model.init_args.val_beam", "wide"], 'key "val_beam":\n'),
    ],
    ids=["unknown key in the YAML", "wrong type in the YAML", "wrong type on the command line"],
)
def test_configs_with_unknown_keys_or_wrong_types_get_the_cli_error(
    tmp_path, capsys, monkeypatch, edit, args, message
):
    monkeypatch.setattr(sys, "argv", ["seqtasks"])  # the arguments are `args`, not pytest's
    config = (REPO / "configs/translation/rnn_bahdanau.yaml").read_text()
    if edit is not None:
        config = config.replace(*edit)
    (tmp_path / "config.yaml").write_text(config)
    with pytest.raises(SystemExit) as stop:
        seqtasks_main(["fit", "--config", str(tmp_path / "config.yaml"), *args])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "error: Parser key" in err and message in err
    assert "Traceback" not in err


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
