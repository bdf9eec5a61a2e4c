"""A parser that reads a tokeniser's pieces (to start from a pre-trained encoder) and parses
words all the same: each word's pieces its own, one annotation per word (its first piece's),
trees and scores over the original words; stored, exported and fine-tuned like any parser."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from conftest import REPO, write_monolingual

import seqtasks
from seqtasks.cli.main import main
from seqtasks.data.tokenizer import EOS_ID, PAD_ID
from seqtasks.io.checkpoint_files import read_checkpoint
from seqtasks.layers.memory import Memory
from seqtasks.parsing.data import ParsingData
from seqtasks.parsing.pieces import SourcePieces, first_pieces
from seqtasks.parsing.trees import read_treebank
from seqtasks.parsing.vocabulary import ParsingVocabulary


@pytest.fixture(scope="module")
def english(toy_tokenizers, tmp_path_factory) -> Path:
    """The toy English sentencepiece model (250 pieces of Multi30k), as a file."""
    path = tmp_path_factory.mktemp("spm") / "spm.model"
    path.write_bytes(toy_tokenizers[1].proto)
    return path


@pytest.fixture(scope="module")
def data(ptb_dir, english) -> ParsingData:
    module = ParsingData(str(ptb_dir), source_tokenizer=str(english), word_dropout=0.0)
    module.setup("fit")
    return module


def test_each_word_reads_as_its_own_pieces_and_its_first_marks_the_word(toy_tokenizers, ptb_dir):
    tokenizer = toy_tokenizers[1]
    source = SourcePieces(tokenizer.proto)
    words = read_treebank(ptb_dir / "dev.mrg")[0].leaves()
    ids = source.encode_words(words)
    assert ids == [i for w in words for i in tokenizer.encode(w)]
    assert len(ids) > len(words)  # some word takes several pieces
    starts = source.starts[torch.tensor(ids)]
    assert int(starts.sum()) == len(words)
    assert [bool(source.starts[i]) for i in (EOS_ID, PAD_ID)] == [True, False]
    firsts = [source.pieces([i])[0] for i, s in zip(ids, starts) if s]
    assert [p.lstrip("▁") for p in firsts] == [
        tokenizer.pieces(tokenizer.encode(w))[0].lstrip("▁") for w in words
    ]


def test_a_word_tokeniser_reads_an_unknown_word_as_one_unknown_piece(
    toy_tokenizers, ptb_dir, multi30k_lines
):
    """A tokeniser of whole words (`monolingual.py --model-type word`) has no piece inside a
    word: a word it lacks is one `<unk>`, which stands for the word. A subword tokeniser's
    `<unk>` may sit inside a word, so it never starts one there."""
    from seqtasks.data.tokenizer import UNK_ID, train_sentencepiece

    words = train_sentencepiece(multi30k_lines["en"][:300], 300, "word")
    source = SourcePieces(words.proto)
    ids = source.encode_words(["a", "man", "Vinken", "."])
    assert ids[2] == UNK_ID and len(ids) == 4 and bool(source.starts[torch.tensor(ids)].all())
    assert not SourcePieces(toy_tokenizers[1].proto).starts[UNK_ID]
    leaves = read_treebank(ptb_dir / "dev.mrg")[0].leaves()
    assert len(source.encode_words(leaves)) == len(leaves)  # one position a word


def test_a_word_whose_pieces_lose_its_start_is_refused_by_name(toy_tokenizers, monkeypatch):
    source = SourcePieces(toy_tokenizers[1].proto)
    inside = next(i for i, p in enumerate(source.tokens) if i > EOS_ID and p[0] != "▁")
    monkeypatch.setattr(source.tokenizer, "encode", lambda word: [inside])
    with pytest.raises(ValueError, match=r"reads the word 'walks' as \[.*add_dummy_prefix"):
        source.encode_words(["walks"])


def test_first_pieces_keeps_each_words_first_annotation_in_order():
    torch.manual_seed(0)
    states = torch.randn(3, 6, 4)
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 0]]).bool()
    starts = torch.tensor([[1, 0, 1, 1, 0, 1], [1, 1, 1, 1, 0, 1], [1, 0, 0, 1, 1, 1]]).bool()
    memory = Memory(states, mask, torch.randn(3, 4))
    pooled = first_pieces(memory, starts)
    kept = [[j for j in range(6) if starts[b, j] and mask[b, j]] for b in range(3)]
    assert pooled.mask.tolist() == [[True] * len(k) + [False] * (4 - len(k)) for k in kept]
    for b, positions in enumerate(kept):  # by hand: the states of the kept positions
        assert pooled.states[b, : len(positions)].equal(states[b, positions])
        assert not pooled.states[b, len(positions) :].any()
    assert pooled.summary is memory.summary


def test_the_data_reads_pieces_and_keeps_the_words_and_trees(data, ptb_dir):
    words = ParsingData(str(ptb_dir))
    words.setup("fit")
    assert data.src_vocab_size == 250 and data.vocabulary.tokenizer_proto is not None
    assert data.vocabulary.target.tokens == words.vocabulary.target.tokens
    for i in range(5):
        (_, mine), (_, theirs) = data.datasets["validate"][i], words.datasets["validate"][i]
        assert (mine.words, mine.tree, mine.tgt) == (theirs.words, theirs.tree, theirs.tgt)
        assert mine.src == data.vocabulary.source.encode_words(mine.words.split())
        assert mine.unknown == mine.src and set(mine.drop) == {0.0}


@pytest.mark.parametrize(
    ("setting", "said"),
    [
        ({}, r"data\.init_args\.word_dropout 0\.25 reads rare words .* set it to 0"),
        ({"word_dropout": 0.0, "reverse": True}, r"data\.init_args\.reverse: .* in order"),
    ],
    ids=["word_dropout", "reverse"],
)
def test_settings_that_pieces_cannot_keep_are_refused(ptb_dir, english, setting, said):
    with pytest.raises(ValueError, match=said):
        ParsingData(str(ptb_dir), source_tokenizer=str(english), **setting)
    with pytest.raises(FileNotFoundError, match=r"source_tokenizer .*x\.model not found"):
        ParsingData(str(ptb_dir), source_tokenizer=str(english.parent / "x.model"), word_dropout=0)


def test_the_vocabulary_keeps_its_tokeniser_in_json_and_a_word_vocabulary_as_before(data):
    stored = json.loads(json.dumps(data.vocabulary.as_dict()))
    back = ParsingVocabulary.from_dict(stored)
    assert back.tokenizer_proto == data.vocabulary.tokenizer_proto
    assert back.source.encode("Mr. Vinken is chairman .") == data.vocabulary.source.encode(
        "Mr. Vinken is chairman ."
    )
    words = ParsingVocabulary(["<pad>", "<unk>", "<s>", "</s>", "the"], ["<pad>"], False, False)
    assert set(words.as_dict()) == {"words", "tokens", "tags", "reverse"}  # fingerprints kept


# ---- trained: a tiny Transformer parser over pieces, pre-trained or not ---------------------
TINY = {"d_model": 32, "num_heads": 2, "num_layers": 1, "ff_dim": 64, "dropout": 0.0}


def layers(part: str) -> list[str]:
    return [f"--model.init_args.{part}.init_args.{k}={v}" for k, v in TINY.items()]


def fit_parser(ptb_dir: Path, english: Path, root: Path, *extra: str) -> Path:
    """configs/parsing/transformer.yaml shrunk, over `english`'s pieces, fitted 3 steps; its
    last checkpoint."""
    main(
        [
            "fit",
            "--config",
            str(REPO / "configs/parsing/transformer.yaml"),
            *layers("encoder"),
            *layers("decoder"),
            f"--data.init_args.data_dir={ptb_dir}",
            f"--data.init_args.source_tokenizer={english}",
            "--data.init_args.word_dropout=0",
            "--data.init_args.max_tokens=512",
            "--trainer.max_steps=3",
            "--trainer.val_check_interval=3",
            "--trainer.limit_val_batches=2",
            f"--trainer.default_root_dir={root}",
            *extra,
        ]
    )
    (last,) = root.rglob("last.ckpt")
    return last


@pytest.fixture(scope="module")
def english_mlm(ptb_dir, english, tmp_path_factory) -> Path:
    """A tiny masked LM of the sample's training words, read with `english`: 6 steps."""
    root = tmp_path_factory.mktemp("english_mlm")
    lines = [" ".join(t.leaves()) for t in read_treebank(ptb_dir / "train.mrg")[:300]]
    write_monolingual(root, lines[:280], lines[280:])
    main(
        [
            "fit",
            "--config",
            str(REPO / "configs/pretraining/mlm.yaml"),
            *layers("encoder"),
            f"--data.init_args.data_dir={root}",
            f"--data.init_args.tokenizer={english}",
            "--data.init_args.max_tokens=512",
            "--trainer.max_steps=6",
            "--trainer.val_check_interval=6",
            f"--trainer.default_root_dir={root / 'run'}",
        ]
    )
    (last,) = (root / "run").rglob("last.ckpt")
    return last


