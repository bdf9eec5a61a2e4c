"""The CPU kernel choices inside the recurrent models, each timed against the alternative.

    python bench/rnn_kernels.py [--threads 2] [--repeats 5] [--json]

1. Additive attention energies vᵀ tanh(W s + U h) over a (B, K, S, A) tensor, written with
   `tanh` and in the sigmoid form (2v)ᵀ σ(2z) − Σv that `AdditiveAttention.score` uses.
2. A bidirectional LSTM over a batch of sentences of mixed length, forward and backward pass:
   `nn.LSTM` on a `PackedSequence` against `RNNEncoder`'s two padded one-direction passes.
3. One decoder time step of a one-layer LSTM on a small training batch, forward and backward:
   the module on a sequence of length 1 against `rnn_step` (fused cells).

Each pair computes the same numbers (checked here); the times are milliseconds per call, the
median of --repeats after a warm-up. Run it on an otherwise idle machine; it sets
OMP_WAIT_POLICY=PASSIVE unless told otherwise. With --json the last line is one JSON object.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

import torch  # noqa: E402
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence  # noqa: E402

from seqtasks.attention.scores import AdditiveAttention  # noqa: E402
from seqtasks.encoders import RNNEncoder  # noqa: E402
from seqtasks.layers.recurrent import rnn_step  # noqa: E402


def milliseconds(fn: Callable[[], object], repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(1e3 * (time.perf_counter() - start))
    return statistics.median(times)


def attention_energies(repeats: int) -> dict[str, float]:
    """Beam 10 over 100 sentences of 30 positions, attention width 256."""
    torch.manual_seed(0)
    attention = AdditiveAttention(256, 512).eval()
    query, states = torch.randn(100, 10, 256), torch.randn(100, 30, 512)
    with torch.no_grad():
        keys = attention.project_keys(states)
        v = attention.v.weight[0]

        def with_tanh() -> torch.Tensor:
            z = attention.W(query)[:, :, None, :] + attention.U(states)[:, None, :, :]
            return z.tanh_() @ v

        assert torch.allclose(with_tanh(), attention.score(query, keys), atol=1e-4)
        return {
            "tanh": milliseconds(with_tanh, repeats),
            "sigmoid form (ours)": milliseconds(lambda: attention.score(query, keys), repeats),
        }


def bidirectional_encoder(repeats: int) -> dict[str, float]:
    """2 layers × 256 per direction, 64 sentences of 5–40 words, forward + backward."""
    torch.manual_seed(0)
    encoder = RNNEncoder(1000, 256, 256, num_layers=2, cell="lstm", dropout=0.0).train()
    lengths = torch.randint(5, 41, (64,))
    lengths[0] = 40
    mask = torch.arange(40)[None, :] < lengths[:, None]
    inputs = torch.randint(4, 1000, (64, 40)).masked_fill(~mask, 0)

    def packed() -> torch.Tensor:
        embedded = encoder.embedding(inputs)
        sequence = pack_padded_sequence(embedded, lengths, batch_first=True, enforce_sorted=False)
        states, _ = pad_packed_sequence(encoder.rnn(sequence)[0], batch_first=True)
        states.sum().backward()
        return states

    def padded() -> torch.Tensor:
        states = encoder(inputs, mask).states
        states.sum().backward()
        return states

    assert torch.allclose(packed(), padded(), atol=1e-5)
    return {
        "packed nn.LSTM": milliseconds(packed, repeats),
        "padded, per direction (ours)": milliseconds(padded, repeats),
    }


def decoder_step(repeats: int) -> dict[str, float]:
    """One step of an LSTM 384 -> 256 on 24 rows (a parsing training batch), forward + backward."""
    torch.manual_seed(0)
    rnn = torch.nn.LSTM(384, 256, batch_first=True)
    x = torch.randn(24, 384, requires_grad=True)
    hidden = (torch.zeros(1, 24, 256), torch.zeros(1, 24, 256))

    def module() -> torch.Tensor:
        output = rnn(x[:, None, :], hidden)[0][:, 0]
        output.sum().backward()
        return output

    def cells() -> torch.Tensor:
        output = rnn_step(rnn, x, hidden)[0]
        output.sum().backward()
        return output

    assert torch.allclose(module(), cells(), atol=1e-6)
    return {
        "nn.LSTM on length 1": milliseconds(module, repeats * 20),
        "rnn_step (ours)": milliseconds(cells, repeats * 20),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--json", action="store_true", help="end with one JSON line")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    results = {
        "additive attention energies (B 100, K 10, S 30, A 256)": attention_energies(args.repeats),
        "BiLSTM 2 × 256, 64 sentences, forward + backward": bidirectional_encoder(args.repeats),
        "decoder LSTM step, 24 rows, forward + backward": decoder_step(args.repeats),
    }
    print(f"{args.threads} threads; milliseconds per call (median)")
    for name, times in results.items():
        (slow_name, slow), (fast_name, fast) = times.items()
        print(f"{name}:\n  {slow_name:<30} {slow:9.2f}\n  {fast_name:<30} {fast:9.2f}")
        print(f"  {'ratio':<30} {slow / fast:9.2f}×")
    if args.json:
        print(json.dumps({"threads": args.threads, "milliseconds": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
