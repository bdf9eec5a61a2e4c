"""bench/matmul.py: its three ways of multiplying agree, it reports each size's rates, and it
times the bfloat16 product only where the CPU has bfloat16 instructions (an AVX2-only CPU
emulates it, 40 times slower than float32)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch
from conftest import load_script

TINY = ["--threads", "1", "--sizes", "64", "--repeats", "2", "--json"]


def test_the_three_products_agree():
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    onednn = torch._C._nn.mkldnn_linear(a.to_mkldnn(), b)
    onednn = onednn.to_dense() if onednn.is_mkldnn else onednn
    # mkldnn_linear(x, w) is x wᵀ, the layout of nn.Linear; the rate is the same for a b.
    assert torch.allclose(onednn, a @ b.T, atol=1e-4)
    assert torch.allclose((a.bfloat16() @ b.bfloat16()).float(), a @ b, atol=0.5)


@pytest.fixture
def bench():
    threads = torch.get_num_threads()
    yield load_script("bench/matmul.py")
    torch.set_num_threads(threads)


def run(bench, capsys, *options: str) -> tuple[dict, list[str]]:
    bench.main([*TINY, *options])
    lines = capsys.readouterr().out.strip().splitlines()
    return json.loads(lines[-1]), lines[:-1]


@pytest.mark.parametrize("instructions", [["amx_bf16"], []], ids=["bf16 CPU", "AVX2-only CPU"])
def test_bf16_is_timed_only_where_the_cpu_has_it(bench, capsys, monkeypatch, instructions):
    monkeypatch.setattr(bench, "bf16_instructions", lambda: instructions)
    result, lines = run(bench, capsys)
    fp32 = {"fp32_torch_mm", "fp32_onednn"}
    timed = fp32 | {"bf16_torch_mm"} if instructions else fp32
    assert set(result["gflops"]["64"]) == timed
    assert all(rate > 0 for rate in result["gflops"]["64"].values())
    assert result["bf16_instructions"] == instructions
    said = "bf16_torch_mm not timed: this CPU has no bfloat16 instructions"
    assert any(said in line for line in lines) == (not instructions), lines
    forced, lines = run(bench, capsys, "--bf16", "on")
    assert "bf16_torch_mm" in forced["gflops"]["64"] and not any(said in x for x in lines)
    never, _ = run(bench, capsys, "--bf16", "off")
    assert set(never["gflops"]["64"]) == fp32


CPUINFO = {
    "AVX2 only (AMD EPYC Zen 3)": ("flags\t\t: fpu sse2 avx avx2 fma", []),
    "AVX-512 with bf16 and AMX": (
        "flags : avx2 avx512f avx512_bf16 amx_bf16 amx_tile",
        ["avx512_bf16", "amx_bf16"],
    ),
    "Arm with BF16 (Graviton3)": ("Features\t: fp asimd sve bf16 i8mm", ["bf16"]),
}


@pytest.mark.parametrize("cpu", CPUINFO)
def test_bf16_instructions_are_read_from_proc_cpuinfo(bench, monkeypatch, tmp_path, cpu):
    """Where torch has no torch.cpu.get_capabilities(), /proc/cpuinfo's flags say."""
    text, expected = CPUINFO[cpu]
    (tmp_path / "cpuinfo").write_text(f"processor\t: 0\n{text}\n\nprocessor\t: 1\n{text}\n")
    monkeypatch.setattr(bench, "CPUINFO", tmp_path / "cpuinfo")
    monkeypatch.delattr(torch.cpu, "get_capabilities", raising=False)
    assert bench.bf16_instructions() == expected
    monkeypatch.setattr(bench, "CPUINFO", tmp_path / "missing")
    assert bench.bf16_instructions() == []


def test_bf16_instructions_torch_knows_of_count_too(bench, monkeypatch, tmp_path):
    monkeypatch.setattr(bench, "CPUINFO", tmp_path / "missing")
    capabilities = {"avx2": True, "avx512_bf16": False, "amx_bf16": True, "cpu_name": "x"}
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: capabilities, raising=False)
    assert bench.bf16_instructions() == ["amx_bf16"]
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: {"avx2": True}, raising=False)
    assert bench.bf16_instructions() == []


def test_a_slow_product_is_timed_within_its_budget(bench, monkeypatch):
    """A product slower than the budget is called once timed (after its warm-up), not
    --repeats times."""
    calls = []
    clock = iter(range(0, 1000, 30))  # every reading 30 s after the last: each call takes 30 s
    monkeypatch.setattr(bench, "time", SimpleNamespace(perf_counter=lambda: next(clock)))
    rate = bench.gflops(lambda: calls.append(1), (), 60e9, repeats=10, budget=20)
    assert len(calls) == 2  # the warm-up and one timed call
    assert rate == pytest.approx(60 / 60)  # 60 GFLOP over the 60 s of readings around it
