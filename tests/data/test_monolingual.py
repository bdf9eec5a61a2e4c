"""data_prep/monolingual.py: the Brown corpus and CoNLL-2000's WSJ text as NLTK's own readers
read them, and no line of a held-out split in what it writes."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import _require, load_script, prepare_ptb

monolingual = load_script("data_prep/monolingual.py")


@pytest.fixture(scope="module")
def zips(shared_data: Path) -> Path:
    return _require(shared_data / "monolingual", "the monolingual zips")


@pytest.fixture(scope="module")
def nltk_sentences(zips: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """Every sentence of each corpus as NLTK's corpus readers give it (`brown.sents()`,
    `conll2000.sents()`), from the zips unpacked where NLTK may read (`nltk.data.path`)."""
    import nltk
    from nltk.corpus.reader import ConllChunkCorpusReader, TaggedCorpusReader

    root = tmp_path_factory.mktemp("nltk")
    nltk.data.path.append(str(root))
    for corpus in monolingual.CORPORA:
        zipfile.ZipFile(zips / f"{corpus}.zip").extractall(root)
    brown = TaggedCorpusReader(str(root / "brown"), r"c[a-z]\d\d", encoding="ascii")
    conll = ConllChunkCorpusReader(
        str(root / "conll2000"), ["train.txt", "test.txt"], ("NP", "VP", "PP")
    )
    yield {"brown": [list(s) for s in brown.sents()], "conll2000": [list(s) for s in conll.sents()]}
    nltk.data.path.remove(str(root))


def written(out: Path) -> tuple[list[list[str]], list[list[str]]]:
    """train.txt's and val.txt's documents (blocks between empty lines), sentences as lines."""
    return tuple(
        [block.splitlines() for block in (out / f"{split}.txt").read_text().split("\n\n") if block]
        for split in ("train", "val")
    )


@pytest.fixture(scope="module")
def corpora_out(zips: Path, tmp_path_factory: pytest.TempPathFactory, toy_tokenizers) -> Path:
    """Both corpora prepared with a given tokeniser, checked against an empty task-data folder."""
    folder = tmp_path_factory.mktemp("mono")
    (folder / "spm.en.model").write_bytes(toy_tokenizers[1].proto)
    out = folder / "out"
    monolingual.main(
        [
            "--source",
            str(zips),
            "--task-data",
            str(folder / "none"),
            "--tokenizer",
            str(folder / "spm.en.model"),
            "--out",
            str(out),
        ]
    )
    return out


def test_the_corpora_are_every_sentence_nltks_readers_give_in_order(corpora_out, nltk_sentences):
    train, val = written(corpora_out)
    # blocks in corpus order are every 50th to val, the rest to train: put them back together
    blocks, t, v = [], iter(train), iter(val)
    for number in range(len(train) + len(val)):
        blocks.append(next(v) if number % 50 == 49 else next(t))
    sentences = [s.split() for block in blocks for s in block]
    expected = nltk_sentences["brown"] + nltk_sentences["conll2000"]
    assert len(nltk_sentences["brown"]) == 57_340 and len(nltk_sentences["conll2000"]) == 10_948
    assert sentences == expected
    sources = json.loads((corpora_out / "sources.json").read_text())
    assert sources["sentences"] == {"brown": 57_340, "conll2000": 10_948}
    assert sources["val"] == sum(map(len, val)) and 0.015 < sources["val"] / len(expected) < 0.025
    assert max(map(len, train + val)) == 100  # a block: at most 100 sentences of one document
    assert (corpora_out / "spm.model").read_bytes() == (
        corpora_out.parent / "spm.en.model"
    ).read_bytes()


def test_no_line_of_a_held_out_split_is_written(zips, tmp_path, toy_tokenizers):
    """A held-out file's line, tokenised otherwise, is dropped from a --text file and from the
    corpora, and counted; the prepared treebank's dev sentences are checked by default."""
    task_data = prepare_ptb(tmp_path / "data" / "ptb").parent
    dev = (task_data / "ptb" / "dev.txt").read_text().splitlines()
    brown_first = "The Fulton County Grand Jury said Friday an investigation of Atlanta's recent"
    (tmp_path / "gold").mkdir()
    (tmp_path / "gold" / "test.en").write_text(
        f"{brown_first} primary election produced ``no evidence'' that any irregularities "
        "took place.\n"
    )  # the Brown corpus' first sentence, detokenised
    text = tmp_path / "mine.txt"
    text.write_text(f"A sentence of my own .\n{dev[5]}\n\n{dev[7].upper()}\nAnother one .\n")
    (tmp_path / "spm.model").write_bytes(toy_tokenizers[1].proto)
    out = tmp_path / "out"
    monolingual.main(
        [
            "--source",
            str(zips),
            "--corpora",
            "brown",
            "--text",
            str(text),
            "--held-out",
            str(tmp_path / "gold" / "test.en"),
            "--task-data",
            str(task_data),
            "--tokenizer",
            str(tmp_path / "spm.model"),
            "--out",
            str(out),
        ]
    )
    train, val = written(out)
    lines = {s for block in train + val for s in block}
    assert not lines & set(dev)
    assert "A sentence of my own ." in lines and "Another one ." in lines
    assert not any(s.startswith("The Fulton County Grand Jury") for s in lines)
    sources = json.loads((out / "sources.json").read_text())
    assert sources["held_out_files"] == [
        str(tmp_path / "gold" / "test.en"),
        str(task_data / "ptb" / "dev.txt"),
    ]
    assert sources["dropped_as_held_out"] == 3 + dropped_by_dev(zips, dev)
    assert sources["sentences"][str(text)] == 4


