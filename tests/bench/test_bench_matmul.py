"""bench/matmul.py: its three ways of multiplying agree, and it reports each size's rates."""

from __future__ import annotations

import json

import torch
from conftest import load_script


def test_the_three_products_agree():
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    onednn = torch._C._nn.mkldnn_linear(a.to_mkldnn(), b)
    onednn = onednn.to_dense() if onednn.is_mkldnn else onednn
    # mkldnn_linear(x, w) is x wᵀ, the layout of nn.Linear; the rate is the same for a b.
    assert torch.allclose(onednn, a @ b.T, atol=1e-4)
    assert torch.allclose((a.bfloat16() @ b.bfloat16()).float(), a @ b, atol=0.5)


def test_rates_are_reported(capsys):
    bench = load_script("bench/matmul.py")
    threads = torch.get_num_threads()
    try:
        bench.main(["--threads", "1", "--sizes", "64", "--repeats", "2", "--json"])
    finally:
        torch.set_num_threads(threads)
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(result["gflops"]["64"]) == {"fp32_torch_mm", "fp32_onednn", "bf16_torch_mm"}
    assert all(rate > 0 for rate in result["gflops"]["64"].values())
