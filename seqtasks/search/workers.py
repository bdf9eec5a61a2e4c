"""Decoding many batches on a CPU: one batch per core, side by side."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import torch


def run_batches(
    work: Callable[[Sequence[int]], None],
    batches: Sequence[Sequence[int]],
    workers: int | None = None,
    device: str = "cpu",
) -> None:
    """Call `work(batch)` for every batch, under no_grad and the caller's autocast on `device`.

    On a CPU, `workers` threads (default: torch's thread count) take the batches in turn, each
    running its operations on one core: a search step is many small operations, which a second
    intra-op thread slows down rather than speeds up, whereas two batches side by side keep two
    cores busy (docs/parsing.md and docs/transformer.md, "Speed"). Elsewhere the default is one.
    torch's thread count is restored afterwards.
    """
    autocast_dtype = torch.get_autocast_dtype(device)
    autocast_on = torch.is_autocast_enabled(device)

    def run(batch: Sequence[int]) -> None:
        # no_grad and autocast are per thread: set them again in a worker.
        with torch.no_grad(), torch.autocast(device, autocast_dtype, autocast_on):
            work(batch)

    if workers is None:
        workers = torch.get_num_threads() if device == "cpu" else 1
    if workers <= 1 or len(batches) <= 1:  # in this thread, under its autocast
        with torch.no_grad():
            for batch in batches:
                work(batch)
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(run, batches))
    finally:
        torch.set_num_threads(threads)
