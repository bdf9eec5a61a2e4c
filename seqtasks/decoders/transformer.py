"""Transformer decoder (Vaswani et al. 2017, §3.1): masked self-attention, cross-attention over
any `Memory`, and incremental decoding with cached keys and values."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqtasks.attention.base import Attention, AttentionMemory
from seqtasks.attention.multihead import MultiHeadAttention
from seqtasks.decoders.base import Decoder, DecoderOutput
from seqtasks.layers.memory import Memory
from seqtasks.layers.transformer import (
    FeedForward,
    Residual,
    StackNorm,
    Stream,
    TransformerSettings,
    grid_positions,
    init_linear_layers,
    recomputed,
)


@dataclass
class TransformerState:
    """State of the decoder during search.

    `self_keys`/`self_values` hold, per layer, the keys and values of every position decoded
    so far, one row per hypothesis (R, H, t, D/H): a step computes only the new position. With
    linear self-attention they hold its running sums M (R, H, d, d) and z (R, H, d) instead,
    whose size does not grow with t.
    `memory` holds, per layer, what its cross-attention reads of the source, projected once per
    input (keys and values (B, H, S, D/H) each for multi-head attention, and the mask (B, S)),
    and moves only when search drops finished inputs. `rows` (R,), when set, is a reordering of
    the self-attention caches that the next step applies while extending them, so a beam-search
    step copies each cache once, not twice.
    """

    self_keys: list[Tensor]
    self_values: list[Tensor]
    memory: list[AttentionMemory]
    position: int  # t, the index of the next position
    rows: Tensor | None = None


def sized_cross_attention(factory: Callable[[int, int], Attention], d: int, m: int) -> Attention:
    """`factory(d_model, memory_dim)`, refused if its context does not fit the residual stream."""
    attention = factory(d, m)
    if attention.out_dim != d:
        raise ValueError(
            f"the Transformer decoder's cross_attention {type(attention).__name__} gives contexts "
            f"{attention.out_dim} wide, but its residual stream is d_model={d} wide: choose one "
            "whose context has the query's width (MultiHeadAttention)"
        )
    return attention


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the memory, feed-forward net."""

    def __init__(
        self, s: TransformerSettings, cross_attention: Callable[[int, int], Attention], memory: int
    ):
        super().__init__()
        self.self_attention = s.self_attention_layer()
        self.cross_attention = sized_cross_attention(cross_attention, s.d_model, memory)
        self.feed_forward = FeedForward(s.d_model, s.ff_dim)
        self.residual_self = Residual(s.d_model, s.norm, s.dropout)
        self.residual_cross = Residual(s.d_model, s.norm, s.dropout)
        self.residual_ff = Residual(s.d_model, s.norm, s.dropout)

    def forward(
        self, stream: Stream, memory: AttentionMemory, need_weights: bool, per_head: bool = False
    ) -> tuple[Stream, Tensor | None]:
        """Every position at once under the causal mask; returns the stream and the
        cross-attention weights averaged over heads (B, T, S), or per head (B, H, T, S), if
        asked for."""
        weights = None

        def cross(h: Tensor) -> Tensor:
            nonlocal weights
            out, weights = self.cross_attention(h, memory, need_weights, per_head)
            return out

        stream = self.residual_self(stream, lambda h: self.self_attention(h, causal=True))
        stream = self.residual_cross(stream, cross)
        return self.residual_ff(stream, self.feed_forward), weights

    def step(
        self,
        stream: Stream,
        prefix_keys: Tensor,
        prefix_values: Tensor,
        memory: AttentionMemory,
        rows: Tensor | None,
        need_weights: bool,
    ) -> tuple[Stream, Tensor, Tensor, Tensor | None]:
        """One new position per row (the caches' `rows` reordered first, if given): returns the
        stream, the self-attention caches extended by that position, and the cross-attention
        weights (R, 1, S) if asked for."""
        prefix = None

        def attend_prefix(h: Tensor) -> Tensor:
            nonlocal prefix
            out, *prefix = self.self_attention.step(h, prefix_keys, prefix_values, rows)
            return out

        stream, weights = self.step_with(stream, attend_prefix, memory, need_weights)
        return stream, prefix[0], prefix[1], weights

    def step_with(
        self,
        stream: Stream,
        attend_prefix: Callable[[Tensor], Tensor],
        memory: AttentionMemory,
        need_weights: bool,
    ) -> tuple[Stream, Tensor | None]:
        """One new position per row, its self-attention over the prefix given as
        `attend_prefix` (a growing cache in `step`, a fixed one in `fixed_cache`): the stream,
        and the cross-attention weights (R, 1, S) if asked for."""
        weights = None

        def cross(h: Tensor) -> Tensor:
            nonlocal weights
            out, weights = self.cross_attention(h, memory, need_weights)
            return out

        stream = self.residual_self(stream, attend_prefix)
        stream = self.residual_cross(stream, cross)
        return self.residual_ff(stream, self.feed_forward), weights


