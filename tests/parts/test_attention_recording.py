"""`recording`: every attention kind records the weights it attends with, per head, equal to the
paper's equation written out pair by pair in float64 from the module's own projection weights
(head h reading columns h·d … (h+1)·d − 1); masks applied (padding keys, the causal mask);
cached incremental decoding records what the teacher-forced pass records; outputs unchanged;
nothing computed or kept outside a recording."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from seqtasks.attention import (
    AdditiveAttention,
    DeltaRuleSelfAttention,
    LinearSelfAttention,
    MultiHeadAttention,
    RelativeSelfAttention,
    SelfAttention,
    multihead,
)
from seqtasks.attention.recording import recording
from seqtasks.decoders import TransformerDecoder
from seqtasks.encoders import TransformerEncoder
from seqtasks.layers.memory import Memory

D, H, T, B = 8, 2, 5, 2
d = D // H


def heads_of(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> list[torch.Tensor]:
    """x W_hᵀ + b_h for every head h, by slicing the weight's rows: [(B, T, d)] * H."""
    x, weight, bias = x.double(), weight.double(), bias.double()
    return [x @ weight[h * d : (h + 1) * d].T + bias[h * d : (h + 1) * d] for h in range(H)]


def softmax_weights(q, k, visible) -> torch.Tensor:
    """α_ij = exp(q_i·k_j/√d) / Σ_{j' visible} exp(q_i·k_j'/√d), one (b, i, j) at a time."""
    batch, rows, keys = q.size(0), q.size(1), k.size(1)
    alpha = torch.zeros(batch, rows, keys, dtype=torch.float64)
    for b in range(batch):
        for i in range(rows):
            seen = [j for j in range(keys) if visible(b, i, j)]
            e = torch.stack([q[b, i] @ k[b, j] / math.sqrt(d) for j in seen])
            alpha[b, i, seen] = torch.softmax(e, 0)
    return alpha


def self_reference(attention: SelfAttention, x, visible) -> torch.Tensor:
    """(B, H, T, T) from the fused Q/K/V weight: Q rows 0…D−1, K rows D…2D−1."""
    w, b = attention.qkv.weight, attention.qkv.bias
    qs, ks = heads_of(x, w[:D], b[:D]), heads_of(x, w[D : 2 * D], b[D : 2 * D])
    return torch.stack([softmax_weights(q, k, visible) for q, k in zip(qs, ks)], 1)


def recorded(module, call):
    """What `module` records during `call()` (alone, as an encoder part) and call's result."""
    with recording({"encoder": module}) as log:
        out = call()
        return log.layers("encoder"), out


@pytest.fixture
def x():
    torch.manual_seed(0)
    return torch.randn(B, T, D)


MASK = torch.tensor([[True] * T, [True] * 3 + [False] * 2])


def test_softmax_self_attention_over_real_keys(x):
    attention = SelfAttention(D, H, 0.0).eval()
    (weights,), out = recorded(attention, lambda: attention(x, key_mask=MASK))
    expected = self_reference(attention, x, lambda b, i, j: bool(MASK[b, j]))
    torch.testing.assert_close(weights.double(), expected, rtol=1e-5, atol=1e-6)
    assert (weights[1, :, :, 3:] == 0).all()
    torch.testing.assert_close(out, attention(x, key_mask=MASK))  # the output is the fused one


def test_causal_self_attention_sees_the_past_only(x):
    attention = SelfAttention(D, H, 0.0).eval()
    (weights,), _ = recorded(attention, lambda: attention(x, causal=True))
    expected = self_reference(attention, x, lambda b, i, j: j <= i)
    torch.testing.assert_close(weights.double(), expected, rtol=1e-5, atol=1e-6)
    assert (weights.triu(1) == 0).all()


def test_cached_steps_record_the_teacher_forced_weights(x):
    """Position t's step over its cache records row t of the causal map (zeros after t)."""
    attention = SelfAttention(D, H, 0.0).eval()
    (forced,), _ = recorded(attention, lambda: attention(x, causal=True))

    def decode():
        keys, values = attention.empty_cache(B, x)
        for t in range(T):
            _, keys, values = attention.step(x[:, t : t + 1], keys, values)

    steps, _ = recorded(attention, decode)
    cached = torch.cat([F.pad(w, (0, T - w.size(-1))) for w in steps], dim=2)
    torch.testing.assert_close(cached, forced, rtol=1e-5, atol=1e-6)


