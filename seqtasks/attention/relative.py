"""Self-attention with relative position representations (Shaw, Uszkoreit & Vaswani 2018): each
pair of positions i, j gets a learned vector for the distance j − i, clipped to ±k, added to the
key (and the value) that position i reads at j, so attention sees how far apart tokens are
instead of where each one is (the deck `003_85948a7533b04ca6.txt`, "Research Challenges":
"relative attention provides expressive timing, equivariance"; the absolute alternative on its
"Positional Encoding" slides):

    e_ij = x_i W^Q (x_j W^K + a^K_ij)ᵀ / √d_z                              (their eq. 4)
    z_i  = Σ_j α_ij (x_j W^V + a^V_ij),   α_i = softmax_j(e_ij)            (their eq. 3)
    a^K_ij = w^K_clip(j−i, k),   a^V_ij = w^V_clip(j−i, k)                 (their eq. 5)
    clip(x, k) = max(−k, min(k, x))                                        (their eq. 6)

with 2k + 1 vectors w^K (and w^V) of width d_z = D/H per layer, shared by its heads. As in their
§3.3, e_ij is split into q_i·k_jᵀ and q_i·a^K_ijᵀ: the second is an einsum of the queries with
the (T, S, d_z) table of clipped vectors, added to the scores as a (B, H, T, S) bias, which the
fused kernel takes as a float `attn_mask` when there is no value term.

Legend: B batch, H heads, T query positions, S key positions, d = d_z = D/H.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqtasks.attention.multihead import SelfAttention, _extend, fused_attention, merge_heads


class RelativeSelfAttention(SelfAttention):
    """Multi-head self-attention with Shaw et al.'s relative positions: `SelfAttention`'s
    projections and caches (keys and values (R, H, t, d), as search sizes them) plus the tables
    w^K and w^V. The Transformer's `self_attention` (YAML: `{class_path:
    seqtasks.attention.RelativeSelfAttention, init_args: {max_distance: 16}}`), usually with
    `positions: none`, since the distances replace absolute positions.

    Args:
        d_model, num_heads, dropout: as `SelfAttention`'s (given by the Transformer).
        max_distance: k, the distance beyond which pairs share one vector (their Table 3 finds
            little change for k ≥ 2; they train with k = 16). 0: one vector for every pair.
        values: add a^V to the values (eq. 3); False keeps a^K only (their Table 4's ablation)
            and lets the fused kernel run, the bias as its mask.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout: float,
        max_distance: int = 16,
        values: bool = True,
    ):
        super().__init__(d_model, num_heads, dropout)
        if max_distance < 0:
            raise ValueError(f"max_distance must be at least 0, got {max_distance}")
        self.max_distance = max_distance
        depth = d_model // num_heads
        # w^K, w^V (2k+1, d): row r for the distance r − k, drawn from N(0, 1/d)
        self.relative_keys = nn.Parameter(torch.randn(2 * max_distance + 1, depth) * depth**-0.5)
        self.relative_values = (
            nn.Parameter(torch.randn(2 * max_distance + 1, depth) * depth**-0.5) if values else None
        )

    def clipped(self, table: Tensor, queries: Tensor, keys: int) -> Tensor:
        """The table's vectors for query positions `queries` (T,) and keys 0 … `keys` − 1:
        (T, S, d), entry (i, j) being w_clip(j−i, k) (eqs. 5, 6)."""
        distance = torch.arange(keys, device=queries.device)[None, :] - queries[:, None]  # (T, S)
        k = self.max_distance
        return table[distance.clamp(-k, k) + k]

    def attend(self, q: Tensor, k: Tensor, v: Tensor, at: Tensor, visible: Tensor | None) -> Tensor:
        """Queries q (B, H, T, d) at positions `at` (T,) over keys and values (B, H, S, d) at
        0 … S − 1, the pairs where `visible` (broadcast to (B, H, T, S)) is true, if given ->
        the context z (B, H, T, d) (eqs. 3, 4)."""
        a_k = self.clipped(self.relative_keys, at, k.size(2))  # (T, S, d)
        bias = torch.einsum("bhtd,tsd->bhts", q, a_k) / math.sqrt(q.size(-1))  # q_i·a^K_ij/√d
        if visible is not None:
            bias = bias.masked_fill(~visible, float("-inf"))
        dropout = self.dropout if self.training else 0.0
        if self.relative_values is None and not self.recording:
            return fused_attention(q, k, v, attn_mask=bias, dropout_p=dropout)
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.size(-1)) + bias  # e_ij (B, H, T, S)
        alpha = torch.softmax(scores, dim=-1)
        self.keep(alpha)
        if dropout:
            alpha = F.dropout(alpha, dropout)
        if self.relative_values is None:  # recording keys-only relative attention (eq. 4 alone)
            return alpha @ v
        a_v = self.clipped(self.relative_values, at, k.size(2))  # (T, S, d)
        return alpha @ v + torch.einsum("bhts,tsd->bhtd", alpha, a_v)

    def forward(self, x: Tensor, key_mask: Tensor | None = None, causal: bool = False) -> Tensor:
        """(B, T, D) -> (B, T, D). `key_mask` (B, T) hides padding keys; `causal` lets position
        i see positions j ≤ i only."""
        q, k, v = self.project(x)
        positions = torch.arange(x.size(1), device=x.device)
        visible = None if key_mask is None else key_mask[:, None, None, :]  # (B, 1, 1, S)
        if causal:
            past = positions[None, :] <= positions[:, None]  # (T, S): j ≤ i
            visible = past if visible is None else visible & past
        context = self.attend(q, k, v, positions, visible)
        return self.out(merge_heads(context))

    def step(
        self, x: Tensor, keys: Tensor, values: Tensor, rows: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """`SelfAttention.step`: the new position is i = t, the cached length (R', H, t, d), and
        it reads keys j = 0 … t at distances j − t."""
        q, k, v = self.project(x)
        at = torch.arange(keys.size(2), keys.size(2) + 1, device=x.device)  # (1,): i = t
        keys, values = _extend(keys, k, rows), _extend(values, v, rows)
        context = self.attend(q, keys, values, at, None)
        return self.out(merge_heads(context)), keys, values

    def step_fixed(
        self, x: Tensor, keys: Tensor, values: Tensor, at: Tensor, visible: Tensor
    ) -> Tensor:
        """`SelfAttention.step_fixed`: the new position i = `at` (1,), on the device, written in
        place and attending to the cached positions where `visible` (1, L) is true, at
        distances j − at."""
        q, k, v = self.project(x)
        keys.index_copy_(2, at, k)
        values.index_copy_(2, at, v)
        context = self.attend(q, keys, values, at, visible)
        return self.out(merge_heads(context))