class TransformerDecoder(Decoder):
    """A stack of decoder layers over any encoder's memory, with tied output embeddings.

    Teacher forcing runs every position at once under a causal mask; `step` runs one new
    position per hypothesis against cached keys and values, so a search step costs O(1)
    positions of work per layer instead of re-running the prefix. Both give the same logits.

    Args:
        vocab_size: target vocabulary size V (given by the task).
        memory_dim: width of the annotations (the encoder's `out_dim`, given by the task).
        tie_embeddings: the output projection is the target embedding matrix (§3.4; Press and
            Wolf 2017); otherwise a separate linear layer.
        grid_positions: add 2-D sinusoidal positions to a memory that comes from an image grid
            (`memory.grid` set), since attention alone cannot tell where a cell is.
        cross_attention: every layer's attention over the memory, built as
            `cross_attention(d_model, memory_dim)`: any `seqtasks.attention.Attention` whose
            context is d_model wide (YAML: `{class_path: seqtasks.attention.MultiHeadAttention,
            init_args: {heads: 8}}`); by default `MultiHeadAttention` with `num_heads` heads
            and `attention_dropout`.
        **settings: the rest `TransformerSettings`', by keyword, as for `TransformerEncoder`
    """

    def __init__(
        self,
        vocab_size: int,
        memory_dim: int,
        tie_embeddings: bool = True,
        grid_positions: bool = True,
        cross_attention: Callable[[int, int], Attention] | None = None,
        **settings: Any,
    ):
        super().__init__()
        s = TransformerSettings(**settings)
        self.vocab_size = vocab_size
        self.max_positions = s.max_positions
        self.embeddings = s.embeddings(vocab_size)
        if cross_attention is None:
            cross_attention = partial(
                MultiHeadAttention, heads=s.num_heads, dropout=s.attention_dropout
            )
        layers = (DecoderLayer(s, cross_attention, memory_dim) for _ in range(s.num_layers))
        self.layers = nn.ModuleList(layers)
        self.stack = StackNorm(s.d_model, s.norm)
        rows = self.embedding.num_embeddings  # V, or V padded (`vocab_multiple`)
        self.output = None if tie_embeddings else nn.Linear(s.d_model, rows)
        self.grid_positions = grid_positions
        self.activation_checkpointing = s.activation_checkpointing
        init_linear_layers(self.layers)
        if self.output is not None:
            init_linear_layers(self.output)

    @property
    def embedding(self) -> nn.Embedding:
        """The target token table (also the output projection when tied)."""
        return self.embeddings.embedding

    def search_widths(self) -> tuple[int, int]:
        """2·layers·D a row and position: each layer's self-attention keys and values (linear
        self-attention keeps a fixed-size state instead, counted the same: an over-estimate)."""
        width = self.embedding.embedding_dim
        return 2 * len(self.layers) * width, width

    def fixed_cache_steps(self):  # noqa: ANN201 (decoders.fixed_cache imports this module)
        """`TransformerFixedSteps` where every self-attention is softmax (`takes_fixed_cache`)."""
        from seqtasks.decoders.fixed_cache import TransformerFixedSteps, takes_fixed_cache

        return TransformerFixedSteps(self) if takes_fixed_cache(self) else None

    def logits(self, x: Tensor) -> Tensor:
        """(…, D) -> (…, V), by a product over the table's rows, the padded ones cut after it
        (`vocab_multiple`)."""
        logits = F.linear(x, self.embedding.weight) if self.output is None else self.output(x)
        if logits.size(-1) != self.vocab_size:
            logits = logits[..., : self.vocab_size]
        return logits

    def memory_states(self, memory: Memory) -> Tensor:
        """The annotations, with 2-D positions added when they come from an image grid."""
        if memory.grid is None or not self.grid_positions:
            return memory.states
        table = grid_positions(*memory.grid, memory.states.size(-1)).to(memory.states)
        return memory.states + table

    def project_memory(self, memory: Memory) -> list[AttentionMemory]:
        """What each layer's cross-attention reads of the memory, projected once per source."""
        states = self.memory_states(memory)
        return [layer.cross_attention.project_memory(states, memory.mask) for layer in self.layers]

    def forward(
        self, memory: Memory, tgt_in: Tensor, need_attention: bool = False, per_head: bool = False
    ) -> DecoderOutput:
        """Teacher forcing: (B, T) inputs -> logits (B, T, V); with `need_attention`, the last
        layer's cross-attention averaged over heads (B, T, S), as plotted, as `step` gives and
        as the attention loss terms read it, or per head (B, H, T, S).

        Padding after EOS needs no mask: under the causal mask no real position sees it.
        """
        cross = self.project_memory(memory)
        stream: Stream = self.stack.begin(self.embeddings(tgt_in))
        last = len(self.layers) - 1
        recompute = self.activation_checkpointing and self.training and torch.is_grad_enabled()
        for i, layer in enumerate(self.layers):
            stream, weights = recomputed(layer, recompute)(
                stream, cross[i], need_attention and i == last, per_head
            )
        return DecoderOutput(self.logits(self.stack.end(stream)), weights)

    def start(self, memory: Memory, beam_size: int = 1) -> TransformerState:
        cross = self.project_memory(memory)
        rows = memory.states.size(0) * beam_size
        like = cross[0].keys.new_empty(0, self.embedding.embedding_dim)  # dtype, device, D
        caches = [layer.self_attention.empty_cache(rows, like) for layer in self.layers]
        return TransformerState(
            self_keys=[first for first, _ in caches],
            self_values=[second for _, second in caches],
            memory=cross,
            position=0,
        )

    def step(
        self, prev_tokens: Tensor, state: TransformerState
    ) -> tuple[Tensor, TransformerState, Tensor]:
        """(R,) previous tokens -> logits (R, V), the state with caches one position longer,
        and the last layer's cross-attention weights (R, S)."""
        x = self.embeddings(prev_tokens[:, None], start=state.position)  # (R, 1, D)
        stream: Stream = self.stack.begin(x)
        self_keys, self_values = [], []
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            stream, k, v, weights = layer.step(
                stream,
                state.self_keys[i],
                state.self_values[i],
                state.memory[i],
                state.rows,
                need_weights=i == last,
            )
            self_keys.append(k)
            self_values.append(v)
        logits = self.logits(self.stack.end(stream))[:, 0]
        state = replace(
            state,
            self_keys=self_keys,
            self_values=self_values,
            position=state.position + 1,
            rows=None,
        )
        return logits, state, weights[:, 0]

    def reorder(self, state: TransformerState, index: Tensor) -> TransformerState:
        """Row r continues old row index[r]: recorded for the next `step`, which applies it to
        the self-attention caches as it extends them."""
        current = state.self_keys[0].size(0) if state.rows is None else state.rows.numel()
        rows = index if state.rows is None else state.rows.index_select(0, index)
        state = replace(state, rows=rows)
        if index.numel() != current:  # whole inputs were dropped
            group = current // state.memory[0].mask.size(0)
            inputs = index[::group] // group
            state = replace(state, memory=[m.select(inputs) for m in state.memory])
        return state
