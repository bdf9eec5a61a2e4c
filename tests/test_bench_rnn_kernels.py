"""bench/rnn_kernels.py: each pair it times computes the same numbers (the bench asserts it),
and it reports every pair in its JSON line."""

from __future__ import annotations

import json

from conftest import load_script


def test_rnn_kernel_pairs_agree_and_are_reported(capsys):
    bench = load_script("bench/rnn_kernels.py")
    assert bench.main(["--threads", "1", "--repeats", "1", "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["threads"] == 1
    assert len(result["milliseconds"]) == 3
    for times in result["milliseconds"].values():
        assert len(times) == 2 and all(t > 0 for t in times.values())
