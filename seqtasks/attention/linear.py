"""Linear attention (Katharopoulos et al. 2020, "Transformers are RNNs"): the softmax kernel
exp(q·k/√d) replaced by φ(q)·φ(k) with φ(x) = elu(x) + 1, so attention can be computed from
sums over the keys instead of a T × S matrix of weights.

    V'_i = φ(Q_i) Σ_j φ(K_j)ᵀ V_j / φ(Q_i) · Σ_j φ(K_j)                     (their eq. 5)

Causally masked, the sums run over j ≤ i and become the running memory of an RNN:

    M_i = M_{i−1} + φ(K_i)ᵀ V_i,   z_i = z_{i−1} + φ(K_i),   V'_i = φ(Q_i) M_i / φ(Q_i) · z_i

so an incremental decoder carries (M, z), (H, d_φ, d) and (H, d_φ) per hypothesis, instead of
a key/value cache that grows with the output: every step costs the same at every length.

"We can use any kernel function here" (the deck `001_2cca2ede84a6a055.txt`, "Further
Nonlinearization"): φ is a setting, `feature_map`, one of `FEATURE_MAPS`, all non-negative so
that the weights φ(q)·φ(k) and the normaliser are too: elu + 1 (theirs, the default), ReLU, or
Schlag, Irie & Schmidhuber's (2021) deterministic parameter-free projection DPFP-ν, which widens
each head's d features to d_φ = 2dν:

    r(x) = [ReLU(x); ReLU(−x)] ∈ R^{2d},   φ_{2d(j−1)+i}(x) = r_i(x) r_{i+j}(x)   (i + j mod 2d)

for j = 1 … ν. The delta rule (`delta_rule.py`) reads the same maps, normalised by their sum.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from seqtasks.attention.multihead import SelfAttention, merge_heads

EPSILON = 1e-6  # keeps the normaliser away from 0 (φ > 0, so it is positive anyway)

FeatureMapName = Literal["elu+1", "relu", "dpfp-1", "dpfp-2", "dpfp-3"]


def feature_map(x: Tensor) -> Tensor:
    """φ(x) = elu(x) + 1: positive, so the weights φ(q)·φ(k) are too (their §3.2.1)."""
    return F.elu(x) + 1.0


def dpfp(x: Tensor, nu: int) -> Tensor:
    """DPFP-ν (Schlag et al. 2021, above): (…, d) -> (…, 2dν), products of r(x) with its
    cyclic shifts by 1 … ν."""
    r = torch.cat([F.relu(x), F.relu(-x)], dim=-1)  # (…, 2d)
    return torch.cat([r * r.roll(-j, dims=-1) for j in range(1, nu + 1)], dim=-1)


FEATURE_MAPS: dict[str, Callable[[Tensor], Tensor]] = {
    "elu+1": feature_map,
    "relu": F.relu,
    **{f"dpfp-{nu}": partial(dpfp, nu=nu) for nu in (1, 2, 3)},
}


def chosen_feature_map(name: str, owner: str) -> Callable[[Tensor], Tensor]:
    """`FEATURE_MAPS[name]`, or a ValueError naming `owner`'s setting and the value."""
    if name not in FEATURE_MAPS:
        raise ValueError(f"{owner}'s feature_map must be one of {list(FEATURE_MAPS)}, got {name!r}")
    return FEATURE_MAPS[name]


def feature_width(name: str, d: int) -> int:
    """d_φ, the width φ gives a head of width d: 2dν for DPFP-ν, d for the others."""
    return 2 * d * int(name[len("dpfp-") :]) if name.startswith("dpfp-") else d


class LinearSelfAttention(SelfAttention):
    """Multi-head self-attention with the linear kernel φ(q)·φ(k); `SelfAttention`'s
    parameters (one fused Q/K/V projection, one output projection), so either can be the
    Transformer's `self_attention` (YAML: `{class_path: seqtasks.attention.LinearSelfAttention,
    init_args: {feature_map: dpfp-1}}`). Its `dropout` goes unused: there is no matrix of weights
    to drop from.

    Args:
        d_model, num_heads, dropout: as `SelfAttention`'s (given by the Transformer).
        feature_map: φ, one of `FEATURE_MAPS` (above); "elu+1", the paper's, by default.
    """

    def __init__(
        self, d_model: int, num_heads: int, dropout: float, feature_map: FeatureMapName = "elu+1"
    ):
        super().__init__(d_model, num_heads, dropout)
        self.phi = chosen_feature_map(feature_map, type(self).__name__)
        self.feature_width = feature_width(feature_map, d_model // num_heads)

    def project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(B, T, D) -> φ(q), φ(k) (B, H, T, d_φ) and v (B, H, T, D/H)."""
        q, k, v = super().project(x)
        return self.phi(q), self.phi(k), v

    def forward(self, x: Tensor, key_mask: Tensor | None = None, causal: bool = False) -> Tensor:
        """(B, T, D) -> (B, T, D), all positions at once (the parallel form). `key_mask` (B, T)
        hides padding keys; `causal` lets position i see positions j ≤ i only.

        Causal attention takes the masked T × T kernel (φ(Q)φ(K)ᵀ ⊙ lower triangle), which
        costs O(T² d) like softmax attention but no (T, d, d) running sums in memory; the
        non-causal form takes the sums over all keys, O(T d²)."""
        phi_q, phi_k, v = self.project(x)
        if key_mask is not None:
            phi_k = phi_k * key_mask[:, None, :, None].to(phi_k.dtype)  # padding adds nothing
        kernel = None
        if causal or self.recording:
            kernel = phi_q @ phi_k.transpose(-1, -2)  # (B, H, T, T)
            kernel = kernel.tril() if causal else kernel
        if self.recording:  # the weights the sums stand for: φ(Q_i)·φ(K_j) / φ(Q_i)·Σ_j φ(K_j)
            self.keep(kernel / (kernel.sum(-1, keepdim=True) + EPSILON))
        if causal:
            context = (kernel @ v) / (kernel.sum(-1, keepdim=True) + EPSILON)
        else:
            memory = phi_k.transpose(-1, -2) @ v  # (B, H, d_φ, d): Σ_j φ(K_j)ᵀ V_j
            normaliser = phi_q @ phi_k.sum(2, keepdim=True).transpose(-1, -2)  # (B, H, T, 1)
            context = (phi_q @ memory) / (normaliser + EPSILON)
        return self.out(merge_heads(context))

    def empty_cache(self, rows: int, like: Tensor) -> tuple[Tensor, Tensor]:
        """(M, z) before the first position: zeros (rows, H, d_φ, d) and (rows, H, d_φ)."""
        d, width = like.size(-1) // self.heads, self.feature_width
        return like.new_zeros(rows, self.heads, width, d), like.new_zeros(rows, self.heads, width)

    def step(
        self, x: Tensor, memory: Tensor, normaliser: Tensor, rows: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """One new position per row, by the recurrence: x (R, 1, D); M (R', H, d_φ, d) and z
        (R', H, d_φ) of the earlier positions; `rows` (R,), if given, the row of M and z each
        row continues (beam search's reordering) -> the output (R, 1, D), M and z with this
        position added."""
        phi_q, phi_k, v = (part[:, :, 0] for part in self.project(x))  # (R, H, d_φ), …, (R, H, d)
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