def test_multi_head_cross_attention_per_head_and_per_hypothesis(x):
    """K = 2 hypotheses per input (adjacent rows) attend to the memory kept once per input."""
    torch.manual_seed(1)
    attention = MultiHeadAttention(D, 6, heads=H).eval()
    states, mask = torch.randn(B, 4, 6), torch.tensor([[True] * 4, [True, True, False, False]])
    memory = attention.project_memory(states, mask)
    queries = torch.randn(2 * B, 3, D)  # rows 0, 1: input 0; rows 2, 3: input 1
    with recording({"decoder": torch.nn.ModuleList([attention])}) as log:
        attention(queries, memory, need_weights=False)
        (weights,) = log.layers("cross", 3)
    qs = heads_of(queries, attention.q.weight, attention.q.bias)
    kv_w, kv_b = attention.kv.weight, attention.kv.bias
    ks = heads_of(states.repeat_interleave(2, 0), kv_w[:D], kv_b[:D])
    owner = torch.arange(2 * B) // 2
    expected = torch.stack(
        [softmax_weights(q, k, lambda r, i, j: bool(mask[owner[r], j])) for q, k in zip(qs, ks)], 1
    )
    torch.testing.assert_close(weights.double(), expected, rtol=1e-5, atol=1e-6)


def test_additive_attention_records_bahdanaus_weights():
    """α_ij = softmax_j vᵀ tanh(W s_i + U h_j + b), one head."""
    torch.manual_seed(2)
    attention = AdditiveAttention(D, 6).eval()
    states, mask = torch.randn(B, 4, 6), torch.tensor([[True] * 4, [True] * 3 + [False]])
    query = torch.randn(B, 1, D)
    with recording({"decoder": torch.nn.ModuleList([attention])}) as log:
        attention(query, attention.project_memory(states, mask), need_weights=False)
        (weights,) = log.layers("cross", 1)
    w, u, v = (p.double() for p in (attention.W.weight, attention.U.weight, attention.v.weight))
    keys = states.double() @ u.T + attention.U.bias.double()
    e = torch.tanh((query.double() @ w.T)[:, :, None] + keys[:, None]) @ v[0]
    e = e.masked_fill(~mask[:, None], float("-inf"))
    torch.testing.assert_close(weights[:, 0].double(), torch.softmax(e, -1), rtol=1e-5, atol=1e-6)


def test_relative_self_attention_adds_the_clipped_distance_to_the_key(x):
    """e_ij = q_i·(k_j + w^K_clip(j−i, k)) / √d (Shaw et al., eq. 4), with and without a^V."""
    for values in (True, False):
        attention = RelativeSelfAttention(D, H, 0.0, max_distance=1, values=values).eval()
        (weights,), _ = recorded(attention, lambda a=attention: a(x, causal=True))
        w, b = attention.qkv.weight, attention.qkv.bias
        qs, ks = heads_of(x, w[:D], b[:D]), heads_of(x, w[D : 2 * D], b[D : 2 * D])
        table = attention.relative_keys.double()
        expected = torch.zeros(B, H, T, T, dtype=torch.float64)
        for h in range(H):
            for bi in range(B):
                for i in range(T):
                    e = torch.stack(
                        [
                            qs[h][bi, i] @ (ks[h][bi, j] + table[max(-1, min(1, j - i)) + 1])
                            for j in range(i + 1)
                        ]
                    ) / math.sqrt(d)
                    expected[bi, h, i, : i + 1] = torch.softmax(e, 0)
        torch.testing.assert_close(weights.double(), expected, rtol=1e-5, atol=1e-6)


def test_linear_attention_records_the_weights_its_sums_stand_for(x):
    """α_ij = φ(q_i)·φ(k_j) / Σ_{j' visible} φ(q_i)·φ(k_j'), φ = elu + 1 (Katharopoulos et al.)."""
    attention = LinearSelfAttention(D, H, 0.0).eval()
    for causal, mask in ((True, None), (False, MASK)):
        (weights,), _ = recorded(
            attention, lambda m=mask, c=causal: attention(x, key_mask=m, causal=c)
        )
        w, b = attention.qkv.weight, attention.qkv.bias
        qs, ks = heads_of(x, w[:D], b[:D]), heads_of(x, w[D : 2 * D], b[D : 2 * D])
        expected = torch.zeros(B, H, T, T, dtype=torch.float64)
        for h in range(H):
            for bi in range(B):
                for i in range(T):
                    seen = [j for j in range(T) if (j <= i if causal else bool(mask[bi, j]))]
                    kernel = torch.stack(
                        [(F.elu(qs[h][bi, i]) + 1) @ (F.elu(ks[h][bi, j]) + 1) for j in seen]
                    )
                    expected[bi, h, i, seen] = kernel / kernel.sum()
        torch.testing.assert_close(weights.double(), expected, rtol=1e-4, atol=1e-6)


def test_a_memory_without_a_matrix_of_weights_records_nothing(x):
    attention = DeltaRuleSelfAttention(D, H, 0.0).eval()
    maps, _ = recorded(attention, lambda: attention(x, causal=True))
    assert maps == []


