"""The streaming benches end to end on a toy corpus: preparation speed
(bench/streaming_prepare.py) and the shards-against-memory comparison of training throughput
(bench/streaming_speed.py, which runs bench/streaming_memory.py's `train`)."""

from __future__ import annotations

import json

import pytest
from conftest import load_script, write_toy_corpus


@pytest.fixture(scope="module")
def corpus(multi30k_lines, toy_tokenizers, tmp_path_factory):
    de, en = multi30k_lines["de"], multi30k_lines["en"]
    splits = {
        "train": (de[:60], en[:60]),
        "val": (de[300:310], en[300:310]),
        "test_2016_flickr": (de[300:310], en[300:310]),
    }
    return write_toy_corpus(tmp_path_factory.mktemp("corpus"), toy_tokenizers, splits)


def test_preparation_speed_comes_from_the_unrounded_rate():
    """data_prep/shards.py prints seconds to 0.1 s: a small corpus reads "0.0 s", which the
    bench divided by. The rate it prints beside them was computed from the exact time."""
    speed = load_script("bench/streaming_prepare.py").preparation_speed
    stdout = "60 lines: 60 pairs in 1 shards; …\nwrote /x in 0.0 s (4,000 lines/s)\n"
    assert speed(stdout, 60) == (0.015, 4000.0)
    stdout = "wrote /x in 32.1 s (62,400 lines/s)\n"
    assert speed(stdout, 2_000_000) == (2_000_000 / 62_400, 62_400.0)
    assert speed("wrote /x in 0.0 s (0 lines/s)\n", 0) == (0.0, 0.0)


@pytest.mark.slow
def test_prepare_then_compare_both_paths_on_the_same_batches(corpus, tmp_path, capsys):
    prepared = load_script("bench/streaming_prepare.py").main(["--corpus", str(corpus), "--json"])
    run = prepared["threads=1"]
    assert (run["lines"], run["pairs"], run["shards"]) == (60, 60, 1)
    assert run["lines_per_s"] > 0 and 0 < run["seconds"] < run["wall_s"]
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == prepared

    shard_dir = tmp_path / "shards"
    (corpus / "shards").rename(shard_dir)
    result = load_script("bench/streaming_speed.py").main(
        ["--data", str(corpus), "--shard-dir", str(shard_dir)]
        + ["--rounds", "1", "--steps", "2", "--warmup", "1", "--max-tokens", "300"]
        + ["--threads", "1", "--json"]
    )
    memory, shards = result["runs"]["memory"][0], result["runs"]["shards"][0]
    assert (memory["data"], shards["data"]) == ("TranslationData", "ShardedTranslationData")
    assert memory["steps"] == shards["steps"] == 2
    assert result["same_tokens"] == [True] and memory["tokens"] > 0
    for key in ("ratio_shards_to_memory", "cpu_ratio_shards_to_memory"):
        assert result[key] > 0
    assert result["ratio_per_round"] == [shards["tokens_per_s"] / memory["tokens_per_s"]]
