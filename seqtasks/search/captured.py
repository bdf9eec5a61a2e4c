"""Search steps replayed from CUDA graphs (`SearchSettings.cuda_graphs`).

A step of the 3-layer Transformer decoder runs ~90 operators (counted on the CPU: 88), each a
kernel that the host launches on a GPU, whatever the batch; so there the host, not the device,
sets the speed of search (docs/gpu.md, "What limits each"). Over fixed caches
(`seqtasks.decoders.fixed_cache`) a step has the same shapes and addresses every time, so it is
captured once per batch into a CUDA graph (two for beam search: a step, and a step after the
beams' reordering) and replayed as one launch. Every row stays in the batch to the end (the
search's `shrink_below` 0): a graph cannot drop rows, and on a GPU a finished row costs almost
nothing.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from seqtasks.decoders.fixed_cache import FixedState, reorder_fixed, start_fixed, step_fixed
from seqtasks.decoders.transformer import TransformerDecoder
from seqtasks.layers.memory import Memory

Outputs = tuple[Tensor, Tensor | None]  # a step's logits (R, V) and attention (R, S) or None


class CapturedSteps:
    """`start`, `step` and `reorder` of a Transformer decoder for the search loops, each step
    one replay of a captured graph (`capture`), or the same fixed-cache steps run eagerly (on a
    CPU, and in the tests that compare the two).

    Args:
        decoder: a decoder that `takes_fixed_cache`.
        length: the most steps of the search (its longest length limit).
        attention: whether the search keeps the attention weights (else none are computed).
        capture: capture CUDA graphs (the memory must be on a CUDA device).
    """

    def __init__(
        self, decoder: TransformerDecoder, length: int, attention: bool, capture: bool = True
    ):
        self.decoder, self.length = decoder, length
        self.attention, self.capture = attention, capture
        self.max_positions = decoder.max_positions

    def start(self, memory: Memory, beam_size: int = 1) -> FixedState:
        state = start_fixed(self.decoder, memory, beam_size, self.length)
        rows = state.keys[0].size(0)
        self.prev = torch.zeros(rows, dtype=torch.long, device=state.at.device)
        self.rows = torch.arange(rows, device=state.at.device)  # what `reorder` last asked for
        self.reordered = False  # whether the next step reorders the caches first
        self.graphs: dict[bool, tuple[torch.cuda.CUDAGraph, Outputs]] = {}
        if self.capture and self.length:
            restart = state.at.zero_  # warm-up steps write positions the search overwrites
            self.graphs[False] = _captured(lambda: self._eager(state, False), restart)
            if beam_size > 1:
                pool = self.graphs[False][0].pool()
                self.graphs[True] = _captured(lambda: self._eager(state, True), restart, pool)
            restart()
        return state

    def step(
        self, prev_tokens: Tensor, state: FixedState
    ) -> tuple[Tensor, FixedState, Tensor | None]:
        """(R,) previous tokens -> logits (R, V), the state, the attention (R, S) or None. The
        logits are overwritten by the next step; the attention is the caller's to keep."""
        self.prev.copy_(prev_tokens)
        if self.capture:
            graph, (logits, weights) = self.graphs[self.reordered]
            graph.replay()
        else:
            logits, weights = self._eager(state, self.reordered)
        self.reordered = False
        return logits, state, None if weights is None else weights.clone()

    def reorder(self, state: FixedState, index: Tensor) -> FixedState:
        """Row r continues old row index[r] (R,), applied by the next step."""
        if index.numel() != self.rows.numel():
            raise ValueError(
                f"captured search keeps all {self.rows.numel()} rows, but was asked to go on "
                f"with {index.numel()}: search with shrink_below=0"
            )
        self.rows.copy_(index)
        self.reordered = True
        return state

    def _eager(self, state: FixedState, reordered: bool) -> Outputs:
        if reordered:
            reorder_fixed(state, self.rows)
        return step_fixed(self.decoder, self.prev, state, self.attention)


def _captured(
    step: Callable[[], Outputs], restart: Callable[[], object], pool: object = None
) -> tuple[torch.cuda.CUDAGraph, Outputs]:
    """`step` captured into a CUDA graph, after two warm-up runs on a side stream (as
    `torch.cuda.graphs` asks), each after `restart` (so they stay within the caches), and the
    tensors its replays write. Under autocast the cast weights are not cached, since a graph
    must own what it reads."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            restart()
            step()
    torch.cuda.current_stream().wait_stream(side)
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
