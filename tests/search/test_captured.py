"""Search over fixed key/value caches (`seqtasks.decoders.fixed_cache`) and from captured CUDA
graphs (`seqtasks.search.captured`, `SearchSettings.cuda_graphs`) gives what the growing caches
give: the same logits and attention step by step, the same hypotheses from greedy and beam
search. On a GPU, replaying the captured graphs gives what running the steps eagerly gives."""

from __future__ import annotations

import pytest
import torch
from test_search import sources

from seqtasks.attention.linear import LinearSelfAttention
from seqtasks.decoders import BahdanauDecoder, TransformerDecoder
from seqtasks.decoders.fixed_cache import takes_fixed_cache
from seqtasks.layers.memory import Memory
from seqtasks.search import SearchSettings, beam_search, greedy, search
from seqtasks.search.captured import CapturedSteps

VOCAB, WIDTH = 40, 16


def decoder(seed: int, norm: str = "post", positions: str = "sinusoidal") -> TransformerDecoder:
    torch.manual_seed(seed)
    model = TransformerDecoder(
        vocab_size=VOCAB, memory_dim=WIDTH, d_model=WIDTH, num_heads=2, num_layers=2, ff_dim=32,
        norm=norm, positions=positions,
    )  # fmt: skip
    with torch.no_grad():  # peaked, trained-looking distributions: no near-ties to flip
        model.embedding.weight.mul_(6.0)
    return model.eval()


def memory(seed: int, device: str = "cpu") -> Memory:
    _, mask = sources(seed, [5, 2, 7, 4])
    g = torch.Generator().manual_seed(seed)
    states = torch.randn(*mask.shape, WIDTH, generator=g)
    return Memory(states.to(device), mask.to(device), summary=None)


@pytest.mark.parametrize("norm", ["post", "pre", "resi_dual"])
@pytest.mark.parametrize("positions", ["sinusoidal", "learned"])
def test_fixed_cache_steps_give_the_growing_caches_logits_and_attention(norm, positions):
    model, source, beam, length = decoder(1, norm, positions), memory(2), 3, 9
    rows = source.states.size(0) * beam
    fixed = CapturedSteps(model, length, attention=True, capture=False, bucket=4)  # 3 buckets
    growing_state, fixed_state = model.start(source, beam), fixed.start(source, beam)
    g = torch.Generator().manual_seed(5)
    prev = torch.randint(3, VOCAB, (rows,), generator=g)
    with torch.no_grad():
        for t in range(length):
            logits, growing_state, weights = model.step(prev, growing_state)
            fixed_logits, fixed_state, fixed_weights = fixed.step(prev, fixed_state)
            assert torch.allclose(fixed_logits, logits, atol=1e-5, rtol=1e-5), t
            assert torch.allclose(fixed_weights, weights, atol=1e-6), t
            # beam search's reordering: each row continues some row of its own input
            parents = torch.randint(0, beam, (rows,), generator=g)
            index = torch.arange(rows) // beam * beam + parents
            growing_state = model.reorder(growing_state, index)
            fixed_state = fixed.reorder(fixed_state, index)
            prev = torch.randint(3, VOCAB, (rows,), generator=g)


def same(found, expected):
    assert len(found) == len(expected)
    for mine, theirs in zip(found, expected, strict=True):
        assert [h.tokens for h in mine] == [h.tokens for h in theirs]
        assert [h.finished for h in mine] == [h.finished for h in theirs]
        assert [h.score for h in mine] == pytest.approx([h.score for h in theirs], abs=1e-5)
        for a, b in zip(mine, theirs, strict=True):
            assert (a.attention is None) == (b.attention is None)
            if a.attention is not None:
                assert torch.allclose(a.attention, b.attention, atol=1e-6)


@pytest.mark.parametrize("seed", range(4))
def test_search_over_fixed_caches_finds_what_the_growing_caches_find(seed):
    model, source = decoder(seed), memory(seed + 10)
    limits = torch.tensor([7, 3, 11, 1])
    steps = int(limits.max())
    fixed = CapturedSteps(model, steps, attention=True, capture=False, bucket=4)
    found = greedy(fixed, source, limits, attention=True, shrink_below=0.0)
    same(found, greedy(model, source, limits, attention=True))
    settings = SearchSettings(beam=3, n_best=2, length_alpha=0.6)
    fixed = CapturedSteps(model, steps, attention=True, capture=False, bucket=5)
    found = beam_search(fixed, source, settings, limits, attention=True, shrink_below=0.0)
    same(found, beam_search(model, source, settings, limits, attention=True))


def test_without_attention_asked_no_weights_are_computed():
    model, source = decoder(0), memory(1)
    fixed = CapturedSteps(model, 4, attention=False, capture=False)
    state = fixed.start(source)
    logits, _, weights = fixed.step(torch.full((4,), 3), state)
    assert weights is None and logits.shape == (4, VOCAB)


def test_captured_search_keeps_every_row():
    model, source = decoder(0), memory(1)
    fixed = CapturedSteps(model, 4, attention=False, capture=False)
    state = fixed.start(source, beam_size=2)
    with pytest.raises(ValueError, match="shrink_below=0"):
        fixed.reorder(state, torch.arange(6))


def test_only_softmax_self_attention_transformers_take_fixed_caches():
    assert takes_fixed_cache(decoder(0))
    linear = TransformerDecoder(
        vocab_size=VOCAB, memory_dim=WIDTH, d_model=WIDTH, num_heads=2, num_layers=1,
        ff_dim=32, self_attention=LinearSelfAttention,
    )  # fmt: skip
    assert not takes_fixed_cache(linear)
    rnn = BahdanauDecoder(VOCAB, WIDTH, readout_dim=8, embed_dim=8, hidden_size=8)
    assert not takes_fixed_cache(rnn)


def test_cuda_graphs_on_a_cpu_search_as_without():
    model, source = decoder(3), memory(4)
    for beam in (1, 3):
        plain = SearchSettings(beam=beam)
        found = search(model, source, plain.override(cuda_graphs=True), attention=True)
        same(found, search(model, source, plain, attention=True))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (run where one is)")
@pytest.mark.parametrize("precision", ["32", "bf16"])
def test_replayed_graphs_find_what_the_growing_caches_find(precision):
    model, source = decoder(2).cuda(), memory(3, "cuda")
    tolerance = 1e-4 if precision == "32" else 5e-2
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16"):
        for beam in (1, 4):
            settings = SearchSettings(beam=beam, n_best=min(beam, 2))
            replayed = search(model, source, settings.override(cuda_graphs=True), attention=True)
            grown = search(model, source, settings, attention=True)
            for mine, theirs in zip(replayed, grown, strict=True):
                assert [h.tokens for h in mine] == [h.tokens for h in theirs]
                scores = [h.score for h in theirs]
                assert [h.score for h in mine] == pytest.approx(scores, abs=tolerance)
