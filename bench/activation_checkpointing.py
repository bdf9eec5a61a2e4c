"""What activation checkpointing saves and costs in one Transformer training step, on the CPU.

    python bench/activation_checkpointing.py [--batch 128] [--length 32] [--layers 3]
        [--d-model 256] [--ff-dim 1024] [--vocab 6000] [--steps 3] [--threads 1]

Each setting runs in a fresh process (peak resident memory is per process): an encoder and a
decoder of the given sizes (defaults: configs/translation/transformer.yaml's model with
Multi30k's 6,000-piece vocabulary, and its 4,096-token batches), a batch of --batch random
sequences of --length tokens on each side, dropout on, cross-entropy over the vocabulary,
backward. Reported: the growth of the peak resident set over one training step
(activations, logits and their gradients; the weights and gradient buffers exist before), and
the mean time of --steps further steps.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from seqtasks.decoders.transformer import TransformerDecoder  # noqa: E402
from seqtasks.encoders import TransformerEncoder  # noqa: E402


def measure(args: argparse.Namespace) -> dict[str, float]:
    """One setting, in this process."""
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    sizes = dict(d_model=args.d_model, num_layers=args.layers, ff_dim=args.ff_dim, dropout=0.1)
    sizes["activation_checkpointing"] = args.checkpointing == "on"
    encoder = TransformerEncoder(args.vocab, **sizes)
    decoder = TransformerDecoder(args.vocab, encoder.out_dim, **sizes)
    for parameter in [*encoder.parameters(), *decoder.parameters()]:
        parameter.grad = torch.zeros_like(parameter)
    src = torch.randint(4, args.vocab, (args.batch, args.length))  # (B, S)
    tgt = torch.randint(4, args.vocab, (args.batch, args.length))  # (B, T)

    def step() -> None:
        logits = decoder(encoder(src, src != 0), tgt).logits  # (B, T, V)
        F.cross_entropy(logits.flatten(0, 1), tgt.flatten()).backward()

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    step()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    seconds = (time.perf_counter() - start) / args.steps
    return {"peak_growth_mib": (peak - before) / 1024, "s_per_step": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--length", type=int, default=32)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--ff-dim", type=int, default=1024)
    parser.add_argument("--vocab", type=int, default=6000)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--checkpointing", choices=["off", "on"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.checkpointing:
        print(json.dumps(measure(args)))
        return
    print(
        f"{args.batch} × {args.length} tokens a side, {args.layers}+{args.layers} layers, "
        f"d {args.d_model}, FFN {args.ff_dim}, V {args.vocab}, {args.threads} thread(s)"
    )
    results = {}
    for setting in ("off", "on"):
        command = [sys.executable, __file__, *sys.argv[1:], "--checkpointing", setting]
        output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
        results[setting] = json.loads(output.splitlines()[-1])
        print(
            f"checkpointing {setting:3}: peak memory +{results[setting]['peak_growth_mib']:.0f} MiB"
            f" over the step, {results[setting]['s_per_step']:.2f} s/step"
        )
    off, on = results["off"], results["on"]
    print(
        f"memory {on['peak_growth_mib'] / off['peak_growth_mib']:.2f}×, "
        f"time {on['s_per_step'] / off['s_per_step']:.2f}×"
    )


if __name__ == "__main__":
    main()
