"""The delta rule (Schlag, Irie & Schmidhuber 2021, "Linear Transformers Are Secretly Fast Weight
Programmers"): linear attention's memory written by correcting what it already holds for a key
instead of adding to it, so that a key written twice keeps one value, not their sum:

    v̄_t = M_{t−1}ᵀ φ(k_t),   M_t = M_{t−1} + β_t (v_t − v̄_t) ⊗ φ(k_t),   y_t = M_tᵀ φ(q_t)

in their notation; with M (d_φ, d) as in `linear.py` (rows for features, a row vector per head):
u_t = β_t (v_t − φ(k_t) M_{t−1}), M_t = M_{t−1} + φ(k_t)ᵀ u_t, y_t = φ(q_t) M_t. β_t = σ(W_β x_t),
one per head, is the write strength the network learns to set ("dynamically changing learning
rates"). φ is any of `linear.py`'s maps (DPFP by default, theirs), normalised by its sum,
φ(x) / Σ_j φ(x)_j, as they propose in place of the attention normaliser, which an update that is
not purely additive would not keep (the deck `001_2cca2ede84a6a055.txt`, "Further
Nonlinearization": a write M_t = f(M_{t−1}, x_t) other than the sum).

The causal forward is exact and parallel within a chunk (Yang, Wang, Zhang, Shen & Kim 2024,
"Parallelizing Linear Transformers with the Delta Rule over Sequence Length"): the u_t of a chunk
that starts from M_0 satisfy u_t + β_t Σ_{s<t} (k_t·k_s) u_s = β_t (v_t − k_t M_0), that is

    (I + tril(diag(β) K Kᵀ, −1)) U = diag(β) (V − K M_0),   O = Q M_0 + tril(Q Kᵀ) U,
    M_C = M_0 + Kᵀ U

(k = φ(k_t) here): one triangular solve per chunk (in float32) instead of a loop over positions.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from seqtasks.attention.linear import (
    EPSILON,
    FeatureMapName,
    chosen_feature_map,
    feature_width,
)
from seqtasks.attention.linear_memory import LinearMemorySelfAttention, continued
from seqtasks.attention.multihead import merge_heads


def delta_chunks(
    q: Tensor, k: Tensor, v: Tensor, beta: Tensor, memory: Tensor, chunk: int, group: int = 1
) -> tuple[Tensor, Tensor]:
    """The delta rule over a sequence, a chunk at a time (above): q, k (B, H, T, d_k), v
    (B, H, T, d), β (B, H, T) and the memory before the first position (B, H, d_k, d) ->
    every position's q_t M_t (B, H, T, d) and the memory after the last.

    With `group` g > 1, the positions of each run of g write with the memory from before the
    run, u_t = β_t (v_t − k_t M_{t'}) (test-time training's mini-batches, `ttt.py`); a chunk
    then holds whole runs. g = 1 is the delta rule itself."""
    size = max(chunk // group, 1) * group
    outputs = []
    for start in range(0, q.size(2), size):
        part = slice(start, start + size)
        qc, kc, vc, bc = q[:, :, part], k[:, :, part], v[:, :, part], beta[:, :, part]
        n = qc.size(2)
        runs = torch.arange(n, device=q.device) // group
        earlier = runs[:, None] > runs[None, :]  # (C, C): s is in a run before t's
        coupling = (kc @ kc.transpose(-1, -2)) * bc[..., None] * earlier  # β_t k_t·k_s
        eye = torch.eye(n, device=q.device)
        targets = bc[..., None] * (vc - kc @ memory)  # (B, H, C, d): β_t (v_t − k_t M_0)
        u = torch.linalg.solve_triangular(
            (eye + coupling).float(), targets.float(), upper=False, unitriangular=True
        ).to(vc.dtype)
        outputs.append(qc @ memory + (qc @ kc.transpose(-1, -2)).tril() @ u)
        memory = memory + kc.transpose(-1, -2) @ u  # (B, H, d_k, d)
    return torch.cat(outputs, dim=2), memory


def sum_normalised(phi: Tensor) -> Tensor:
    """φ(x) / Σ_j φ(x)_j over the last dimension (0 where φ(x) is all 0, as DPFP can be)."""
    return phi / (phi.sum(-1, keepdim=True) + EPSILON)


class DeltaRuleSelfAttention(LinearMemorySelfAttention):
    """Multi-head self-attention with a fast-weight memory written by the delta rule (above).
    The Transformer's `self_attention` (YAML: `{class_path:
    seqtasks.attention.DeltaRuleSelfAttention, init_args: {feature_map: dpfp-1}}`).

    Args:
        d_model, num_heads, dropout: as `SelfAttention`'s (given by the Transformer).
        feature_map: φ, one of `linear.FEATURE_MAPS`, sum-normalised; "dpfp-1" by default
            (theirs: sparse, so a write corrects a few features strongly; sum-normalised
            elu + 1 spreads over all d and corrects little).
        chunk_size: positions written at once in the causal forward (speed and memory only).
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout: float,
        feature_map: FeatureMapName = "dpfp-1",
        chunk_size: int = 64,
    ):
        phi = chosen_feature_map(feature_map, type(self).__name__)
        width = feature_width(feature_map, d_model // num_heads)
        super().__init__(d_model, num_heads, dropout, chunk_size, width)
        self.phi = phi
        self.beta = nn.Linear(d_model, num_heads)  # W_β

    def features(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """(B, T, D) -> φ(q), φ(k) sum-normalised (B, H, T, d_φ), v (B, H, T, d) and
        β = σ(W_β x) (B, H, T)."""
        q, k, v = self.project(x)
        beta = torch.sigmoid(self.beta(x)).transpose(1, 2)
        return sum_normalised(self.phi(q)), sum_normalised(self.phi(k)), v, beta

    def scan(self, x: Tensor, key_mask: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
        q, k, v, beta = self.features(x)
        if key_mask is not None:
            k = k * key_mask[:, None, :, None].to(k.dtype)  # a zero key writes nothing
        memory = v.new_zeros(v.size(0), self.heads, self.key_width, v.size(-1))
        outputs, memory = delta_chunks(q, k, v, beta, memory, self.chunk_size)
        return q, outputs, memory

    def step(
        self, x: Tensor, memory: Tensor, empty: Tensor, rows: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """One new position per row, by the recurrence: x (R, 1, D); the memory (R', H, d_φ, d)
        of the earlier positions and the empty (R', 0); `rows` (R,), if given, the row each row
        continues (beam search's reordering) -> the output (R, 1, D) and both caches, the memory
        with this position written."""
        q, k, v, beta = (part[:, :, 0] for part in self.features(x))  # (R, H, ·), β (R, H)
        memory, empty = continued(rows, memory, empty)
        u = beta[..., None] * (v - (k[..., None, :] @ memory)[..., 0, :])  # β (v − φ(k) M)
        memory = memory + k[..., :, None] * u[..., None, :]  # + φ(k)ᵀ u
        y = (q[..., None, :] @ memory)[..., 0, :]  # (R, H, d): φ(q) M
        return self.out(merge_heads(y[:, :, None])), memory, empty