@pytest.mark.slow
def test_a_parser_over_pieces_parses_words_stores_and_exports_alike(
    ptb_dir, english, tmp_path, run_command
):
    checkpoint = fit_parser(ptb_dir, english, tmp_path / "fit")
    parser = seqtasks.load(checkpoint)
    gold = read_treebank(ptb_dir / "dev.mrg")[:6]
    sentences = [g.leaves() for g in gold]
    src = torch.tensor([parser.task.vocabulary.source.encode_words(sentences[0]) + [EOS_ID]])
    with torch.no_grad():
        memory = parser.task.encode_source(src, src != PAD_ID)
    assert memory.states.shape[1] == len(sentences[0]) + 1 < src.size(1)
    parses = parser.parse(sentences, beam=3)
    assert [p.tree.leaves() for p in parses] == sentences
    assert all(p.repairs == 0 for p in parses)
    code, _, err = run_command(
        "export", str(checkpoint), str(tmp_path / "folder"), "--to", "folder"
    )
    assert code == 0, err
    again = seqtasks.load(tmp_path / "folder").parse(sentences, beam=3)
    assert [p.tree for p in again] == [p.tree for p in parses]


@pytest.mark.slow
def test_a_parser_starts_from_an_encoder_pre_trained_on_its_pieces(
    ptb_dir, english, english_mlm, tmp_path
):
    """Frozen for longer than the fit, the parser's encoder is the masked LM's, bit for bit."""
    checkpoint = fit_parser(
        ptb_dir,
        english,
        tmp_path,
        f"--model.init_args.pretrained_encoder={english_mlm}",
        "--model.init_args.frozen_encoder_steps=100",
    )
    state = read_checkpoint(checkpoint)["state_dict"]
    start = read_checkpoint(english_mlm)["state_dict"]
    encoder = [k for k in state if k.startswith("encoder.")]
    assert encoder and all(state[k].equal(start[k]) for k in encoder)


