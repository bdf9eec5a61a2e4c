"""The Transformer decoder's search step over key/value caches of a fixed length.

`TransformerDecoder.step` grows each layer's self-attention cache by one position a step, so
every step has new shapes and new tensors. Here the caches hold the whole length L from the
start, the new position is written in place at an index kept on the device, and attention reads
the positions written so far through a mask: every step runs the same kernels on the same
addresses, which is what a captured CUDA graph replays (`seqtasks.search.captured`). The outputs
are `step`'s (tested): the masked positions get weight exactly 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import torch
from torch import Tensor

from seqtasks.attention.base import AttentionMemory
from seqtasks.attention.multihead import SelfAttention
from seqtasks.decoders.transformer import TransformerDecoder
from seqtasks.layers.memory import Memory
from seqtasks.layers.transformer import Stream


@dataclass
class FixedState:
    """Search state whose tensors keep their shapes and addresses for the whole search.

    `keys`/`values` hold, per layer, (R, H, L, D/H): positions 0 … `at` − 1 written, the rest
    unread. `memory` is each layer's projected source (`TransformerState.memory`). `at` (1,) is
    the next position, on the device; `positions` (L,) is 0 … L − 1, to compare it with.
    """

    keys: list[Tensor]
    values: list[Tensor]
    memory: list[AttentionMemory]
    at: Tensor
    positions: Tensor

    @property
    def rows(self) -> int:
        return self.keys[0].size(0)


@dataclass(frozen=True)
class TransformerFixedSteps:
    """A Transformer decoder's `FixedCacheSteps`: `start_fixed`, `step_fixed` and
    `reorder_fixed` of its layers."""

    decoder: TransformerDecoder

    def start(self, memory: Memory, beam_size: int, length: int) -> FixedState:
        return start_fixed(self.decoder, memory, beam_size, length)

    def step(
        self, prev_tokens: Tensor, state: FixedState, need_weights: bool, prefix: int | None = None
    ) -> tuple[Tensor, Tensor | None]:
        return step_fixed(self.decoder, prev_tokens, state, need_weights, prefix)

    def reorder(self, state: FixedState, rows: Tensor, prefix: int | None = None) -> None:
        reorder_fixed(state, rows, prefix)


def takes_fixed_cache(decoder: object) -> bool:
    """Whether `decoder` can search over fixed caches: a `TransformerDecoder` whose every
    self-attention keeps keys and values (`keeps_keys_and_values`)."""
    return isinstance(decoder, TransformerDecoder) and all(
        keeps_keys_and_values(type(layer.self_attention)) for layer in decoder.layers
    )


def keeps_keys_and_values(kind: type[SelfAttention]) -> bool:
    """Softmax self-attention's growing cache (`SelfAttention.step`), or a `step_fixed` of its
    own beside its own `step` (relative attention); linear self-attention keeps running sums."""
    return kind.step is SelfAttention.step or kind.step_fixed is not SelfAttention.step_fixed


def start_fixed(
    decoder: TransformerDecoder, memory: Memory, beam_size: int, length: int
) -> FixedState:
    """The state before the first of at most `length` steps, with B·`beam_size` rows."""
    cross = decoder.project_memory(memory)
    rows, like = memory.states.size(0) * beam_size, cross[0].keys
    caches = []
    for layer in decoder.layers:
        heads = layer.self_attention.heads
        shape = (rows, heads, length, decoder.embedding.embedding_dim // heads)
        caches.append((like.new_zeros(shape), like.new_zeros(shape)))
    return FixedState(
        keys=[k for k, _ in caches],
        values=[v for _, v in caches],
        memory=cross,
        at=torch.zeros(1, dtype=torch.long, device=like.device),
        positions=torch.arange(length, device=like.device),
    )


def step_fixed(
    decoder: TransformerDecoder,
    prev_tokens: Tensor,
    state: FixedState,
    need_weights: bool,
    prefix: int | None = None,
) -> tuple[Tensor, Tensor | None]:
    """(R,) previous tokens -> logits (R, V) and, if `need_weights`, the last layer's
    cross-attention (R, S), as `TransformerDecoder.step` gives them; writes the caches at
    `state.at` and moves it on by one, in place. Only the caches' first `prefix` positions are
    read (all L if None), which must hold `state.at`: a step early in a long search reads a
    short prefix, and each prefix is a fixed view of the caches, capturable as they are."""
    length = state.positions.numel() if prefix is None else prefix
    x = decoder.embeddings.at(prev_tokens[:, None], state.at)  # (R, 1, D)
    visible = (state.positions[:length] <= state.at)[None]  # (1, P): it sees positions ≤ at
    stream: Stream = decoder.stack.begin(x)
    last = len(decoder.layers) - 1
    weights = None
    for i, layer in enumerate(decoder.layers):
        attend_prefix = partial(
            layer.self_attention.step_fixed,
            keys=state.keys[i][:, :, :length], values=state.values[i][:, :, :length],
            at=state.at, visible=visible,
        )  # fmt: skip
        stream, weights = layer.step_with(
            stream, attend_prefix, state.memory[i], need_weights and i == last
        )
    logits = decoder.logits(decoder.stack.end(stream))[:, 0]
    state.at += 1
    return logits, None if weights is None else weights[:, 0]


def reorder_fixed(state: FixedState, rows: Tensor, prefix: int | None = None) -> None:
    """Row r of every cache continues old row rows[r] (R,), in place (every row is kept), over
    the caches' first `prefix` positions (all if None): those written so far."""
    length = state.positions.numel() if prefix is None else prefix
    for cache in (*state.keys, *state.values):
        written = cache[:, :, :length]
        written.copy_(written.index_select(0, rows))
