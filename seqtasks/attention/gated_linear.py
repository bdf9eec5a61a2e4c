"""Gated linear attention (Yang, Wang, Shen, Panda & Kim 2024, "Gated Linear Attention
Transformers with Hardware-Efficient Training"): linear attention's memory with a forget gate
that the input sets, one per key dimension, so the memory can let go of what no longer matters
(the deck `001_2cca2ede84a6a055.txt`, "Further Nonlinearization": a write M_t = f(M_{t−1}, x_t)
other than the sum):

    S_t = G_t ⊙ S_{t−1} + k_tᵀ v_t,   G_t = α_tᵀ 1,   α_t = σ(x_t W_α¹ W_α² + b_α)^{1/τ}
    o_t = q_t S_t / √d

per head (S (d, d), α_t ∈ (0, 1)^d), W_α¹ W_α² of rank 16 and τ = 16 as theirs, so that α starts
near 1 (0.5^{1/16} ≈ 0.96 at zero input) and the memory forgets slowly. The 1/√d is scaled
dot-product attention's, as their reference implementation applies it to q. Their output gate
and normalisation are left to the Transformer's residual block; with α ≡ 1 this is
un-normalised linear attention with the identity feature map.

The causal forward is exact within a chunk: with b_t = Σ_{j≤t} log α_j counted from the chunk's
start and S_0 the memory before it,

    o_t = Σ_{s≤t} Σ_i q_ti k_si e^{b_ti − b_si} v_s + (q_t ⊙ e^{b_t}) S_0,
    S_C = e^{b_C} ⊙ S_0 + Σ_s (k_s ⊙ e^{b_C − b_s})ᵀ v_s

where every exponent is ≤ 0, so nothing overflows however strongly the gate forgets; the pairwise
decays e^{b_t − b_s} (C, C, d) per chunk are what keeps chunks short (`chunk_size`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqtasks.attention.linear_memory import LinearMemorySelfAttention, continued
from seqtasks.attention.multihead import merge_heads, split_heads


def gated_chunks(
    q: Tensor, k: Tensor, v: Tensor, log_alpha: Tensor, memory: Tensor, chunk: int
) -> tuple[Tensor, Tensor]:
    """The gated write over a sequence, a chunk at a time (above): q, k, log α (B, H, T, d_k),
    v (B, H, T, d) and the memory before the first position (B, H, d_k, d) -> every position's
    q_t S_t (B, H, T, d) and the memory after the last."""
    outputs = []
    for start in range(0, q.size(2), chunk):
        part = slice(start, start + chunk)
        qc, kc, vc, gc = q[:, :, part], k[:, :, part], v[:, :, part], log_alpha[:, :, part]
        b = gc.cumsum(2)  # (B, H, C, d_k): log Π_{j≤t} α_j within the chunk
        n = qc.size(2)
        visible = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()[..., None]  # s ≤ t
        gaps = (b[:, :, :, None] - b[:, :, None, :]).masked_fill(~visible, float("-inf"))
        scores = (qc[:, :, :, None] * kc[:, :, None] * gaps.exp()).sum(-1)  # (B, H, C, C)
        outputs.append(scores @ vc + (qc * b.exp()) @ memory)
        last = b[:, :, -1:]  # (B, H, 1, d_k)
        memory = (
            last.transpose(-1, -2).exp() * memory + (kc * (last - b).exp()).transpose(-1, -2) @ vc
        )
    return torch.cat(outputs, dim=2), memory


class GatedLinearSelfAttention(LinearMemorySelfAttention):
    """Multi-head self-attention with a gated linear memory (above). The Transformer's
    `self_attention` (YAML: `{class_path: seqtasks.attention.GatedLinearSelfAttention}`).

    Args:
        d_model, num_heads, dropout: as `SelfAttention`'s (given by the Transformer).
        gate_rank: the rank of W_α¹ W_α² (16, theirs).
        gate_temperature: τ (16, theirs); a larger τ keeps α nearer 1.
        chunk_size: positions written at once in the causal forward (speed and memory only).
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout: float,
        gate_rank: int = 16,
        gate_temperature: float = 16.0,
        chunk_size: int = 16,
    ):
        super().__init__(d_model, num_heads, dropout, chunk_size)
        if gate_rank < 1:
            raise ValueError(
                f"GatedLinearSelfAttention's gate_rank must be at least 1, got {gate_rank}"
            )
        if gate_temperature <= 0:
            raise ValueError(
                "GatedLinearSelfAttention's gate_temperature must be positive, "
                f"got {gate_temperature}"
            )
        self.gate = nn.Sequential(  # W_α¹ W_α² + b_α
            nn.Linear(d_model, gate_rank, bias=False), nn.Linear(gate_rank, d_model)
        )
        self.temperature = gate_temperature

    def features(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """(B, T, D) -> q / √d, k, v and log α = log σ(x W_α¹ W_α² + b_α) / τ, each
        (B, H, T, d)."""
        q, k, v = self.project(x)
        log_alpha = split_heads(F.logsigmoid(self.gate(x)) / self.temperature, self.heads)
        return q / math.sqrt(q.size(-1)), k, v, log_alpha

    def scan(self, x: Tensor, key_mask: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
        q, k, v, log_alpha = self.features(x)
        if key_mask is not None:
            keep = key_mask[:, None, :, None].to(k.dtype)
            k, log_alpha = k * keep, log_alpha * keep  # padding writes and forgets nothing
        memory = v.new_zeros(v.size(0), self.heads, self.key_width, v.size(-1))
        outputs, memory = gated_chunks(q, k, v, log_alpha, memory, self.chunk_size)
        return q, outputs, memory

    def step(
        self, x: Tensor, memory: Tensor, empty: Tensor, rows: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """One new position per row, by the recurrence: x (R, 1, D); the memory (R', H, d, d)
        of the earlier positions and the empty (R', 0); `rows` (R,), if given, the row each row
        continues (beam search's reordering) -> the output (R, 1, D) and both caches, the memory
        with this position written."""
        q, k, v, log_alpha = (part[:, :, 0] for part in self.features(x))  # (R, H, d) each
        memory, empty = continued(rows, memory, empty)
        memory = log_alpha.exp()[..., None] * memory + k[..., :, None] * v[..., None, :]
        o = (q[..., None, :] @ memory)[..., 0, :]  # (R, H, d): q S / √d
        return self.out(merge_heads(o[:, :, None])), memory, empty
