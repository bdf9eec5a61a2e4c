"""Where the time of a training step and of a beam search goes, for bench/gpu.py --profile DIR:
`torch.profiler` over a few steps (or one decoding pass), before anything is changed for speed.

For each profiled region it writes DIR/NAME.txt (the operators and kernels that took the most
self time: on the device where there is one, and on the host) and DIR/NAME.json.gz (the trace,
for chrome://tracing or ui.perfetto.dev), and returns a summary for the run's JSON: the wall
time of the region, the share of it the device was busy (CUDA only: the union of its kernels'
and copies' intervals), the time by kind of work (`KINDS`: matrix products, attention,
element-wise, normalisation and softmax, the optimiser, copies and gathers, other) and the top
operators.
The profiler's own overhead slows the region a little: its figures say where time goes, and
bench/gpu.py's timed loop says how fast.
"""

from __future__ import annotations

import gzip
import json
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from gpu_train import synchronize
from torch.profiler import ProfilerActivity, profile, schedule

# The kind of work an operator or kernel does, by its name (the first pattern that matches).
KINDS: dict[str, re.Pattern] = {
    name: re.compile(pattern, re.IGNORECASE)
    for name, pattern in {
        "attention": r"flash|fmha|scaled_dot_product|efficient_attention|attention",
        "matmul": r"gemm|xmma|nvjet|cutlass|cublas|aten::(mm|addmm|bmm|baddbmm|matmul|linear)\b",
        "optimizer": r"adam|multi_tensor|foreach|optimizer",
        "copy/gather": r"memcpy|memset|pin_memory|aten::(copy_|to|_to_copy|contiguous|cat|stack|"
        r"index_select|gather|scatter|index)\b|catarray|gather|scatter|index_",
        "norm/softmax": r"softmax|layer_norm|norm|nll|cross_entropy|logsumexp|reduce",
        "element-wise": r"elementwise|vectorized|aten::(add|sub|mul|div|where|masked_fill|"
        r"relu|gelu|dropout|fill_|exp|log|neg|rsqrt|sqrt|pow|clamp|sigmoid|tanh)",
    }.items()
}
TOP = 15  # operators listed in the summary


def kind_of(name: str) -> str:
    """The kind of work of an operator or kernel named `name` ("other" if none matches)."""
    return next((kind for kind, pattern in KINDS.items() if pattern.search(name)), "other")


DEVICE_EVENTS = ("kernel", "gpu_memcpy", "gpu_memset")  # a Chrome trace's device work


def device_events(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """The kernels, copies and sets of a Chrome trace, each one interval on the device."""
    return [
        event
        for event in trace.get("traceEvents", [])
        if event.get("cat") in DEVICE_EVENTS and "dur" in event
    ]


def busy_share(trace: dict[str, Any], wall_us: float) -> float | None:
    """The share of `wall_us` in which the device ran a kernel or a copy: the union of their
    intervals in a Chrome trace (None without device events)."""
    spans = sorted((event["ts"], event["ts"] + event["dur"]) for event in device_events(trace))
    if not spans or wall_us <= 0:
        return None
    busy, (start, end) = 0.0, spans[0]
    for s, e in spans[1:]:
        if s > end:
            busy, start, end = busy + end - start, s, e
        else:
            end = max(end, e)
    return min(1.0, (busy + end - start) / wall_us)


def device_time(trace: dict[str, Any]) -> list[tuple[str, float, int]]:
    """(name, µs, count) of each kernel, copy and set of a trace: the device's own work, each
    counted once (the profiler's table also gives the operators that launched them, and the
    step's annotation, the same time again)."""
    found: dict[str, tuple[float, int]] = {}
    for event in device_events(trace):
        us, count = found.get(event["name"], (0.0, 0))
        found[event["name"]] = (us + event["dur"], count + 1)
    return [(name, us, count) for name, (us, count) in found.items()]


def host_time(averages: Any) -> list[tuple[str, float, int]]:
    """(name, µs, count) of the host's self time by operator (the step's annotation holds the
    time between operators: Python and launching)."""
    return [(event.key, event.self_cpu_time_total, event.count) for event in averages]


def summary(timed: list[tuple[str, float, int]], where: str) -> dict[str, Any]:
    """Self time by kind and the top operators or kernels, from (name, µs, count) rows."""
    timed = [t for t in timed if t[1] > 0]
    total = sum(us for _, us, _ in timed) or 1.0
    by_kind: dict[str, float] = {}
    for name, us, _ in timed:
        by_kind[kind_of(name)] = by_kind.get(kind_of(name), 0.0) + us
    top = sorted(timed, key=lambda t: -t[1])[:TOP]
    return {
        "where": where,
        "self_s": total / 1e6,
        "by_kind": {
            k: round(v / total, 4) for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1])
        },
        "top": [
            {"name": name, "kind": kind_of(name), "self_ms": us / 1e3, "calls": calls}
            for name, us, calls in top
        ],
    }