def dropped_by_dev(zips: Path, dev: list[str]) -> int:
    """How many Brown sentences share their letters and digits with a treebank dev sentence,
    counted by hand here (short ones such as "Yes ." can)."""
    keys = {"".join(c for c in s.lower() if c.isalnum()) for s in dev}
    count = 0
    for document in monolingual.brown(zipfile.ZipFile(zips / "brown.zip")):
        count += sum("".join(c for c in s.lower() if c.isalnum()) in keys for s in document)
    return count


def test_a_text_file_named_as_a_held_out_split_is_refused(tmp_path, capsys):
    for name in ("test_2016_flickr.de", "dev.txt", "val.en", "holdout.txt"):
        (tmp_path / name).write_text("ein Satz .\n")
        with pytest.raises(SystemExit):
            monolingual.main(
                ["--corpora", "--text", str(tmp_path / name), "--out", str(tmp_path / "o")]
            )
        assert "is named as a held-out split" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_its_own_tokeniser_is_trained_on_train_txt_and_a_failure_replaces_nothing(
    tmp_path, zips, multi30k_lines
):
    text = tmp_path / "train.de"
    text.write_text("".join(f"{line}\n" for line in multi30k_lines["de"][:300]))
    out = tmp_path / "out"
    monolingual.main(
        [
            "--corpora",
            "--text",
            str(text),
            "--vocab-size",
            "200",
            "--task-data",
            str(tmp_path / "none"),
            "--out",
            str(out),
        ]
    )
    from seqtasks.data.tokenizer import SentencePieceTokenizer

    lines = [" ".join(line.split()) for line in text.read_text().splitlines()]  # 3 blocks
    assert written(out) == ([lines[:100], lines[100:200]], [lines[200:]])
    tokenizer = SentencePieceTokenizer.from_file(out / "spm.model")
    assert (
        tokenizer.vocab_size == 200 and tokenizer.decode(tokenizer.encode("Ein Hund")) == "Ein Hund"
    )
    before = {name: (out / name).read_bytes() for name in ("train.txt", "val.txt", "spm.model")}
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SystemExit, match=r"no .*brown\.zip"):
        monolingual.main(["--source", str(zips.parent / "no-such"), "--out", str(out)])
    (empty / "one.txt").write_text("Ein Satz .\n")
    with pytest.raises(SystemExit, match="too little text: 1 sentences"):
        monolingual.main(["--corpora", "--text", str(empty / "one.txt"), "--out", str(out)])
    with pytest.raises(SystemExit, match="no sentence is left"):
        monolingual.main(
            [
                "--corpora",
                "--text",
                str(text),
                "--held-out",
                str(text),
                "--task-data",
                str(empty),
                "--out",
                str(out),
            ]
        )
    assert {name: (out / name).read_bytes() for name in before} == before


def test_a_second_run_into_the_task_data_does_not_hold_out_its_own_validation(
    tmp_path, multi30k_lines
):
    """Written under --task-data (data/monolingual under data/, as by default), its own
    val.txt is not a held-out split of a task: a second run writes the same text."""
    text = tmp_path / "train.de"
    text.write_text("".join(f"{line}\n" for line in multi30k_lines["de"][:300]))
    out = tmp_path / "data" / "monolingual"
    args = ["--corpora", "--text", str(text), "--vocab-size", "200"]
    args += ["--task-data", str(tmp_path / "data"), "--out", str(out)]
    monolingual.main(args)
    first = written(out)
    monolingual.main(args)
    assert written(out) == first
    assert json.loads((out / "sources.json").read_text())["held_out_files"] == []


def test_a_word_tokeniser_reads_each_word_it_knows_as_one_piece(tmp_path, multi30k_lines):
    """--model-type word: a piece a word (whole, never split), and an unknown word is one
    unknown piece; a parser reading words through it keeps one position a word."""
    from seqtasks.data.tokenizer import UNK_ID, SentencePieceTokenizer

    text = tmp_path / "train.de"
    text.write_text("".join(f"{line}\n" for line in multi30k_lines["de"][:300]))
    out = tmp_path / "out"
    args = ["--corpora", "--text", str(text), "--model-type", "word", "--vocab-size", "300"]
    monolingual.main(args + ["--task-data", str(tmp_path / "none"), "--out", str(out)])
    tokenizer = SentencePieceTokenizer.from_file(out / "spm.model")
    sources = json.loads((out / "sources.json").read_text())
    assert sources["tokenizer"] == "trained, word, 300 pieces"
    words = "ein Mann und eine Frau Quantenchromodynamik".split()
    pieces = tokenizer.pieces(tokenizer.encode(" ".join(words)))
    assert pieces[:5] == [f"▁{word}" for word in words[:5]]
    assert tokenizer.encode(words[-1]) == [UNK_ID] and len(pieces) == len(words)
