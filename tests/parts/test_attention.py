"""Attention: the contract every variant keeps (`seqtasks.attention.base`), the score
functions' normalisation, masking and formulas, multi-head attention against PyTorch's own, and
attention chosen in YAML by `class_path`."""

from __future__ import annotations

import functools
import math
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
import yaml
from conftest import REPO

from seqtasks.attention import Attention, MultiHeadAttention
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
    context, weights = attention(query, attention.project_memory(values, mask))
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
    context, weights = attention(query, attention.project_memory(values, mask))
    noisy = values.masked_fill(~mask[:, :, None], 1e3)
    context2, weights2 = attention(query, attention.project_memory(noisy, mask))
    torch.testing.assert_close(weights2, weights)
    torch.testing.assert_close(context2, context)


def test_additive_matches_hand_computation():
    attention = AdditiveAttention(8, 12, attention_dim=10).eval()
    query, values, mask = make_inputs(8, 12)
    _, weights = attention(query, attention.project_memory(values, mask))
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
    _, weights = attention(query, attention.project_memory(values, mask))
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
    _, weights = scaled(query, scaled.project_memory(values, mask))
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
    context, _ = attention(query, attention.project_memory(values, mask))
    assert context.shape == (B, T, 12)


# ---- the contract ---------------------------------------------------------------------------

CONTRACT = [*ALL, (functools.partial(MultiHeadAttention, heads=2), 8, 12)]


def attention_name(part) -> str:
    if isinstance(part, int):
        return str(part)
    return getattr(part, "__name__", None) or part.func.__name__


@pytest.mark.parametrize("factory,query_dim,memory_dim", CONTRACT, ids=attention_name)
def test_every_attention_keeps_the_contract(factory, query_dim, memory_dim):
    """Built as `attention(query_dim, memory_dim)`; keys and values from `project_memory`; the
    context `out_dim` wide; weights normalised, 0 on padding, per head averaging to the plain
    ones, None unasked for (with the same context); padded annotations change nothing."""
    torch.manual_seed(0)
    attention: Attention = factory(query_dim, memory_dim).eval()
    query, values, mask = make_inputs(query_dim, memory_dim)
    memory = attention.project_memory(values, mask)
    assert memory.mask is mask
    context, weights = attention(query, memory)
    assert context.shape == (B, T, attention.out_dim) and weights.shape == (B, T, S)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, T))
    assert torch.all(weights[~mask[:, None, :].expand(B, T, S)] == 0.0)
    _, heads = attention(query, memory, per_head=True)
    assert heads.shape == (B, attention.heads, T, S)
    torch.testing.assert_close(heads.mean(1), weights)
    unweighted, none = attention(query, memory, need_weights=False)
    assert none is None
    torch.testing.assert_close(unweighted, context, atol=1e-6, rtol=1e-5)
    noisy = values.masked_fill(~mask[:, :, None], 1e3)
    noisy_context, _ = attention(query, attention.project_memory(noisy, mask))
    torch.testing.assert_close(noisy_context, context)


@pytest.mark.parametrize("factory,query_dim,memory_dim", CONTRACT, ids=attention_name)
def test_hypotheses_attend_like_inputs_repeated(factory, query_dim, memory_dim):
    """K = 2 adjacent query rows per input against the memory kept once per input give what
    each row gets from its own copy of the memory, as do the rows of the inputs `select` keeps."""
    torch.manual_seed(0)
    attention = factory(query_dim, memory_dim).eval()
    query, values, mask = make_inputs(query_dim, memory_dim)
    rows = torch.cat([query, query.flip(1)]).view(2, B, T, -1).transpose(0, 1).flatten(0, 1)
    memory = attention.project_memory(values, mask)
    repeated = attention.project_memory(
        values.repeat_interleave(2, 0), mask.repeat_interleave(2, 0)
    )
    for per_head in (False, True):
        grouped = attention(rows, memory, per_head=per_head)
        alone = attention(rows, repeated, per_head=per_head)
        for ours, theirs in zip(grouped, alone, strict=True):
            torch.testing.assert_close(ours, theirs)
    kept = torch.tensor([2, 0])  # inputs 2 and 0, as search keeps them when input 1 finishes
    rows_kept = rows.unflatten(0, (B, 2))[kept].flatten(0, 1)
    for ours, theirs in zip(attention(rows_kept, memory.select(kept)), attention(rows, memory)):
        torch.testing.assert_close(ours, theirs.unflatten(0, (B, 2))[kept].flatten(0, 1))


