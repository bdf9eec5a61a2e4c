"""Why seqtasks has its own dropout: time `torch.nn.functional.dropout` against
`seqtasks.layers.dropout.Dropout` on a CPU, next to the matrix product that makes such activations.

    python bench/dropout.py [--tokens 4000] [--width 256] [--threads 2] [--repeats 50]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from seqtasks.layers.dropout import Dropout  # noqa: E402


def milliseconds(fn: Callable[[], object], repeats: int) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats * 1e3


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", type=int, default=4000, help="rows: tokens in a batch")
    p.add_argument("--width", type=int, default=256, help="columns: d_model")
    p.add_argument("--rate", type=float, default=0.2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=50)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    x = torch.randn(args.tokens, args.width, requires_grad=True)
    grad = torch.randn_like(x)
    weight = torch.randn(args.width, args.width)
    ours = Dropout(args.rate)
    rows = {
        "x @ W (the matmul that made x)": lambda: x.detach() @ weight,
        "F.dropout forward": lambda: F.dropout(x, args.rate, True),
        "seqtasks Dropout forward": lambda: ours(x),
        "F.dropout forward + backward": lambda: F.dropout(x, args.rate, True).backward(grad),
        "seqtasks Dropout forward + backward": lambda: ours(x).backward(grad),
    }
    print(f"{args.tokens} x {args.width}, rate {args.rate}, {args.threads} threads, torch "
          f"{torch.__version__}")  # fmt: skip
    for name, fn in rows.items():
        print(f"  {name:38} {milliseconds(fn, args.repeats):7.2f} ms")


if __name__ == "__main__":
    main()
