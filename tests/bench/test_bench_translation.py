"""bench/translation_train.py and bench/translation_decode.py on the Transformer config: a quick
run still measures both sides, and the reference, decoding with the same weights by re-running
the prefix, finds the same outputs as our cached search, also when the batches are shared among
worker threads."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import REPO, load_script

CONFIG = str(REPO / "configs/translation/transformer.yaml")
SMALL_BATCHES = ["--data.init_args.max_tokens", "256"]  # options after `--` go to the config


def run(script: str, argv: list[str], capsys) -> dict:
    threads = torch.get_num_threads()
    try:
        load_script(script).main(["--threads", "1", "--json", *argv])
    finally:
        torch.set_num_threads(threads)
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.mark.slow
def test_training_bench_reports_both_sides(multi30k_dir, capsys):
    argv = ["--config", CONFIG, "--data", str(multi30k_dir), "--steps", "1", "--warmup", "0"]
    result = run("bench/translation_train.py", [*argv, "--", *SMALL_BATCHES], capsys)
    for key in ("train_tokens_per_s", "ref_train_tokens_per_s", "train_ratio", "peak_rss_mb"):
        assert result[key] > 0, key
    assert result["reference"] == "reference_transformer"
    assert result["ref_params"] > result["params"] > 0


@pytest.mark.slow
def test_decoding_bench_finds_the_references_outputs(multi30k_dir, capsys):
    argv = ["--config", CONFIG, "--data", str(multi30k_dir), "--sentences", "6", "--beam", "2",
            "--decode-tokens", "30", "--workers", "2"]  # fmt: skip
    result = run("bench/translation_decode.py", argv, capsys)
    for key in ("beam_sents_per_s", "ref_beam_sents_per_s", "peak_rss_mb"):
        assert result[key] > 0, key
    assert result["sentences"] == 6
    assert result["beam_identical_outputs"] == 6
