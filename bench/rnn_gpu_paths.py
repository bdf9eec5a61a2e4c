"""The recurrent decoders' teacher-forced passes: what a training step costs here, and what it
would launch on a GPU.

    python bench/rnn_gpu_paths.py [--threads 2] [--steps 8] [--baseline DIR [--rounds 3]]
        [--part 1|2] [--json]

1. Training steps of the two models whose decoders loop over time steps: the fast parser
   (configs/parsing/lstm_attention_fast.yaml: Luong, input feeding, 3-layer LSTM) and
   soft-attention captioning (configs/captioning/shapes_soft.yaml). The encoder and decoder are
   built from the config's `class_path`s and `init_args`; a step is the forward pass, token
   cross-entropy, the backward pass and an Adam update, in training mode (dropout on), on a
   fixed synthetic batch shaped like a real one: parsing, the median batch of the PTB sample
   under `max_tokens: 2048` (26 sentences of ≤ 37 words, 75 bracket tokens; vocabularies 5,359
   and 101); captioning, 64 images of 48 × 48 px, captions padded to 32 tokens (vocabulary 32).
   Reported: milliseconds per step, wall clock and the process's CPU time (both threads;
   steadier than the wall clock on a machine that others share), the median of --steps after
   one warm-up step; target tokens per second (the padding excluded); and, per target
   position, the operators the decoder's forward pass would launch on a GPU (its operator calls
   on fake CUDA tensors, which need no GPU, views excluded) and the nodes of its backward graph.
2. A decoder stack over a whole sequence, forward and backward, as `recur` (one fused-RNN call)
   and as a `CellStack` stepped T times: the choice of `seqtasks.layers.recurrent`.

--baseline DIR runs part 1 for the `seqtasks` package found in DIR too, e.g. the last commit's:
    git archive HEAD seqtasks | tar -x -C /tmp/base
Each round runs the baseline, then this checkout, each in a fresh process (so each imports its
own copy); each ratio is the baseline's figure / this checkout's, from the medians over rounds.
It sets OMP_WAIT_POLICY=PASSIVE unless told otherwise. With --json the last line is one JSON
object.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import functools  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import yaml  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
MODELS = {  # config, source vocabulary (None: images), target vocabulary
    "parsing lstm_attention_fast": ("configs/parsing/lstm_attention_fast.yaml", 5359, 101),
    "captioning shapes_soft": ("configs/captioning/shapes_soft.yaml", None, 32),
}
VIEWS = {  # operators that make no kernel on a GPU
    "view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "unsqueeze",
    "squeeze", "select", "slice", "unbind", "split", "split_with_sizes", "chunk",
    "unsafe_chunk", "as_strided", "alias", "detach", "lift_fresh", "empty",
}  # fmt: skip


def instantiate(spec: dict, *args: object) -> object:
    """The object a config's {class_path, init_args} names; nested specs become factories
    (`functools.partial`), as the task gets its decoder's `attention`."""
    module, name = spec["class_path"].rsplit(".", 1)
    cls = getattr(importlib.import_module(module), name)
    kwargs = {
        key: functools.partial(instantiate, value) if isinstance(value, dict) else value
        for key, value in spec.get("init_args", {}).items()
    }
    return cls(*args, **kwargs)


def build(name: str) -> tuple[torch.nn.Module, torch.nn.Module, tuple[torch.Tensor, ...]]:
    """Encoder, decoder and one batch (inputs, input mask, target inputs, target outputs)."""
    config, src_vocab, tgt_vocab = MODELS[name]
    model = yaml.safe_load((REPO / config).read_text())["model"]["init_args"]
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    if src_vocab is None:  # images
        encoder = instantiate(model["encoder"])
        inputs, mask = torch.rand(64, 3, 48, 48, generator=g), None
        tgt = torch.randint(4, tgt_vocab, (64, 33), generator=g)
        tgt[32:, 20:] = 0  # half the captions shorter
    else:
        encoder = instantiate(model["encoder"], src_vocab)
        lengths = torch.randint(30, 38, (26,), generator=g)
        mask = torch.arange(37)[None, :] < lengths[:, None]
        inputs = torch.randint(4, src_vocab, (26, 37), generator=g).masked_fill(~mask, 0)
        tgt = torch.randint(4, tgt_vocab, (26, 76), generator=g)
        tgt[13:, 60:] = 0
    decoder = instantiate(model["decoder"], tgt_vocab, encoder.out_dim)
    return encoder.train(), decoder.train(), (inputs, mask, tgt[:, :-1], tgt[:, 1:])


