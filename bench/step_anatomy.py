"""What one training step of a config costs: FLOPs, bytes kept for the backward pass, operator
calls, and where the time goes.

    python bench/step_anatomy.py [--config configs/translation/transformer.yaml]
        [--data data/multi30k] [--threads 2] [--steps 5] [--json]

On one real training batch of the config (the first of its token-bucketed loader): matrix-product
FLOPs of forward + backward counted by `torch.utils.flop_counter` (the attention run by the math
kernel so that its products are seen), per real target token (padding included in the work,
unlike bench/peers.py's useful FLOPs); the bytes of the tensors saved for
the backward pass (distinct storages, through saved-tensor hooks), float32 and under bfloat16
autocast, per target token; the number of operator calls a step makes (views excluded: each of the
rest is a kernel launch on a GPU), optimiser step included (in its multi-tensor `foreach` form,
a GPU's default); then `torch.profiler`'s table of
--steps timed steps, ordered by self time. These are the figures docs/peers.md ("GPU, on paper")
reasons from.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from translation_setup import build_from_config  # noqa: E402

from seqtasks.data.tokenizer import PAD_ID  # noqa: E402

VIEWS = {"view", "_unsafe_view", "t", "transpose", "permute", "expand", "unsqueeze", "squeeze",
         "select", "slice", "as_strided", "alias", "detach", "reshape", "split", "unbind",
         "split_with_sizes", "empty", "empty_strided", "lift_fresh"}  # fmt: skip


class CountCalls(TorchDispatchMode):
    """Counts the operator calls that reach a kernel (views and allocations left out)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls += func.overloadpacket.__name__ not in VIEWS
        return func(*args, **(kwargs or {}))


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="configs/translation/transformer.yaml")
    p.add_argument("--data", default="data/multi30k")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    sys.argv = sys.argv[:1]  # the config's CLI reads only what build_from_config gives it
    torch.set_num_threads(args.threads)
    task, datamodule, clip = build_from_config(args.config, args.data)
    datamodule.setup("fit")
    task.train()
    batch = next(iter(datamodule.train_dataloader()))
    tokens = int((batch.tgt_out != PAD_ID).sum())
    optimizer = task.optimizer(task.parameters())

    def loss(bf16: bool = False) -> torch.Tensor:
        with torch.autocast("cpu", torch.bfloat16, enabled=bf16):
            output = task(batch.src, batch.src_mask, batch.tgt_in)
            return task.objective.token_loss(output.logits, batch.tgt_out)[0]

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        loss().backward()
        torch.nn.utils.clip_grad_norm_(list(task.parameters()), clip or float("inf"))
        optimizer.step()

    with FlopCounterMode(display=False) as counter, sdpa_kernel(SDPBackend.MATH):
        loss().backward()
    saved = {}
    for bf16 in (False, True):
        storages: dict[int, int] = {}

        def keep(t: torch.Tensor, storages=storages) -> torch.Tensor:
            storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
            return t

        with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
            loss(bf16)
        saved["bf16" if bf16 else "fp32"] = sum(storages.values()) / tokens
    step()  # optimiser state exists before counting
    for group in optimizer.param_groups:  # as on a GPU, where the multi-tensor form is default
        group["foreach"] = True
    calls = CountCalls()
    with calls:
        step()
    result = {"target_tokens": tokens, "batch": [list(batch.src.shape), list(batch.tgt_in.shape)],
              "mflop_per_token": counter.get_total_flops() / tokens / 1e6,
              "saved_kb_per_token": {k: v / 1e3 for k, v in saved.items()},
              "operator_calls_per_step": calls.calls,
              "parameters": sum(p.numel() for p in task.parameters())}  # fmt: skip
    print(f"batch {result['batch']}, {tokens} real target tokens; "
          f"{result['mflop_per_token']:.1f} MFLOP a token (forward + backward); saved for "
          f"backward {saved['fp32'] / 1e3:.1f} KB a token (fp32), {saved['bf16'] / 1e3:.1f} KB "
          f"(bf16 autocast); {calls.calls} operator calls a step", flush=True)  # fmt: skip
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        for _ in range(args.steps):
            step()
    print(profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=20))
    if args.json:
        print(json.dumps(result), flush=True)
    return result


if __name__ == "__main__":
    main()
