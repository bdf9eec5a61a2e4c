"""bench/stopping.py on a tiny untrained translator: the rows it counts are the work the rules
do, and its figures describe the outputs the API gives."""

from __future__ import annotations

import json

import pytest
from conftest import load_script
from test_api import SENTENCES, translation

import seqtasks


def test_stopping_bench_counts_the_rows_each_rule_decodes(toy_tokenizers, tmp_path, capsys):
    """Every input runs at least one step, and a step for each token of its output, with K
    rows a step: the exact rule decodes at least K · Σ max(|output|, 1) rows; the heuristic
    rule stops no later."""
    checkpoint = translation(tmp_path / "t.ckpt", toy_tokenizers)
    sentences = [s for s in SENTENCES if s]
    src, ref = tmp_path / "src.de", tmp_path / "ref.en"
    src.write_text("".join(f"{s}\n" for s in sentences), encoding="utf-8")
    outputs = seqtasks.load(checkpoint).translate(sentences, beam=3)
    ref.write_text("".join(f"{t.text}\n" for t in outputs), encoding="utf-8")
    bench = load_script("bench/stopping.py")
    report = bench.main([
        "--checkpoint", str(checkpoint), "--src", str(src), "--ref", str(ref), "--beam", "3",
        "--rounds", "1", "--threads", "1", "--json",
    ])  # fmt: skip
    assert json.loads(capsys.readouterr().out.splitlines()[-1]) == report
    exact, heuristic = report["rules"]["exact"], report["rules"]["heuristic"]
    assert exact["output_tokens"] == sum(len(t.tokens) for t in outputs)
    assert exact["bleu"] == pytest.approx(100.0) and exact["differ_from_exact"] == 0
    assert exact["decoder_rows"] >= 3 * sum(max(len(t.tokens), 1) for t in outputs)
    assert 0 < heuristic["decoder_rows"] <= exact["decoder_rows"]
