"""Universal Transformer decoder (Dehghani et al. 2019, §2.1–2.2; ../shared/seeds/
002_c600f22193c4e1d3.txt, "Universal Transformer - Additions"): the Transformer's decoder layer
(`DecoderLayer`: masked self-attention, cross-attention, feed-forward net) applied `steps` times
with shared weights, a coordinate embedding over position and step added before each
(`layers/universal.py`), optionally halting per target position by adaptive computation time
(`layers/act.py`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor

from seqtasks.attention.base import Attention
from seqtasks.decoders.base import DecoderOutput
from seqtasks.decoders.transformer import DecoderLayer, TransformerDecoder, TransformerState
from seqtasks.layers.memory import Memory
from seqtasks.layers.transformer import Stream, recomputed
from seqtasks.layers.universal import DepthRecurrence, UniversalSettings, token_states


class UniversalTransformerDecoder(TransformerDecoder):
    """The Transformer decoder's embeddings, output projection and one `DecoderLayer`, the
    layer applied at every step t = 1 … T of the recurrence in depth.

    Search keeps a key/value cache per step: a new position at step t attends to the step-t
    states of the earlier positions, cached, so `step` runs T applications of the layer to
    one position and never re-runs the prefix; with `act`, a position halted before step t
    has its carried state's keys and values there, in `forward` as in `step` (which give the
    same logits and attention). Where the Transformer gives its last layer's cross-attention,
    this gives step T's, or with `act` each position's ACT-weighted mean over its steps (as
    its output state is). With `act`, `DecoderOutput.auxiliary_loss` is each example's ponder
    cost τ Σ_t (N_t + R_t) over its real target positions.

    Args:
        vocab_size, memory_dim, tie_embeddings, grid_positions, cross_attention: as for
            `TransformerDecoder` (one cross-attention, that of the shared layer).
        **settings: `UniversalSettings`', by keyword: steps, act, act_threshold, ponder_cost,
            and the layer's d_model, num_heads, ff_dim, dropout, attention_dropout, norm,
            positions, max_positions, pad_id, self_attention, activation_checkpointing,
            vocab_multiple (num_layers may only be 1)
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
        s = UniversalSettings(**settings)
        layer = s.transformer()
        super().__init__(
            vocab_size, memory_dim, tie_embeddings, grid_positions, cross_attention, **layer
        )
        self.recurrence = DepthRecurrence(s)
        self.ponder_cost = s.ponder_cost
        self.pad_id = s.pad_id

    @property
    def layer(self) -> DecoderLayer:
        """The one layer every step applies."""
        return self.layers[0]

    def search_widths(self) -> tuple[int, int]:
        """2·T·D a row and position: the keys and values of each step's self-attention."""
        width = self.embedding.embedding_dim
        return 2 * self.recurrence.steps * width, width

    def fixed_cache_steps(self) -> None:
        """None: no steps over fixed caches, so search steps with `step` (CUDA graphs or not)."""
        return None

    def forward(
        self, memory: Memory, tgt_in: Tensor, need_attention: bool = False, per_head: bool = False
    ) -> DecoderOutput:
        """Teacher forcing: (B, T) inputs -> logits (B, T, V); with `need_attention`, the
        cross-attention behind each position (B, T, S), or per head (B, H, T, S)."""
        cross = self.project_memory(memory)[0]
        recompute = self.activation_checkpointing and self.training and torch.is_grad_enabled()
        layer = recomputed(self.layer, recompute)

        def transition(t: int, stream: Stream, need: bool) -> tuple[Stream, Tensor | None]:
            return layer(stream, cross, need, per_head)

        positions = self.embeddings.position_table(0, tgt_in.size(1))  # (T, D)
        stream = self.stack.begin(token_states(self.embeddings, tgt_in))
        recurred = self.recurrence(stream, positions, transition, need_attention)
        ponder = None
        if recurred.ponder is not None:
            real = tgt_in != self.pad_id  # (B, T)
            ponder = self.ponder_cost * (recurred.ponder * real).sum(1)  # (B,)
        logits = self.logits(self.stack.end(recurred.stream))
        return DecoderOutput(logits, recurred.attention, auxiliary_loss=ponder)

    def start(self, memory: Memory, beam_size: int = 1) -> TransformerState:
        """`TransformerDecoder.start` with an empty self-attention cache for each step."""
        state = super().start(memory, beam_size)
        steps = self.recurrence.steps
        return replace(
            state, self_keys=state.self_keys * steps, self_values=state.self_values * steps
        )

    def step(
        self, prev_tokens: Tensor, state: TransformerState
    ) -> tuple[Tensor, TransformerState, Tensor]:
        """(R,) previous tokens -> logits (R, V), the state with each step's cache one position
        longer, and the cross-attention weights (R, S) (as `forward` gives them)."""
        keys, values = [], []

        def transition(t: int, stream: Stream, need: bool) -> tuple[Stream, Tensor | None]:
            stream, k, v, weights = self.layer.step(
                stream, state.self_keys[t], state.self_values[t], state.memory[0], state.rows, need
            )
            keys.append(k)
            values.append(v)
            return stream, weights

        positions = self.embeddings.position_table(state.position, 1)  # (1, D)
        stream = self.stack.begin(token_states(self.embeddings, prev_tokens[:, None]))
        recurred = self.recurrence(stream, positions, transition, need_attention=True)
        logits = self.logits(self.stack.end(recurred.stream))[:, 0]
        state = replace(
            state, self_keys=keys, self_values=values, position=state.position + 1, rows=None
        )
        return logits, state, recurred.attention[:, 0]
