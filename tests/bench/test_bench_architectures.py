"""bench/architectures.py's scoring: BLEU by source length, training tokens/s from the steps'
own clock, the best checkpoint by its monitored score, and the rows it trains."""

from __future__ import annotations

import sys

import pytest
import sacrebleu
from conftest import REPO

sys.path.append(str(REPO / "bench"))
from architectures import best_checkpoint, by_length, rows, tokens_per_second  # noqa: E402


def test_bleu_by_source_length_scores_each_bin_alone():
    sources = ["a b", "w " * 8, "a b c d e f g h i j", "one", "x " * 25]  # 8 words: 1-8
    hypotheses = ["the cat sat", "a red hat", "a dog ran far away", "the cat", "it is long"]
    references = ["the cat sat", "the red hat", "a dog ran away", "a cat", "it is very long"]
    scores = by_length(sources, hypotheses, references)
    assert {label: v["n"] for label, v in scores.items()} == {"1-8": 3, "9-12": 1, "21+": 1}
    short = sacrebleu.corpus_bleu(
        ["the cat sat", "a red hat", "the cat"], [["the cat sat", "the red hat", "a cat"]]
    ).score
    assert scores["1-8"]["bleu"] == pytest.approx(short)


def test_training_tokens_per_second_leaves_out_the_validation_pause():
    steps = [[0.0, 100], [1.0, 100], [2.0, 100], [30.0, 100], [31.0, 100], [32.0, 100]]
    assert tokens_per_second(steps) == pytest.approx(100.0)  # the 28-s step left out


def test_the_best_checkpoint_is_the_best_score_whatever_its_epoch(tmp_path):
    folder = tmp_path / "lightning_logs/version_0/checkpoints"
    folder.mkdir(parents=True)
    for name in ("epoch3-step9-bleu_30.50.ckpt", "epoch10-step30-bleu_29.99.ckpt", "last.ckpt"):
        (folder / name).touch()
    assert best_checkpoint(tmp_path).name == "epoch3-step9-bleu_30.50.ckpt"
    with pytest.raises(RuntimeError, match="no scored checkpoint"):
        best_checkpoint(tmp_path / "elsewhere")


def test_every_cpu_config_is_a_row():
    found = rows()
    assert {"translation/transformer", "translation/rnn_bahdanau", "parsing/transformer"} <= set(
        found
    )
    assert not [row for row in found if "gpu" in row or row.endswith("/gnmt")]