def median_ms(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Median wall-clock and CPU-time milliseconds of `fn` over `repeats` calls, after one."""
    fn()
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append(1e3 * (time.perf_counter() - start))
        cpu.append(1e3 * (time.process_time() - start_cpu))
    return statistics.median(wall), statistics.median(cpu)


def time_steps(name: str, steps: int) -> dict[str, float]:
    """Milliseconds of a training step of model `name`, and target tokens per second."""
    encoder, decoder, (inputs, mask, tgt_in, tgt_out) = build(name)
    optimizer = torch.optim.Adam([*encoder.parameters(), *decoder.parameters()], lr=1e-3)

    def step() -> None:
        memory = encoder(inputs) if mask is None else encoder(inputs, mask)
        logits = decoder(memory, tgt_in).logits  # (B, T, V)
        F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=0).backward()
        optimizer.step()
        optimizer.zero_grad()

    ms, cpu_ms = median_ms(step, steps)
    return {"ms": ms, "cpu_ms": cpu_ms, "tokens_per_s": int((tgt_out != 0).sum()) / ms * 1e3}


class CountCalls(TorchDispatchMode):
    """Counts the ATen operator calls, views excluded."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls += func.namespace == "aten" and func.overloadpacket.__name__ not in VIEWS
        return func(*args, **(kwargs or {}))


def gpu_launches(name: str) -> dict[str, float]:
    """Per target position, the decoder's forward operator calls as CUDA would dispatch them
    (fake CUDA tensors: shapes only, no GPU) and its backward graph's nodes (each one or two
    kernels, or none for a view; run, they would need a GPU)."""
    from seqtasks.layers.memory import Memory

    encoder, decoder, (inputs, mask, tgt_in, _) = build(name)
    memory = encoder(inputs) if mask is None else encoder(inputs, mask)
    with warnings.catch_warnings(), FakeTensorMode(allow_non_fake_inputs=True) as fake:
        warnings.simplefilter("ignore")  # nn.RNN's flatten_parameters reads fake data pointers
        decoder = decoder.to("cuda")
        on_gpu = [fake.from_tensor(t).to("cuda") for t in (memory.states, memory.mask)]
        memory = Memory(*on_gpu, fake.from_tensor(memory.summary).to("cuda"), memory.grid)
        with CountCalls() as counter:
            logits = decoder(memory, tgt_in.to("cuda")).logits
    nodes, todo = set(), [logits.grad_fn]
    while todo:
        node = todo.pop()
        if node is not None and node not in nodes:
            nodes.add(node)
            todo.extend(next_node for next_node, _ in node.next_functions)
    steps = tgt_in.size(1)
    return {"forward_ops": counter.calls / steps, "backward_nodes": len(nodes) / steps}


def in_process(steps: int) -> dict[str, dict[str, float]]:
    return {name: time_steps(name, steps) | gpu_launches(name) for name in MODELS}


def in_subprocess(package_dir: Path | None, threads: int, steps: int) -> dict:
    """`in_process` in a fresh interpreter that imports `seqtasks` from `package_dir` (None:
    this checkout)."""
    env = dict(os.environ)
    if package_dir is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(package_dir), env.get("PYTHONPATH", "")])
    options = ["--part", "1", "--threads", str(threads), "--steps", str(steps), "--json"]
    command = [sys.executable, __file__, *options]
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["results"]


