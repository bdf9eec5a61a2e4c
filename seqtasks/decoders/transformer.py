"""Transformer decoder (Vaswani et al. 2017, §3.1): masked self-attention, cross-attention over
any `Memory`, and incremental decoding with cached keys and values."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqtasks.attention.linear import self_attention_class
from seqtasks.attention.multihead import CrossAttention
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
    `memory_keys`/`memory_values` hold, per layer, the projected memory once per input
    (B, H, S, D/H), and move only when search drops finished inputs. `rows` (R,), when set, is a
    reordering of the self-attention caches that the next step applies while extending them,
    so a beam-search step copies each cache once, not twice.
    """

    self_keys: list[Tensor]
    self_values: list[Tensor]
    memory_keys: list[Tensor]
    memory_values: list[Tensor]
    mask: Tensor  # (B, S)
    position: int  # t, the index of the next position
    rows: Tensor | None = None


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the memory, feed-forward net."""

    def __init__(self, s: TransformerSettings, memory_dim: int):
        super().__init__()
        heads, dropout = s.num_heads, s.attention_dropout
        self.self_attention = self_attention_class(s.self_attention)(s.d_model, heads, dropout)
        self.cross_attention = CrossAttention(s.d_model, memory_dim, heads, dropout)
        self.feed_forward = FeedForward(s.d_model, s.ff_dim)
        self.residual_self = Residual(s.d_model, s.norm, s.dropout)
        self.residual_cross = Residual(s.d_model, s.norm, s.dropout)
        self.residual_ff = Residual(s.d_model, s.norm, s.dropout)

    def forward(
        self,
        stream: Stream,
        keys: Tensor,
        values: Tensor,
        mask: Tensor,
        need_weights: bool,
        per_head: bool = False,
    ) -> tuple[Stream, Tensor | None]:
        """Every position at once under the causal mask; returns the stream and the
        cross-attention weights averaged over heads (B, T, S), or per head (B, H, T, S), if
        asked for."""
        weights = None

        def cross(h: Tensor) -> Tensor:
            nonlocal weights
            out, weights = self.cross_attention(h, keys, values, mask, need_weights, per_head)
            return out

        stream = self.residual_self(stream, lambda h: self.self_attention(h, causal=True))
        stream = self.residual_cross(stream, cross)
        return self.residual_ff(stream, self.feed_forward), weights

    def step(
        self,
        stream: Stream,
        prefix_keys: Tensor,
        prefix_values: Tensor,
        keys: Tensor,
        values: Tensor,
        mask: Tensor,
        rows: Tensor | None,
        need_weights: bool,
    ) -> tuple[Stream, Tensor, Tensor, Tensor | None]:
        """One new position per row (the caches' `rows` reordered first, if given): returns the
        stream, the self-attention caches extended by that position, and the cross-attention
        weights (R, 1, S) if asked for."""
        weights = prefix = None

        def attend_prefix(h: Tensor) -> Tensor:
            nonlocal prefix
            out, *prefix = self.self_attention.step(h, prefix_keys, prefix_values, rows)
            return out

        def cross(h: Tensor) -> Tensor:
            nonlocal weights
            out, weights = self.cross_attention(h, keys, values, mask, need_weights)
            return out

        stream = self.residual_self(stream, attend_prefix)
        stream = self.residual_cross(stream, cross)
        stream = self.residual_ff(stream, self.feed_forward)
        return stream, prefix[0], prefix[1], weights


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
        (the rest `TransformerSettings`', by keyword, as for `TransformerEncoder`)
    """

    def __init__(
        self,
        vocab_size: int,
        memory_dim: int,
        tie_embeddings: bool = True,
        grid_positions: bool = True,
        **settings: Any,
    ):
        super().__init__()
        s = TransformerSettings(**settings)
        self.vocab_size = vocab_size
        self.max_positions = s.max_positions
        self.embeddings = s.embeddings(vocab_size)
        self.layers = nn.ModuleList(DecoderLayer(s, memory_dim) for _ in range(s.num_layers))
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

    def project_memory(self, memory: Memory) -> tuple[list[Tensor], list[Tensor]]:
        states = self.memory_states(memory)
        pairs = [layer.cross_attention.project_memory(states) for layer in self.layers]
        return [k for k, _ in pairs], [v for _, v in pairs]

    def forward(
        self, memory: Memory, tgt_in: Tensor, need_attention: bool = False, per_head: bool = False
    ) -> DecoderOutput:
        """Teacher forcing: (B, T) inputs -> logits (B, T, V); with `need_attention`, the last
        layer's cross-attention averaged over heads (B, T, S), as plotted, as `step` gives and
        as the attention loss terms read it, or per head (B, H, T, S).

        Padding after EOS needs no mask: under the causal mask no real position sees it.
        """
        keys, values = self.project_memory(memory)
        stream: Stream = self.stack.begin(self.embeddings(tgt_in))
        last = len(self.layers) - 1
        recompute = self.activation_checkpointing and self.training and torch.is_grad_enabled()
        for i, layer in enumerate(self.layers):
            stream, weights = recomputed(layer, recompute)(
                stream, keys[i], values[i], memory.mask, need_attention and i == last, per_head
            )
        return DecoderOutput(self.logits(self.stack.end(stream)), weights)

    def start(self, memory: Memory, beam_size: int = 1) -> TransformerState:
        keys, values = self.project_memory(memory)
        rows = memory.states.size(0) * beam_size
        like = keys[0].new_empty(0, keys[0].size(1) * keys[0].size(-1))  # dtype, device, D
        caches = [layer.self_attention.empty_cache(rows, like) for layer in self.layers]
        return TransformerState(
            self_keys=[first for first, _ in caches],
            self_values=[second for _, second in caches],
            memory_keys=keys,
            memory_values=values,
            mask=memory.mask,
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
                state.memory_keys[i],
                state.memory_values[i],
                state.mask,
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
            group = current // state.mask.size(0)
            inputs = index[::group] // group
            state = replace(
                state,
                memory_keys=[k.index_select(0, inputs) for k in state.memory_keys],
                memory_values=[v.index_select(0, inputs) for v in state.memory_values],
                mask=state.mask.index_select(0, inputs),
            )
        return state
