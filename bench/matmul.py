"""The machine's matrix-product rate, the yardstick of the training-speed aims.

    python bench/matmul.py [--threads 2] [--sizes 1024 2048] [--repeats 10] [--json]

GFLOP/s of an n × n by n × n product on the CPU, three ways: `torch.mm` in float32 (on x86,
torch calls MKL for it: what a float32 model's layers get), oneDNN's float32 kernel
(`torch._C._nn.mkldnn_linear`, which a float32 model does not use by default), and `torch.mm`
in bfloat16 (what `bf16-mixed` autocast gets). A training step of the small Transformer costs
about 42 MFLOP per target token (docs/transformer.md, "Against the issue's aims"). Run it on an
otherwise idle machine; it sets OMP_WAIT_POLICY=PASSIVE unless told otherwise. With --json the
last line is one JSON object.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

import torch  # noqa: E402


def gflops(product: Callable[..., object], operands: tuple, flop: float, repeats: int) -> float:
    """The rate of `product(*operands)` (warmed up once), over `repeats` calls."""
    product(*operands)
    start = time.perf_counter()
    for _ in range(repeats):
        product(*operands)
    return flop * repeats / (time.perf_counter() - start) / 1e9


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    rates: dict[str, dict[str, float]] = {}
    for n in args.sizes:
        a, b = torch.randn(n, n), torch.randn(n, n)
        flop = 2.0 * n**3
        rates[str(n)] = {
            "fp32_torch_mm": gflops(torch.mm, (a, b), flop, args.repeats),
            "fp32_onednn": gflops(
                torch._C._nn.mkldnn_linear, (a.to_mkldnn(), b), flop, args.repeats
            ),
            "bf16_torch_mm": gflops(torch.mm, (a.bfloat16(), b.bfloat16()), flop, args.repeats),
        }
        line = ", ".join(f"{name} {rate:.0f}" for name, rate in rates[str(n)].items())
        print(f"{n} x {n}: {line} GFLOP/s ({args.threads} threads)", flush=True)
    result = {"threads": args.threads, "gflops": rates, "torch": torch.__version__}
    if args.json:
        print(json.dumps(result), flush=True)
    return result


if __name__ == "__main__":
    main()
