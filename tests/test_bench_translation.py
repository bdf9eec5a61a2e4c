"""bench/translation.py on the Transformer config: a quick run still measures both sides, and
the reference, decoding with the same weights by re-running the prefix, finds the same outputs
as our cached search, also when the batches are shared among worker threads."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import REPO, load_script


@pytest.mark.slow
def test_transformer_bench_reports_both_sides_and_identical_decoding(multi30k_dir, capsys):
    bench = load_script("bench/translation.py")
    threads = torch.get_num_threads()
    argv = ["--config", str(REPO / "configs/translation/transformer.yaml"),
            "--data", str(multi30k_dir), "--steps", "1", "--warmup", "0", "--sentences", "6",
            "--beam", "2", "--decode-tokens", "30", "--threads", "1", "--workers", "2",
            "--json"]  # fmt: skip
    try:
        bench.main(argv)
    finally:
        torch.set_num_threads(threads)
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    for key in ("train_tokens_per_s", "ref_train_tokens_per_s", "beam_sents_per_s",
                "ref_beam_sents_per_s", "peak_rss_mb"):  # fmt: skip
        assert result[key] > 0, key
    assert result["sentences"] == 6
    assert result["beam_identical_outputs"] == 6