def test_layers_come_bottom_up_one_map_each():
    """A 2-layer Transformer: the encoder's maps are its layers' in order (each layer's own
    weights), the decoder's self and cross maps likewise, all rows summing to 1."""
    torch.manual_seed(3)
    settings = {"d_model": D, "num_heads": H, "num_layers": 2, "ff_dim": 16, "dropout": 0.0}
    encoder = TransformerEncoder(20, **settings).eval()
    decoder = TransformerDecoder(20, D, **settings).eval()
    src, tgt = torch.randint(4, 20, (B, T)), torch.randint(4, 20, (B, 3))
    with torch.no_grad(), recording({"encoder": encoder, "decoder": decoder}) as log:
        memory = encoder(src, torch.ones(B, T, dtype=torch.bool))
        decoder(memory, tgt)
        mine, theirs = log.layers("encoder"), log.layers("decoder", 3)
        cross = log.layers("cross", 3)
    assert [m.shape for m in mine] == [(B, H, T, T)] * 2
    assert [m.shape for m in theirs] == [(B, H, 3, 3)] * 2
    assert [m.shape for m in cross] == [(B, H, 3, T)] * 2
    for maps in (mine, theirs, cross):
        torch.testing.assert_close(maps[0].sum(-1), torch.ones(maps[0].shape[:-1]))
        assert not torch.allclose(maps[0], maps[1])
    # Post-LN: the first layer's self-attention reads the embeddings as they are
    expected = self_reference(encoder.layers[0].self_attention, encoder.embeddings(src), all_keys)
    torch.testing.assert_close(mine[0].double(), expected, rtol=1e-5, atol=1e-6)


def all_keys(b: int, i: int, j: int) -> bool:
    return True


def test_the_decoders_cached_search_records_its_teacher_forced_maps():
    """Every layer of a 2-layer decoder, step by step over its caches, records the rows of
    the maps that teacher forcing over the same tokens records."""
    torch.manual_seed(4)
    settings = {"d_model": D, "num_heads": H, "num_layers": 2, "ff_dim": 16, "dropout": 0.0}
    decoder = TransformerDecoder(20, D, **settings).eval()
    memory = Memory(torch.randn(B, 4, D), torch.ones(B, 4, dtype=torch.bool), torch.zeros(B, D))
    tokens = torch.randint(4, 20, (B, T))
    with torch.no_grad(), recording({"decoder": decoder}) as log:
        decoder(memory, tokens)
        forced, forced_cross = log.layers("decoder", T), log.layers("cross", T)
    with torch.no_grad(), recording({"decoder": decoder}) as log:
        state = decoder.start(memory)
        for t in range(T):
            _, state, _ = decoder.step(tokens[:, t], state)
        steps = [module.records for kind, module in log.modules if kind == "decoder"]
        cross = log.layers("cross", T)
    for layer, records in enumerate(steps):
        cached = torch.cat([F.pad(w, (0, T - w.size(-1))) for w in records], dim=2)
        torch.testing.assert_close(cached, forced[layer], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(cross[layer], forced_cross[layer], rtol=1e-5, atol=1e-6)


def test_nothing_is_computed_or_kept_outside_a_recording(x, monkeypatch):
    encoder = TransformerEncoder(20, d_model=D, num_heads=H, num_layers=2, ff_dim=16).eval()

    def refused(*args):
        raise AssertionError("attention weights computed outside a recording")

    monkeypatch.setattr(multihead, "attention_weights", refused)
    src = torch.randint(4, 20, (B, T))
    encoder(src, torch.ones(B, T, dtype=torch.bool))
    assert all(layer.self_attention.records is None for layer in encoder.layers)


def test_a_recording_ends_with_its_block_even_on_an_error(x):
    attention = SelfAttention(D, H, 0.0)
    with pytest.raises(KeyError), recording({"encoder": attention}) as log:
        attention(x)
        raise KeyError("boom")
    assert attention.records is None
    with pytest.raises(RuntimeError, match="inside its with block"):
        log.layers("encoder")
    with pytest.raises(ValueError, match="parts are 'encoder' and 'decoder'"):
        with recording({"encoders": attention}):
            pass


@pytest.mark.parametrize(
    "build",
    [
        lambda: SelfAttention(D, H, 0.0),
        lambda: RelativeSelfAttention(D, H, 0.0, max_distance=1, values=True),
        lambda: RelativeSelfAttention(D, H, 0.0, max_distance=1, values=False),
        lambda: LinearSelfAttention(D, H, 0.0),
    ],
    ids=["softmax", "relative", "relative_keys_only", "linear"],
)
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "padded"])
def test_recording_changes_no_output(x, build, causal):
    """A recorded call returns what the unrecorded (fused) call returns."""
    attention = build().eval()
    mask = None if causal else MASK
    plain = attention(x, key_mask=mask, causal=causal)
    (_,), out = recorded(attention, lambda: attention(x, key_mask=mask, causal=causal))
    torch.testing.assert_close(out, plain, rtol=1e-5, atol=1e-6)
