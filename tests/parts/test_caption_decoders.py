"""Caption decoders: step-by-step decoding equals teacher forcing, hard attention samples one
location, beams and reordering (the loss terms are in test_objective.py)."""

from __future__ import annotations

import functools

import pytest
import torch

from seqtasks.attention import MultiHeadAttention
from seqtasks.attention.scores import GeneralAttention
from seqtasks.decoders import HardAttentionDecoder, ShowTellDecoder, SoftAttentionDecoder
from seqtasks.encoders import ConvEncoder
from seqtasks.layers.memory import Memory
from seqtasks.search import SearchSettings, beam_search, greedy

VOCAB, D, B, GRID, T = 13, 10, 3, (2, 3), 6
L = GRID[0] * GRID[1]
SIZES = dict(embed_dim=8, hidden_size=12, dropout=0.3)
DECODERS = {
    "soft": functools.partial(SoftAttentionDecoder, **SIZES),
    "soft-general": functools.partial(SoftAttentionDecoder, attention=GeneralAttention, **SIZES),
    "soft-multi-head": functools.partial(
        SoftAttentionDecoder, attention=functools.partial(MultiHeadAttention, heads=3), **SIZES
    ),
    "hard-expectation": functools.partial(HardAttentionDecoder, **SIZES),
    "hard-argmax": functools.partial(HardAttentionDecoder, test_context="argmax", **SIZES),
    "show-tell": functools.partial(ShowTellDecoder, **SIZES),
}


def grid_memory(seed: int = 0, batch: int = B) -> Memory:
    g = torch.Generator().manual_seed(seed)
    states = torch.randn(batch, L, D, generator=g)
    mask = torch.ones(batch, L, dtype=torch.bool)
    return Memory(states=states, mask=mask, summary=states.mean(1), grid=GRID)


def make(name: str):
    torch.manual_seed(0)
    return DECODERS[name](VOCAB, D).eval()


def targets(seed: int = 1) -> torch.Tensor:
    tgt = torch.randint(4, VOCAB, (B, T), generator=torch.Generator().manual_seed(seed))
    tgt[:, 0] = 2
    tgt[2, 4:] = 0  # padding
    return tgt


def steps(decoder, memory: Memory, tgt_in: torch.Tensor):
    state = decoder.start(memory)
    logits, weights = [], []
    for token in tgt_in.unbind(1):
        step_logits, state, alpha = decoder.step(token, state)
        logits.append(step_logits)
        weights.append(alpha)
    return torch.stack(logits, 1), None if weights[0] is None else torch.stack(weights, 1)


