"""Linear attention (Katharopoulos et al. 2020, "Transformers are RNNs"): the softmax kernel
exp(q·k/√d) replaced by φ(q)·φ(k) with φ(x) = elu(x) + 1, so attention can be computed from
sums over the keys instead of a T × S matrix of weights.

    V'_i = φ(Q_i) Σ_j φ(K_j)ᵀ V_j / φ(Q_i) · Σ_j φ(K_j)                     (their eq. 5)

Causally masked, the sums run over j ≤ i and become the running memory of an RNN:

    M_i = M_{i−1} + φ(K_i)ᵀ V_i,   z_i = z_{i−1} + φ(K_i),   V'_i = φ(Q_i) M_i / φ(Q_i) · z_i

so an incremental decoder carries (M, z), (H, d, d) and (H, d) per hypothesis, instead of a
key/value cache that grows with the output: every step costs the same at every length.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from seqtasks.attention.multihead import SelfAttention, merge_heads

EPSILON = 1e-6  # keeps the normaliser away from 0 (φ > 0, so it is positive anyway)


def feature_map(x: Tensor) -> Tensor:
    """φ(x) = elu(x) + 1: positive, so the weights φ(q)·φ(k) are too (their §3.2.1)."""
    return F.elu(x) + 1.0


class LinearSelfAttention(SelfAttention):
    """Multi-head self-attention with the linear kernel φ(q)·φ(k); `SelfAttention`'s
    parameters (one fused Q/K/V projection, one output projection), so either can be the
    Transformer's `self_attention` (YAML: `{class_path: seqtasks.attention.LinearSelfAttention}`).
    Its `dropout` goes unused: there is no matrix of weights to drop from."""

    def project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(B, T, D) -> φ(q), φ(k), v, each (B, H, T, D/H)."""
        q, k, v = super().project(x)
        return feature_map(q), feature_map(k), v

    def forward(self, x: Tensor, key_mask: Tensor | None = None, causal: bool = False) -> Tensor:
        """(B, T, D) -> (B, T, D), all positions at once (the parallel form). `key_mask` (B, T)
        hides padding keys; `causal` lets position i see positions j ≤ i only.

        Causal attention takes the masked T × T kernel (φ(Q)φ(K)ᵀ ⊙ lower triangle), which
        costs O(T² d) like softmax attention but no (T, d, d) running sums in memory; the
        non-causal form takes the sums over all keys, O(T d²)."""
        phi_q, phi_k, v = self.project(x)
        if key_mask is not None:
            phi_k = phi_k * key_mask[:, None, :, None].to(phi_k.dtype)  # padding adds nothing
        if causal:
            kernel = (phi_q @ phi_k.transpose(-1, -2)).tril()  # (B, H, T, T)
            context = (kernel @ v) / (kernel.sum(-1, keepdim=True) + EPSILON)
        else:
            memory = phi_k.transpose(-1, -2) @ v  # (B, H, d, d): Σ_j φ(K_j)ᵀ V_j
            normaliser = phi_q @ phi_k.sum(2, keepdim=True).transpose(-1, -2)  # (B, H, T, 1)
            context = (phi_q @ memory) / (normaliser + EPSILON)
        return self.out(merge_heads(context))

    def empty_cache(self, rows: int, like: Tensor) -> tuple[Tensor, Tensor]:
        """(M, z) before the first position: zeros (rows, H, d, d) and (rows, H, d)."""
        d = like.size(-1) // self.heads
        return like.new_zeros(rows, self.heads, d, d), like.new_zeros(rows, self.heads, d)

    def step(
        self, x: Tensor, memory: Tensor, normaliser: Tensor, rows: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """One new position per row, by the recurrence: x (R, 1, D); M (R', H, d, d) and z
        (R', H, d) of the earlier positions; `rows` (R,), if given, the row of M and z each row
        continues (beam search's reordering) -> the output (R, 1, D), M and z with this
        position added."""
        phi_q, phi_k, v = (part[:, :, 0] for part in self.project(x))  # (R, H, d) each
        if rows is not None:
            memory, normaliser = memory.index_select(0, rows), normaliser.index_select(0, rows)
        memory = memory + phi_k[..., :, None] * v[..., None, :]  # + φ(K_i)ᵀ V_i
        normaliser = normaliser + phi_k
        numerator = (phi_q[..., None, :] @ memory)[..., 0, :]  # (R, H, d): φ(Q_i) M_i
        denominator = (phi_q * normaliser).sum(-1, keepdim=True) + EPSILON
        context = (numerator / denominator)[:, :, None]  # (R, H, 1, d)
        return self.out(merge_heads(context)), memory, normaliser


def named_self_attention(name: str) -> type[SelfAttention]:
    """The class that the older string setting names, `self_attention: softmax | linear` (as
    configs and checkpoints written before the `class_path` form hold it)."""
    names = {"softmax": SelfAttention, "linear": LinearSelfAttention}
    if name not in names:
        raise ValueError(f"self_attention must be 'softmax' or 'linear', got {name!r}")
    return names[name]
