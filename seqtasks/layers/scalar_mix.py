"""ELMo's learned mix of an encoder's layers (Peters et al. 2018, §3.2, eq. 1;
`../shared/seeds/004…`, "Transfer learning"): the downstream task reads a weighted sum of every
layer of the (pre-trained) encoder, with weights of its own, instead of the top layer alone."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn
from torch.nn import functional as F


class ScalarMix(nn.Module):
    """ELMo_k = γ Σ_{j=0}^{L} s_j · LN(h_{k,j}), with s = softmax(w) (eq. 1).

    h_{k,0} is the token layer and h_{k,j} the j-th layer's output at position k. Each layer is
    layer-normalised without weights of its own before weighting (§3.2: "apply layer
    normalization to each biLM layer before weighting"), so that the layers of a Pre-LN
    residual stream, whose scale grows with depth, mix on one scale. w starts at zero (an equal
    share for every layer) and γ at one; both are the task's, not the encoder's, and a
    fine-tuning starts them afresh (`Encoder.task_specific`).

    Args:
        layers: L + 1, the number of tensors `forward` mixes.
    """

    def __init__(self, layers: int):
        super().__init__()
        self.weights = nn.Parameter(torch.zeros(layers))  # w
        self.scale = nn.Parameter(torch.ones(()))  # γ

    def forward(self, layers: Sequence[Tensor]) -> Tensor:
        """L + 1 tensors (…, D) -> their mix (…, D)."""
        if len(layers) != self.weights.numel():
            raise ValueError(f"mixes {self.weights.numel()} layers, given {len(layers)}")
        shares = torch.softmax(self.weights, dim=0)
        mixed = sum(s * F.layer_norm(h, h.shape[-1:]) for s, h in zip(shares, layers, strict=True))
        return self.scale * mixed