# ---- multi-head attention -------------------------------------------------------------------


def test_multi_head_attention_is_torchs_multi_head_attention():
    """Output and weights, per head and averaged, equal `F.multi_head_attention_forward` with
    the same projections (separate q, k, v weights, since the memory is wider than the query),
    padding hidden by `key_padding_mask`; the fused path gives the same output."""
    torch.manual_seed(0)
    heads, query_dim, memory_dim = 4, 8, 12
    attention = MultiHeadAttention(query_dim, memory_dim, heads=heads).eval()
    query, values, mask = make_inputs(query_dim, memory_dim)
    W_k, W_v = attention.kv.weight.chunk(2)
    theirs, their_heads = F.multi_head_attention_forward(
        query.transpose(0, 1), values.transpose(0, 1), values.transpose(0, 1),
        query_dim, heads, None, torch.cat([attention.q.bias, attention.kv.bias]),
        None, None, False, 0.0, attention.out.weight, attention.out.bias,
        training=False, key_padding_mask=~mask, use_separate_proj_weight=True,
        q_proj_weight=attention.q.weight, k_proj_weight=W_k, v_proj_weight=W_v,
        average_attn_weights=False,
    )  # fmt: skip
    memory = attention.project_memory(values, mask)
    ours, our_heads = attention(query, memory, per_head=True)
    torch.testing.assert_close(ours, theirs.transpose(0, 1))
    torch.testing.assert_close(our_heads, their_heads)
    _, averaged = attention(query, memory)
    torch.testing.assert_close(averaged, their_heads.mean(1))
    fused, _ = attention(query, memory, need_weights=False)
    torch.testing.assert_close(fused, ours)


def test_multi_head_attention_refuses_heads_that_do_not_divide_the_width():
    with pytest.raises(ValueError, match="the query width 10 is not divisible by heads=4"):
        MultiHeadAttention(10, 12, heads=4)


# ---- chosen in YAML -------------------------------------------------------------------------

MULTI_HEAD = {"class_path": "seqtasks.attention.MultiHeadAttention", "init_args": {"heads": 4}}
TRANSFORMER = {"d_model": 16, "num_heads": 2, "num_layers": 1, "ff_dim": 16}
CHOICES = {
    "gru-decoder-multi-head": {
        "class_path": "seqtasks.decoders.BahdanauDecoder",
        "init_args": {"embed_dim": 8, "hidden_size": 16, "readout_dim": 8, "attention": MULTI_HEAD},
    },
    "transformer-cross-and-self-attention": {
        "class_path": "seqtasks.decoders.TransformerDecoder",
        "init_args": {
            **TRANSFORMER,
            "cross_attention": MULTI_HEAD,
            "self_attention": {"class_path": "seqtasks.attention.LinearSelfAttention"},
        },
    },
}


@pytest.fixture(scope="module")
def dates_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("dates")


@pytest.mark.parametrize("choice", CHOICES)
def test_yaml_chooses_attention_by_class_path(choice, dates_dir, tmp_path, monkeypatch):
    """The `seqtasks` command's parser reads the choice from a config and builds it with the
    sizes the decoder gives: the heads from `init_args`, the widths never written."""
    from seqtasks.attention import LinearSelfAttention
    from seqtasks.cli.main import SeqtasksCLI

    config = yaml.safe_load((REPO / "configs" / "translation" / "dates.yaml").read_text())
    config["model"]["init_args"]["decoder"] = CHOICES[choice]
    config["data"]["init_args"] |= {"data_dir": str(dates_dir), "num_train": 40}
    config["trainer"] = {"logger": False, "callbacks": [], "default_root_dir": str(tmp_path)}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    monkeypatch.setattr(sys, "argv", ["seqtasks"])
    args = ["--config", str(path)]
    cli = SeqtasksCLI(subclass_mode_model=True, subclass_mode_data=True, run=False, args=args)
    decoder = cli.model.decoder
    if choice == "gru-decoder-multi-head":
        attentions = [decoder.attention]
        assert decoder.rnn.input_size == 8 + 16  # [E y; c], c as wide as the decoder state
    else:
        attentions = [layer.cross_attention for layer in decoder.layers]
        assert all(type(layer.self_attention) is LinearSelfAttention for layer in decoder.layers)
    assert all(type(a) is MultiHeadAttention and a.heads == 4 for a in attentions)
    assert attentions[0].kv.in_features == cli.model.encoder.out_dim
