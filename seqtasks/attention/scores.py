"""The single-head score functions of the literature, behind the attention contract (`base.py`).

Every variant scores a query against the annotations, normalises over the valid positions and
returns the expected annotation (the context vector) together with the weights α:

    e_ij = score(s_i, h_j)      α_ij = softmax_j(e_ij) over positions with mask true
    c_i  = Σ_j α_ij h_j

The part of the score that depends only on the annotations (U h for additive attention, W h for
general attention) is computed once per source by `project_keys`, not at every decoder step;
the values are the annotations themselves, so the context is D wide.
"""

from __future__ import annotations

import math
from abc import abstractmethod

import torch
from torch import Tensor, nn

from seqtasks.attention.base import Attention, AttentionMemory


class ScoredAttention(Attention):
    """Base of the score functions: subclasses define `score` and, when it has a source-only
    part, `project_keys`. One head; the context is Σ_j α_ij h_j, as wide as the annotations
    (`out_dim`, set by each subclass to its `memory_dim`)."""

    def project_memory(self, states: Tensor, mask: Tensor) -> AttentionMemory:
        """(B, S, D) annotations -> keys (B, S, D_k) and values, the annotations themselves."""
        return AttentionMemory(self.project_keys(states), states, mask)

    def project_keys(self, states: Tensor) -> Tensor:
        """(B, S, D) annotations -> (B, S, D_k) keys; computed once per source sequence."""
        return states

    @abstractmethod
    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        """(B, T, D_q) queries, (B, S, D_k) keys -> (B, T, S) unnormalised scores e."""
        raise NotImplementedError

    def attend_heads(
        self, query: Tensor, memory: AttentionMemory, need_weights: bool
    ) -> tuple[Tensor, Tensor | None]:
        """Attend with T queries at once.

        Args:
            query: (B, T, D_q) decoder states s_i.
            memory: keys (B, S, D_k) from `project_keys`, values (B, S, D) the annotations h_j
                (or a linear map of them), mask (B, S).
            need_weights: return α as one head's, (B, 1, T, S).
        Returns:
            context (B, T, D) and weights α; α is exactly 0 on padding.
        """
        scores = self.score(query, memory.keys)  # (B, T, S)
        scores = scores.masked_fill(~memory.mask[:, None, :], float("-inf"))
        weights = torch.softmax(scores, dim=-1)  # (B, T, S)
        context = torch.bmm(weights, memory.values)  # (B, T, D)
        return context, weights[:, None] if need_weights else None


class AdditiveAttention(ScoredAttention):
    """Bahdanau et al. (2015): e_ij = vᵀ tanh(W s_i + U h_j), with U h_j precomputed.

    Args:
        query_dim: width of the decoder state s.
        memory_dim: width of the annotations h.
        attention_dim: width of the hidden layer of the alignment model (n' in the paper);
            defaults to `query_dim`.
    """

    def __init__(self, query_dim: int, memory_dim: int, attention_dim: int | None = None):
        super().__init__(memory_dim)
        attention_dim = attention_dim or query_dim
        self.W = nn.Linear(query_dim, attention_dim, bias=False)
        self.U = nn.Linear(memory_dim, attention_dim, bias=True)
        self.v = nn.Linear(attention_dim, 1, bias=False)

    def project_keys(self, states: Tensor) -> Tensor:
        """2 (U h_j + b): doubled, for the sigmoid form of `score`."""
        return 2 * self.U(states)  # (B, S, A)

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        # The (B, T, S, A) tensor is the largest of a decoder step. tanh z = 2σ(2z) − 1, so
        # vᵀ tanh z = (2v)ᵀ σ(2z) − Σv: the same scores, but PyTorch's CPU sigmoid is about 4×
        # faster than its tanh (2.7× for the whole score, bench/rnn_kernels.py). The factor 2
        # goes into the small operands (into the keys once per source), never the big tensor.
        v = self.v.weight[0]
        hidden = (2 * self.W(query))[:, :, None, :] + keys[:, None, :, :]  # 2z
        return hidden.sigmoid_() @ (2 * v) - v.sum()  # (B, T, S)


def _check_same_width(name: str, query_dim: int, memory_dim: int) -> None:
    if query_dim != memory_dim:
        raise ValueError(
            f"{name} needs query and memory of equal width, got query_dim={query_dim} and "
            f"memory_dim={memory_dim}; use GeneralAttention or AdditiveAttention instead"
        )


class DotAttention(ScoredAttention):
    """Luong et al. (2015) 'dot': e_ij = s_iᵀ h_j. Query and memory must have equal width."""

    def __init__(self, query_dim: int, memory_dim: int):
        super().__init__(memory_dim)
        _check_same_width("DotAttention", query_dim, memory_dim)

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        return torch.bmm(query, keys.transpose(1, 2))  # (B, T, S)


class GeneralAttention(ScoredAttention):
    """Luong et al. (2015) 'general' (multiplicative): e_ij = s_iᵀ W h_j, with W h_j precomputed."""

    def __init__(self, query_dim: int, memory_dim: int):
        super().__init__(memory_dim)
        self.W = nn.Linear(memory_dim, query_dim, bias=False)

    def project_keys(self, states: Tensor) -> Tensor:
        return self.W(states)  # (B, S, D_q)

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        return torch.bmm(query, keys.transpose(1, 2))  # (B, T, S)


class ScaledDotAttention(ScoredAttention):
    """Vaswani et al. (2017), one head: e_ij = s_iᵀ h_j / √d. Widths must be equal.

    (`MultiHeadAttention` is the Transformer's H-head form, with projections and PyTorch's
    fused kernel; this is the bare score function.)
    """

    def __init__(self, query_dim: int, memory_dim: int):
        super().__init__(memory_dim)
        _check_same_width("ScaledDotAttention", query_dim, memory_dim)

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        return torch.bmm(query, keys.transpose(1, 2)) / math.sqrt(query.size(-1))
