"""The machine's matrix-product rate, the yardstick of the training-speed aims.

    python bench/matmul.py [--threads 2] [--sizes 1024 2048] [--repeats 10]
        [--bf16 auto|on|off] [--budget 20] [--json]

GFLOP/s of an n × n by n × n product on the CPU, three ways: `torch.mm` in float32 (on x86,
torch calls MKL for it: what a float32 model's layers get), oneDNN's float32 kernel
(`torch._C._nn.mkldnn_linear`, which a float32 model does not use by default), and `torch.mm`
in bfloat16 (what `bf16-mixed` autocast gets). A training step of the small Transformer costs
about 42 MFLOP per target token (docs/transformer.md, "Against the issue's aims").

The bfloat16 product is timed only where the CPU has bfloat16 instructions (`--bf16 auto`:
AVX512_BF16 or AMX on x86, BF16 on Arm). Elsewhere torch emulates it: on an AVX2-only CPU at
1.2 GFLOP/s against 50 for float32, and its timing alone took over seven minutes. `--bf16 on`
times it anyway, `off` never. Each product's timing ends after --budget seconds (at least one
timed call), so that a slow one cannot overrun.

Run it on an otherwise idle machine; it sets OMP_WAIT_POLICY=PASSIVE unless told otherwise.
With --json the last line is one JSON object. At the defaults it took 20–24 s on machine A (2
cores, AMX) while other jobs shared it (bench/README.md).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

# The CPU flags (as /proc/cpuinfo and torch.cpu.get_capabilities() name them) of bfloat16
# arithmetic in hardware: x86's AVX512_BF16 and AMX, Arm's BF16.
BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")
CPUINFO = Path("/proc/cpuinfo")


def bf16_instructions() -> list[str]:
    """The CPU's bfloat16 instructions among BF16_FLAGS, as torch sees them (where it has
    torch.cpu.get_capabilities()) or /proc/cpuinfo lists them; [] where neither knows of one."""
    found = set()
    if hasattr(torch.cpu, "get_capabilities"):
        found |= {name for name, present in torch.cpu.get_capabilities().items() if present is True}
    try:
        lines = CPUINFO.read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        if line.startswith(("flags", "Features")):  # x86's and Arm's
            found |= set(line.partition(":")[2].split())
    return [flag for flag in BF16_FLAGS if flag in found]


def gflops(
    product: Callable[..., object], operands: tuple, flop: float, repeats: int, budget: float
) -> float:
    """The rate of `product(*operands)` (warmed up once), over `repeats` calls or as many as
    end within `budget` seconds, at least one."""
    product(*operands)
    start = time.perf_counter()
    calls = 0
    while calls < repeats and (calls == 0 or time.perf_counter() - start < budget):
        product(*operands)
        calls += 1
    return flop * calls / (time.perf_counter() - start) / 1e9


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument(
        "--bf16", choices=["auto", "on", "off"], default="auto", help="time the bfloat16 product"
    )
    parser.add_argument("--budget", type=float, default=20.0, help="seconds at most a timing")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    instructions = bf16_instructions()
    bf16 = args.bf16 == "on" or (args.bf16 == "auto" and bool(instructions))
    if args.bf16 == "auto" and not instructions:
        flags = ", ".join(BF16_FLAGS)
        print(f"bf16_torch_mm not timed: this CPU has no bfloat16 instructions ({flags}), so torch")
        print("emulates them, tens of times slower than float32 (`--bf16 on` times it anyway)")
    rates: dict[str, dict[str, float]] = {}
    for n in args.sizes:
        a, b = torch.randn(n, n), torch.randn(n, n)
        flop = 2.0 * n**3
        products = {
            "fp32_torch_mm": (torch.mm, (a, b)),
            "fp32_onednn": (torch._C._nn.mkldnn_linear, (a.to_mkldnn(), b)),
        }
        if bf16:
            products["bf16_torch_mm"] = (torch.mm, (a.bfloat16(), b.bfloat16()))
        rates[str(n)] = {
            name: gflops(product, operands, flop, args.repeats, args.budget)
            for name, (product, operands) in products.items()
        }
        line = ", ".join(f"{name} {rate:.0f}" for name, rate in rates[str(n)].items())
        print(f"{n} x {n}: {line} GFLOP/s ({args.threads} threads)", flush=True)
    result = {
        "threads": args.threads,
        "gflops": rates,
        "bf16_instructions": instructions,
        "torch": torch.__version__,
    }
    if args.json:
        print(json.dumps(result), flush=True)
    return result


if __name__ == "__main__":
    main()