@pytest.mark.parametrize("name", DECODERS)
def test_step_by_step_equals_teacher_forcing(name):
    decoder, memory, tgt_in = make(name), grid_memory(), targets()
    with torch.no_grad():
        output = decoder(memory, tgt_in)
        logits, weights = steps(decoder, memory, tgt_in)
    assert output.logits.shape == (B, T, VOCAB) and output.choice_log_prob is None
    torch.testing.assert_close(output.logits, logits, atol=1e-5, rtol=1e-5)
    if name == "show-tell":
        assert output.attention is None and weights is None
    else:
        torch.testing.assert_close(output.attention, weights, atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(output.attention.sum(-1), torch.ones(B, T))


def test_hard_attention_refuses_an_attention_whose_context_is_no_annotation():
    """A sampled location's context is that annotation, which multi-head attention (projected
    values, then W^O) has no counterpart of."""
    with pytest.raises(ValueError, match="HardAttentionDecoder samples one annotation"):
        HardAttentionDecoder(VOCAB, D, attention=MultiHeadAttention, **SIZES)


def test_hard_attention_samples_in_training_and_steps_the_same_way():
    torch.manual_seed(0)
    decoder = HardAttentionDecoder(VOCAB, D, embed_dim=8, hidden_size=12, dropout=0.0).train()
    memory, tgt_in = grid_memory(), targets()
    torch.manual_seed(7)
    output = decoder(memory, tgt_in)
    torch.manual_seed(7)
    logits, _ = steps(decoder, memory, tgt_in)
    torch.testing.assert_close(output.logits, logits, atol=1e-5, rtol=1e-5)
    assert output.choice_log_prob.shape == (B, T) and output.sampled.shape == (B,)
    # An image samples at every step (log α < 0) or uses the expectation (no choice: 0).
    assert (output.choice_log_prob[output.sampled] < 0).all()
    assert (output.choice_log_prob[~output.sampled] == 0).all()
    # Over many images about half use the expected context.
    torch.manual_seed(1)
    many = decoder(grid_memory(batch=400), torch.full((400, 2), 5))
    assert 0.4 < (~many.sampled).float().mean() < 0.6


def test_hard_attention_context_is_one_annotation():
    torch.manual_seed(0)
    decoder = HardAttentionDecoder(VOCAB, D, embed_dim=8, hidden_size=12, dropout=0.0)
    decoder.expectation_probability = 0.0
    decoder.train()
    memory = grid_memory()
    state = decoder.start(memory)
    h = torch.randn(B, 12)
    context, weights, log_prob = decoder.glimpse(h, state)
    matches = (context[:, None, :] == memory.states).all(-1)  # (B, L)
    assert (matches.sum(1) == 1).all()
    torch.testing.assert_close(log_prob, weights[matches].log())
    decoder.eval()
    chosen, weights, none = decoder.glimpse(h, decoder.start(memory))
    expected = torch.bmm(weights[:, None, :], memory.states)[:, 0]
    assert none is None and torch.allclose(chosen, expected, atol=1e-6)


@pytest.mark.parametrize("name", DECODERS)
def test_beams_and_reorder(name):
    """start(memory, K) equals K copies of each input, and reorder (with inputs dropped)
    equals decoding the kept hypotheses from the start."""
    decoder, memory, k = make(name), grid_memory(), 2
    first, second = torch.tensor([4, 5, 6, 7, 8, 9]), torch.tensor([10, 11, 12, 4])
    keep = torch.tensor([1, 0, 4, 5])  # input 0 with its beams swapped, and input 2
    with torch.no_grad():
        beams = decoder.start(memory, beam_size=k)
        repeated = decoder.start(memory.index_select(torch.arange(B).repeat_interleave(k)))
        logits_a, beams, _ = decoder.step(first, beams)
        logits_b, _, _ = decoder.step(first, repeated)
        torch.testing.assert_close(logits_a, logits_b, atol=1e-5, rtol=1e-5)
        kept, _, _ = decoder.step(second, decoder.reorder(beams, keep))
        fresh = decoder.start(memory.index_select(torch.tensor([0, 2])), beam_size=k)
        _, fresh, _ = decoder.step(first[keep], fresh)
        expected, _, _ = decoder.step(second, fresh)
    torch.testing.assert_close(kept, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ["soft", "hard-expectation", "show-tell"])
def test_image_encoder_with_decoder_trains_and_searches(name):
    torch.manual_seed(0)
    encoder = ConvEncoder(channels=(4, 8), project_dim=D)
    decoder = DECODERS[name](VOCAB, encoder.out_dim).train()
    images, tgt_in = torch.rand(B, 3, 16, 16), targets()
    output = decoder(encoder(images), tgt_in)
    torch.nn.functional.cross_entropy(output.logits.flatten(0, 1), tgt_in.flatten()).backward()
    assert encoder.cnn[0].weight.grad.abs().sum() > 0, "no gradient reached the CNN"
    encoder.eval(), decoder.eval()
    memory = encoder(images)
    one = greedy(decoder, memory, 5, attention=True)
    beam = beam_search(decoder, memory, SearchSettings(1, length_alpha=0.0), 5, attention=True)
    assert [h[0].tokens for h in one] == [h[0].tokens for h in beam]
    if name != "show-tell":
        assert all(h[0].attention.shape == (len(h[0].tokens), 16) for h in one if h[0].tokens)