def profiled(
    run: Callable[[], Any],
    device: torch.device,
    out: Path,
    name: str,
    steps: int = 1,
    warmup: int = 0,
) -> dict[str, Any]:
    """Profile `steps` calls of `run` after `warmup` unprofiled ones, on `device`; write
    out/NAME.txt and out/NAME.json.gz; the summary (module docstring)."""
    out.mkdir(parents=True, exist_ok=True)
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    plan = schedule(wait=0, warmup=warmup, active=steps, repeat=1) if warmup else None
    with profile(activities=activities, schedule=plan) as profiler:
        for _ in range(warmup):
            run()
            profiler.step()
        synchronize(device)
        start = time.perf_counter()
        for _ in range(steps):
            run()
            profiler.step()
        synchronize(device)
        wall = time.perf_counter() - start
    averages = profiler.key_averages()
    with tempfile.TemporaryDirectory() as folder:  # the profiler writes its trace to a file
        raw = Path(folder) / "trace.json"
        profiler.export_chrome_trace(str(raw))
        text = raw.read_text(encoding="utf-8")
    trace = json.loads(text)
    (out / f"{name}.json.gz").write_bytes(gzip.compress(text.encode("utf-8")))
    on_device = device.type == "cuda"
    sort = "self_device_time_total"  # (older torch: self_cuda_time_total)
    if averages and not hasattr(averages[0], sort):
        sort = "self_cuda_time_total"
    tables = [f"{name}: {steps} profiled after {warmup}, {wall:.3f} s wall ({device})"]
    if on_device:
        tables += ["\nby self time on the device", averages.table(sort_by=sort, row_limit=25)]
    tables += [
        "\nby self time on the host",
        averages.table(sort_by="self_cpu_time_total", row_limit=25),
    ]
    (out / f"{name}.txt").write_text("\n".join(tables) + "\n", encoding="utf-8")
    found = {
        "name": name,
        "steps": steps,
        "wall_s": wall,
        "device_busy_share": busy_share(trace, wall * 1e6) if on_device else None,
        **(
            summary(device_time(trace), "device")
            if on_device
            else summary(host_time(averages), "host")
        ),
    }
    if not on_device:
        found["not_measured"] = (
            f"device_busy_share: not measured on {device.type}: there is no device to wait for"
        )
    return found


def print_summary(found: dict[str, Any]) -> None:
    """The summary in a few lines."""
    busy = found["device_busy_share"]
    kinds = ", ".join(f"{k} {100 * v:.0f} %" for k, v in found["by_kind"].items())
    print(
        f"  profile {found['name']}: {found['wall_s']:.3f} s for {found['steps']}"
        + ("" if busy is None else f", device busy {100 * busy:.0f} % of it")
        + f"; {found['where']} self time {found['self_s']:.3f} s: {kinds}",
        flush=True,
    )
    for op in found["top"][:5]:
        print(f"    {op['self_ms']:9.2f} ms  {op['calls']:6d}×  {op['kind']:12}  {op['name'][:70]}")
