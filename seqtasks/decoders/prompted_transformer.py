"""A decoder-only Transformer: one causal stack reads the source as a prompt and writes the
target after it, "[sentence] [SEP] [sentence]" (`../shared/seeds/004…`, "A single RNN as
encoder-decoder", and its causal vs bidirectional attention; Liu et al. 2018 and Radford et al.
2018 train such stacks, "decoder-only"), <s> as the separator.

Every layer is self-attention under the causal mask and the feed-forward net, with no
cross-attention: a target position attends to every real prompt position and to the target
positions up to itself,

    z = [P m_1 + p_1, …, P m_S + p_S, √D·E y_0 + p_{S'+0}, …, √D·E y_{T−1} + p_{S'+T−1}]

where S' is the row's own prompt length, so a row's positions do not depend on the padding of
the others in its batch (batched search equals one input at a time). The loss falls on the
target alone: the logits returned are the target positions'.

Search reads the prompt once in `start`, keeping each layer's prompt keys and values once per
input (as the encoder–decoder Transformer keeps its projected memory), and each step adds one
target position per row to growing caches of keys and values.

Its attention over the memory is the last layer's weights of the target positions on the prompt,
averaged over heads, as the encoder–decoder Transformer gives its last cross-attention; one
softmax spans prompt and target, so a row's weights sum to its share on the prompt (at most 1),
the rest falling on the target written so far. Under a recording (`attention="all"`) each
layer's one attention is kept block by block as the three kinds the encoder–decoder has: the
prompt reading itself ("encoder"), the target reading the prompt ("cross") and itself
("decoder").
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqtasks.decoders.base import Decoder, DecoderOutput
from seqtasks.layers.memory import Memory
from seqtasks.layers.prompted import Prompt, PromptedLayer, visible
from seqtasks.layers.transformer import (
    StackNorm,
    Stream,
    TransformerSettings,
    grid_positions,
    init_linear_layers,
)


@dataclass
class PromptedState:
    """State of the decoder-only Transformer during search.

    `prompt` holds each layer's keys and values of the prompt, with `mask` (B, S) and
    `lengths` (B,), once per input; `keys`/`values` each layer's of the target positions so
    far, (R, H, t, D/H), one row per hypothesis; `rows`, when set, the reordering the next
    step applies to those as it extends them.
    """

    prompt: list[Prompt]
    mask: Tensor
    lengths: Tensor
    keys: list[Tensor]
    values: list[Tensor]
    position: int  # t, the next target position
    rows: Tensor | None = None


class PromptedTransformerDecoder(Decoder):
    """A decoder-only Transformer over any memory taken as its prompt: a text encoder's states
    (`PromptEncoder`'s token vectors make it a single network, as the deck asks) or an image
    grid's cells (with 2-D positions added, as the encoder–decoder Transformer adds them).

    Args:
        vocab_size: target vocabulary size V (given by the task).
        memory_dim: width of the prompt's vectors (the encoder's `out_dim`, given by the task).
        tie_embeddings: the output projection is the target embedding matrix.
        grid_positions: add 2-D sinusoidal positions to a prompt from an image grid.
        **settings: `TransformerSettings`, by keyword, as for `TransformerDecoder`; its
            self-attention must be `SelfAttention` (softmax), which takes the padding mask.
    """

    attention_sums_to_one = False  # its rows sum to the share on the prompt

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
        self.prompt = nn.Linear(memory_dim, s.d_model)  # P
        self.layers = nn.ModuleList(PromptedLayer(s) for _ in range(s.num_layers))
        self.stack = StackNorm(s.d_model, s.norm)
        rows = self.embedding.num_embeddings
        self.output = None if tie_embeddings else nn.Linear(s.d_model, rows)
        self.grid_positions = grid_positions
        init_linear_layers(self)

    @property
    def embedding(self) -> nn.Embedding:
        return self.embeddings.embedding

    def search_widths(self) -> tuple[int, int]:
        """2·layers·D a row and position, each layer's keys and values."""
        width = self.embedding.embedding_dim
        return 2 * len(self.layers) * width, width

    def logits(self, x: Tensor) -> Tensor:
        logits = F.linear(x, self.embedding.weight) if self.output is None else self.output(x)
        return logits[..., : self.vocab_size]

    def prompt_vectors(self, memory: Memory) -> Tensor:
        """(B, S, D): P m_j + p_j, dropped out as the embeddings are."""
        states = memory.states
        if memory.grid is not None and self.grid_positions:
            states = states + grid_positions(*memory.grid, states.size(-1)).to(states)
        table = self.embeddings.position_table(0, states.size(1))
        return self.embeddings.dropout(self.prompt(states) + table)

    def target_vectors(self, tokens: Tensor, positions: Tensor, length: int) -> Tensor:
        """(B, T) tokens at (B, T) positions, all under `length` (known on the host, so the
        table refuses a sequence longer than `max_positions` without reading the device)
        -> (B, T, D): √D·E y + p."""
        table = self.embeddings.position_table(0, length)
        x = self.embedding(tokens) * self.embeddings.scale + table[positions]
        return self.embeddings.dropout(x)

    def forward(
        self, memory: Memory, tgt_in: Tensor, need_attention: bool = False, per_head: bool = False
    ) -> DecoderOutput:
        """(B, T) target inputs -> logits (B, T, V) of the target positions; with
        `need_attention`, the last layer's weights of the target over the prompt, averaged over
        heads (B, T, S) or per head (B, H, T, S), as `step` gives them."""
        prompt_length, steps = memory.states.size(1), tgt_in.size(1)
        positions = memory.lengths[:, None] + torch.arange(steps, device=tgt_in.device)
        x = torch.cat(
            [
                self.prompt_vectors(memory),
                self.target_vectors(tgt_in, positions, prompt_length + steps),
            ],
            1,
        )
        stream: Stream = self.stack.begin(x)
        allowed, last = visible(memory.mask, steps), len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            stream, _, weights = layer(stream, allowed, prompt_length, need_attention and i == last)
        if weights is not None and not per_head:
            weights = weights.mean(1)
        return DecoderOutput(self.logits(self.stack.end(stream)[:, prompt_length:]), weights)

    def start(self, memory: Memory, beam_size: int = 1) -> PromptedState:
        stream: Stream = self.stack.begin(self.prompt_vectors(memory))
        allowed, prompt = visible(memory.mask, 0), []
        for layer in self.layers:
            stream, kept, _ = layer(stream, allowed, memory.states.size(1))
            prompt.append(kept)
        k = prompt[0][0]
        empty = k.new_zeros(k.size(0) * beam_size, k.size(1), 0, k.size(3))
        return PromptedState(
            prompt=prompt,
            mask=memory.mask,
            lengths=memory.lengths,
            keys=[empty] * len(self.layers),
            values=[empty] * len(self.layers),
            position=0,
        )

    def step(
        self, prev_tokens: Tensor, state: PromptedState
    ) -> tuple[Tensor, PromptedState, Tensor]:
        """(R,) previous tokens -> logits (R, V), the state one position on, and the last
        layer's weights over the prompt averaged over heads (R, S)."""
        group = prev_tokens.size(0) // state.mask.size(0)
        positions = state.lengths.repeat_interleave(group)[:, None] + state.position  # (R, 1)
        length = state.mask.size(1) + state.position + 1
        x = self.target_vectors(prev_tokens[:, None], positions, length)
        stream: Stream = self.stack.begin(x)
        keys, values = [], []
        for i, layer in enumerate(self.layers):
            stream, k, v, weights = layer.step(
                stream, state.prompt[i], state.mask, state.keys[i], state.values[i], state.rows
            )
            keys.append(k)
            values.append(v)
        logits = self.logits(self.stack.end(stream))[:, 0]
        state = replace(state, keys=keys, values=values, position=state.position + 1, rows=None)
        return logits, state, weights.mean(1)[:, 0]

    def reorder(self, state: PromptedState, index: Tensor) -> PromptedState:
        """Row r continues old row index[r] (applied by the next step); dropping whole inputs
        drops their prompt too."""
        current = state.keys[0].size(0) if state.rows is None else state.rows.numel()
        rows = index if state.rows is None else state.rows.index_select(0, index)
        state = replace(state, rows=rows)
        if index.numel() != current:
            group = current // state.mask.size(0)
            inputs = index[::group] // group
            state = replace(
                state,
                prompt=[(k[inputs], v[inputs]) for k, v in state.prompt],
                mask=state.mask[inputs],
                lengths=state.lengths[inputs],
            )
        return state
