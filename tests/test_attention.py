"""The attention score functions: normalisation, masking, and the formulas of the papers."""

from __future__ import annotations

import math

import pytest
import torch

from seqtasks.attention.scores import (
    AdditiveAttention,
    DotAttention,
    GeneralAttention,
    ScaledDotAttention,
)

B, T, S = 3, 4, 6


def make_inputs(query_dim: int, memory_dim: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    query = torch.randn(B, T, query_dim, generator=g)
    values = torch.randn(B, S, memory_dim, generator=g)
    lengths = torch.tensor([S, 4, 1])
    mask = torch.arange(S)[None, :] < lengths[:, None]
    return query, values, mask


def build(cls, query_dim: int, memory_dim: int):
    torch.manual_seed(0)
    return cls(query_dim, memory_dim).eval()


ALL = [
    (AdditiveAttention, 8, 12),
    (GeneralAttention, 8, 12),
    (DotAttention, 8, 8),
    (ScaledDotAttention, 8, 8),
]


@pytest.mark.parametrize("cls,query_dim,memory_dim", ALL, ids=lambda x: getattr(x, "__name__", x))
def test_weights_normalised_masked_and_context_is_expectation(cls, query_dim, memory_dim):
    attention = build(cls, query_dim, memory_dim)
    query, values, mask = make_inputs(query_dim, memory_dim)
    context, weights = attention(query, attention.project_keys(values), values, mask)
    assert weights.shape == (B, T, S)
    assert context.shape == (B, T, memory_dim)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, T))
    padded = ~mask[:, None, :].expand(B, T, S)
    assert torch.all(weights[padded] == 0.0), "padding must get exactly zero weight"
    assert torch.all(weights[~padded] > 0.0)
    torch.testing.assert_close(context, weights @ values)
    # A row with one real position puts all its weight there.
    torch.testing.assert_close(weights[2, :, 0], torch.ones(T))


@pytest.mark.parametrize("cls,query_dim,memory_dim", ALL, ids=lambda x: getattr(x, "__name__", x))
def test_padding_values_do_not_leak(cls, query_dim, memory_dim):
    attention = build(cls, query_dim, memory_dim)
    query, values, mask = make_inputs(query_dim, memory_dim)
    context, weights = attention(query, attention.project_keys(values), values, mask)
    noisy = values.masked_fill(~mask[:, :, None], 1e3)
    context2, weights2 = attention(query, attention.project_keys(noisy), noisy, mask)
    torch.testing.assert_close(weights2, weights)
    torch.testing.assert_close(context2, context)


def test_additive_matches_hand_computation():
    attention = AdditiveAttention(8, 12, attention_dim=10).eval()
    query, values, mask = make_inputs(8, 12)
    _, weights = attention(query, attention.project_keys(values), values, mask)
    W, U, b_U, v = attention.W.weight, attention.U.weight, attention.U.bias, attention.v.weight[0]
    expected = torch.empty(B, T, S)
    for b in range(B):
        for i in range(T):
            for j in range(S):
                expected[b, i, j] = v @ torch.tanh(W @ query[b, i] + U @ values[b, j] + b_U)
    expected = expected.masked_fill(~mask[:, None, :], float("-inf")).softmax(-1)
    torch.testing.assert_close(weights, expected)
    # The score itself, not only its softmax.
    scores = attention.score(query, attention.project_keys(values))
    e = v @ torch.tanh(W @ query[1, 2] + U @ values[1, 3] + b_U)
    torch.testing.assert_close(scores[1, 2, 3], e)


def test_additive_attention_dim_defaults_to_query_dim():
    attention = AdditiveAttention(8, 12)
    assert attention.W.out_features == 8
    assert attention.U.out_features == 8


def test_general_is_bilinear():
    attention = GeneralAttention(8, 12).eval()
    query, values, mask = make_inputs(8, 12)
    scores = attention.score(query, attention.project_keys(values))
    W = attention.W.weight  # (query_dim, memory_dim)
    expected = torch.einsum("btq,qm,bsm->bts", query, W, values)
    torch.testing.assert_close(scores, expected)
    _, weights = attention(query, attention.project_keys(values), values, mask)
    torch.testing.assert_close(
        weights, expected.masked_fill(~mask[:, None, :], float("-inf")).softmax(-1)
    )


def test_dot_and_scaled_dot():
    query, values, mask = make_inputs(8, 8)
    dot = DotAttention(8, 8)
    scaled = ScaledDotAttention(8, 8)
    expected = torch.einsum("btd,bsd->bts", query, values)
    torch.testing.assert_close(dot.score(query, dot.project_keys(values)), expected)
    torch.testing.assert_close(
        scaled.score(query, scaled.project_keys(values)), expected / math.sqrt(8)
    )
    _, weights = scaled(query, scaled.project_keys(values), values, mask)
    torch.testing.assert_close(
        weights,
        (expected / math.sqrt(8)).masked_fill(~mask[:, None, :], float("-inf")).softmax(-1),
    )


@pytest.mark.parametrize("cls", [DotAttention, ScaledDotAttention])
def test_unequal_widths_rejected(cls):
    with pytest.raises(ValueError) as error:
        cls(8, 12)
    assert "8" in str(error.value) and "12" in str(error.value)
    assert cls.__name__ in str(error.value)


@pytest.mark.parametrize("cls", [AdditiveAttention, GeneralAttention])
def test_projected_attentions_accept_unequal_widths(cls):
    attention = cls(8, 12)
    query, values, mask = make_inputs(8, 12)
    context, _ = attention(query, attention.project_keys(values), values, mask)
    assert context.shape == (B, T, 12)