def sequence_against_cells(repeats: int) -> dict[str, dict[str, float]]:
    """Forward + backward CPU milliseconds of `recur` and of a `CellStack` over T steps, for
    the recurrent stacks of the decoders that can take either (equal outputs checked)."""
    from seqtasks.layers.recurrent import CellStack, Hidden, recur

    shapes = {  # rows B, steps T, input, hidden, layers
        "parser's stack unfed: B 26, T 75, LSTM 3 × 128": (26, 75, 128, 128, 3),
        "shapes_no_attention: B 64, T 32, LSTM 64 -> 256": (64, 32, 64, 256, 1),
        "rnn_plain: B 64, T 30, GRU 256 + 512 -> 512": (64, 30, 768, 512, 1),
    }

    def whole(rnn: torch.nn.Module, x: torch.Tensor, hidden: Hidden) -> torch.Tensor:
        outputs = recur(rnn, x, hidden)[0]
        outputs.sum().backward()
        return outputs

    def cells(rnn: torch.nn.Module, x: torch.Tensor, hidden: Hidden) -> torch.Tensor:
        stack = CellStack(rnn, hidden, x.size(1))
        outputs = torch.stack([stack.step(x_t) for x_t in x.unbind(1)], 1)
        outputs.sum().backward()
        return outputs

    results = {}
    for name, (rows, steps, width, size, layers) in shapes.items():
        torch.manual_seed(0)
        rnn = torch.nn.LSTM(width, size, layers) if "LSTM" in name else torch.nn.GRU(width, size)
        x = torch.randn(rows, steps, width, requires_grad=True)
        h0 = torch.zeros(layers, rows, size)
        hidden = (h0, h0) if "LSTM" in name else h0
        ways = {"recur": whole, "CellStack": cells}
        runs = {way: functools.partial(fn, rnn, x, hidden) for way, fn in ways.items()}
        assert torch.allclose(runs["recur"](), runs["CellStack"](), atol=1e-5)
        results[name] = {way: median_ms(run, repeats)[1] for way, run in runs.items()}
    return results


def training_steps(args: argparse.Namespace) -> dict:
    """Part 1, printed; with --baseline against the baseline package, round by round."""
    if args.baseline is None:
        results = in_process(args.steps)
        for name, r in results.items():
            print(f"{name:<28} {r['ms']:7.1f} ms/step ({r['cpu_ms']:7.1f} ms CPU) "
                  f"{r['tokens_per_s']:6.0f} tgt tok/s; per position on a GPU "
                  f"{r['forward_ops']:.1f} forward ops, "
                  f"{r['backward_nodes']:.1f} backward nodes")  # fmt: skip
        return results
    runs: dict[str, list] = {"baseline": [], "this checkout": []}
    for _ in range(args.rounds):
        runs["baseline"].append(in_subprocess(args.baseline, args.threads, args.steps))
        runs["this checkout"].append(in_subprocess(None, args.threads, args.steps))
    print(f"{args.threads} threads, {args.rounds} rounds (medians)")
    results: dict[str, dict] = {}
    for name in MODELS:
        results[name] = {}
        for key in ("ms", "cpu_ms", "forward_ops", "backward_nodes"):
            value = {k: statistics.median(r[name][key] for r in v) for k, v in runs.items()}
            ratio = value["baseline"] / value["this checkout"]
            print(f"{name:<28} {key:<14} baseline {value['baseline']:7.1f}  this checkout "
                  f"{value['this checkout']:7.1f}  ratio {ratio:4.2f}×")  # fmt: skip
            results[name][key] = value | {"ratio": ratio}
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--rounds", type=int, default=3, help="with --baseline: alternations")
    p.add_argument("--baseline", type=Path, help="a folder holding another seqtasks package")
    p.add_argument("--part", type=int, choices=[1, 2], help="only part 1 or part 2")
    p.add_argument("--json", action="store_true", help="end with one JSON line")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    summary: dict = {"threads": args.threads, "baseline": args.baseline and str(args.baseline)}
    if args.part != 2:
        summary["results"] = training_steps(args)
    if args.part != 1:
        summary["sequence_against_cells"] = kernels = sequence_against_cells(args.steps)
        print("CPU ms, forward + backward:")
        for name, ms in kernels.items():
            ratio = ms["CellStack"] / ms["recur"]
            print(f"  {name:<48} recur {ms['recur']:7.1f}  CellStack {ms['CellStack']:7.1f}"
                  f"  ({ratio:.2f}×)")  # fmt: skip
    if args.json:
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
