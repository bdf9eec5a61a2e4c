"""Search steps replayed from CUDA graphs (`SearchSettings.cuda_graphs`).

A step of the 3-layer Transformer decoder runs ~90 operators (counted on the CPU: 88), each a
kernel that the host launches on a GPU, whatever the batch; so there the host, not the device,
sets the speed of search (docs/gpu.md, "What limits each"). Over fixed caches (a decoder's
`fixed_cache_steps`, the Transformer's in `seqtasks.decoders.fixed_cache`) a step has the same
shapes and addresses every time, so it is
captured into a CUDA graph (per bucket of 16 positions, and for beam search also after the beams'
reordering) and replayed as one launch. Every row stays in the batch to the end (the search's
`shrink_below` 0): a graph cannot drop rows, and on a GPU a finished row costs almost nothing.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from seqtasks.decoders.base import Decoder, FixedCacheState
from seqtasks.layers.memory import Memory

Outputs = tuple[Tensor, Tensor | None]  # a step's logits (R, V) and attention (R, S) or None
BUCKET = 16  # the positions a step reads grow by this many: a graph per bucket reached


class CapturedSteps:
    """`start`, `step` and `reorder` of a decoder for the search loops, each step
    one replay of a captured graph (`capture`), or the same fixed-cache steps run eagerly (on a
    CPU, and in the tests that compare the two).

    A step reads only the caches' positions up to the end of its bucket of `bucket` positions,
    so early steps of a long search neither attend over nor reorder the whole length: a graph
    is captured for each bucket (and for beam search each with the reordering before it) when
    the search first reaches it.

    Args:
        decoder: a decoder with `fixed_cache_steps` (a ValueError otherwise).
        length: the most steps of the search (its longest length limit).
        attention: whether the search keeps the attention weights (else none are computed).
        capture: capture CUDA graphs (the memory must be on a CUDA device).
        bucket: positions per bucket.
    """

    def __init__(
        self,
        decoder: Decoder,
        length: int,
        attention: bool,
        capture: bool = True,
        bucket: int = BUCKET,
    ):
        steps = decoder.fixed_cache_steps()
        if steps is None:
            raise ValueError(f"{type(decoder).__name__} has no steps over fixed caches")
        self.steps_over, self.length, self.bucket = steps, length, bucket
        self.attention, self.capture = attention, capture
        self.max_positions = decoder.max_positions

    def start(self, memory: Memory, beam_size: int = 1) -> FixedCacheState:
        state = self.steps_over.start(memory, beam_size, self.length)
        rows = state.rows
        self.prev = torch.zeros(rows, dtype=torch.long, device=state.at.device)
        self.rows = torch.arange(rows, device=state.at.device)  # what `reorder` last asked for
        self.reordered = False  # whether the next step reorders the caches first
        self.steps = 0  # taken so far
        self.graphs: dict[tuple[int, bool], tuple[torch.cuda.CUDAGraph, Outputs]] = {}
        return state

    def step(
        self, prev_tokens: Tensor, state: FixedCacheState
    ) -> tuple[Tensor, FixedCacheState, Tensor | None]:
        """(R,) previous tokens -> logits (R, V), the state, the attention (R, S) or None. The
        logits are overwritten by the next step; the attention is the caller's to keep."""
        self.prev.copy_(prev_tokens)
        prefix = min(self.length, (self.steps // self.bucket + 1) * self.bucket)
        key = (prefix, self.reordered)
        if self.capture:
            if key not in self.graphs:
                self.graphs[key] = self._captured(state, *key)
            graph, (logits, weights) = self.graphs[key]
            graph.replay()
        else:
            logits, weights = self._eager(state, *key)
        self.steps += 1
        self.reordered = False
        return logits, state, None if weights is None else weights.clone()

    def reorder(self, state: FixedCacheState, index: Tensor) -> FixedCacheState:
        """Row r continues old row index[r] (R,), applied by the next step."""
        if index.numel() != self.rows.numel():
            raise ValueError(
                f"captured search keeps all {self.rows.numel()} rows, but was asked to go on "
                f"with {index.numel()}: search with shrink_below=0"
            )
        self.rows.copy_(index)
        self.reordered = True
        return state

    def _eager(self, state: FixedCacheState, prefix: int, reordered: bool) -> Outputs:
        if reordered:
            self.steps_over.reorder(state, self.rows, prefix)
        return self.steps_over.step(self.prev, state, self.attention, prefix)

    def _captured(
        self, state: FixedCacheState, prefix: int, reordered: bool
    ) -> tuple[torch.cuda.CUDAGraph, Outputs]:
        """The step over `prefix` positions (after the reordering, if `reordered`) captured
        where the search has got to. Its warm-up runs write at the next position, which the
        replay writes again before anything reads it, and reorder nothing; the position and the
        pending reordering are put back after them. The first capture of a search warms up
        twice (as `torch.cuda.graphs` asks), later ones once; all share one memory pool."""
        at, rows = state.at.clone(), self.rows.clone()
        self.rows.copy_(torch.arange(rows.numel(), device=rows.device))
        pool = next(iter(self.graphs.values()))[0].pool() if self.graphs else None
        warmups = 1 if self.graphs else 2
        captured = _capture_graph(
            lambda: self._eager(state, prefix, reordered), lambda: state.at.copy_(at), pool,
            warmups,
        )  # fmt: skip
        state.at.copy_(at)
        self.rows.copy_(rows)
        return captured


def _capture_graph(
    step: Callable[[], Outputs], restart: Callable[[], object], pool: object, warmups: int
) -> tuple[torch.cuda.CUDAGraph, Outputs]:
    """`step` captured into a CUDA graph after `warmups` runs on a side stream (as
    `torch.cuda.graphs` asks), each after `restart`, and the tensors its replays write. Under
    autocast the cast weights are not cached, since a graph must own what it reads."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmups):
            restart()
            step()
    torch.cuda.current_stream().wait_stream(side)
    restart()
    graph = torch.cuda.CUDAGraph()
    with _uncached_autocast(), torch.cuda.graph(graph, pool=pool):
        outputs = step()
    return graph, outputs


def _uncached_autocast() -> torch.autocast:
    """The autocast in force on CUDA again, without its cache of cast weights (disabled if none
    is)."""
    enabled = torch.is_autocast_enabled("cuda")
    dtype = torch.get_autocast_dtype("cuda")
    return torch.autocast("cuda", dtype=dtype, enabled=enabled, cache_enabled=False)