@pytest.mark.slow
def test_a_parser_reading_other_pieces_than_the_pre_trained_encoder_is_refused(
    ptb_dir, multi30k_lines, english_mlm, tmp_path, capsys
):
    from seqtasks.data.tokenizer import train_sentencepiece

    other = tmp_path / "spm.model"  # as many English pieces, learnt from other sentences
    other.write_bytes(train_sentencepiece(multi30k_lines["en"][300:600], 250).proto)
    with pytest.raises(SystemExit) as exit:
        fit_parser(ptb_dir, other, tmp_path, f"--model.init_args.pretrained_encoder={english_mlm}")
    assert exit.value.code == 2
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    assert re.search(r"reads with another tokeniser than the data \(source tokenizer", line), line
    assert not list(tmp_path.rglob("*.ckpt"))


@pytest.mark.slow
def test_a_parser_reading_words_cannot_start_from_a_pre_trained_encoder(
    ptb_dir, english_mlm, tmp_path, capsys
):
    with pytest.raises(SystemExit) as exit:
        main(
            [
                "fit",
                "--config",
                str(REPO / "configs/parsing/transformer.yaml"),
                *layers("encoder"),
                *layers("decoder"),
                f"--data.init_args.data_dir={ptb_dir}",
                f"--model.init_args.pretrained_encoder={english_mlm}",
                "--trainer.max_steps=1",
                f"--trainer.default_root_dir={tmp_path}",
            ]
        )
    assert exit.value.code == 2
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    assert "ParsingData gives no source tokeniser that a pre-trained encoder" in line, line
