"""Caption decoders: step-by-step decoding equals teacher forcing, beams and reordering, and
the loss terms of Show, Attend and Tell (doubly stochastic attention, REINFORCE, entropy)."""

from __future__ import annotations

import functools

import pytest
import torch

from seqtasks.attention import GeneralAttention
from seqtasks.decoders import HardAttentionDecoder, ShowTellDecoder, SoftAttentionDecoder
from seqtasks.decoders.base import DecoderOutput
from seqtasks.encoders import ConvEncoder
from seqtasks.memory import Memory
from seqtasks.search import beam_search, greedy
from seqtasks.tasks import CaptioningTask

VOCAB, D, B, GRID, T = 13, 10, 3, (2, 3), 6
L = GRID[0] * GRID[1]
SIZES = dict(embed_dim=8, hidden_size=12, dropout=0.3)
DECODERS = {
    "soft": functools.partial(SoftAttentionDecoder, **SIZES),
    "soft-general": functools.partial(SoftAttentionDecoder, attention=GeneralAttention, **SIZES),
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
    state = decoder.init_state(memory)
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


def test_hard_attention_samples_in_training_and_steps_the_same_way():
    torch.manual_seed(0)
    decoder = HardAttentionDecoder(VOCAB, D, embed_dim=8, hidden_size=12, dropout=0.0).train()
    memory, tgt_in = grid_memory(), targets()
    torch.manual_seed(7)
    output = decoder(memory, tgt_in)
    torch.manual_seed(7)
    logits, _ = steps(decoder, memory, tgt_in)
    torch.testing.assert_close(output.logits, logits, atol=1e-5, rtol=1e-5)
    sampled = output.choice_log_prob != 0  # (B, T): rows that sampled, at every step
    assert output.choice_log_prob.shape == (B, T)
    assert (sampled.all(1) | ~sampled.any(1)).all(), "an image samples at every step or never"
    assert (output.choice_log_prob <= 0).all()
    # Over many images about half use the expected context.
    torch.manual_seed(1)
    many = decoder(grid_memory(batch=400), torch.full((400, 2), 5))
    share = (many.choice_log_prob == 0).all(1).float().mean()
    assert 0.4 < share < 0.6


def test_hard_attention_context_is_one_annotation():
    torch.manual_seed(0)
    decoder = HardAttentionDecoder(VOCAB, D, embed_dim=8, hidden_size=12, dropout=0.0)
    decoder.expectation_probability = 0.0
    decoder.train()
    memory = grid_memory()
    state = decoder.init_state(memory)
    h = torch.randn(B, 12)
    context, weights, log_prob = decoder.glimpse(h, state)
    matches = (context[:, None, :] == memory.states).all(-1)  # (B, L)
    assert (matches.sum(1) == 1).all()
    torch.testing.assert_close(log_prob, weights[matches].log())
    decoder.eval()
    chosen, weights, none = decoder.glimpse(h, decoder.init_state(memory))
    expected = torch.bmm(weights[:, None, :], memory.states)[:, 0]
    assert none is None and torch.allclose(chosen, expected, atol=1e-6)


@pytest.mark.parametrize("name", DECODERS)
def test_beams_and_reorder(name):
    """init_state(memory, K) equals K copies of each input, and reorder (with inputs dropped)
    equals decoding the kept hypotheses from the start."""
    decoder, memory, k = make(name), grid_memory(), 2
    first, second = torch.tensor([4, 5, 6, 7, 8, 9]), torch.tensor([10, 11, 12, 4])
    keep = torch.tensor([1, 0, 4, 5])  # input 0 with its beams swapped, and input 2
    with torch.no_grad():
        beams = decoder.init_state(memory, beam_size=k)
        repeated = decoder.init_state(memory.index_select(torch.arange(B).repeat_interleave(k)))
        logits_a, beams, _ = decoder.step(first, beams)
        logits_b, _, _ = decoder.step(first, repeated)
        torch.testing.assert_close(logits_a, logits_b, atol=1e-5, rtol=1e-5)
        kept, _, _ = decoder.step(second, decoder.reorder(beams, keep))
        fresh = decoder.init_state(memory.index_select(torch.tensor([0, 2])), beam_size=k)
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
    one = greedy(decoder, memory, 2, 3, 5, return_attention=True)
    beam = beam_search(decoder, memory, 2, 3, 5, beam_size=1, alpha=0.0, return_attention=True)
    assert [h[0].tokens for h in one] == [h[0].tokens for h in beam]
    if name != "show-tell":
        assert all(h[0].attention.shape == (len(h[0].tokens), 16) for h in one if h[0].tokens)


# ---- the loss terms --------------------------------------------------------------------------


def bare_task(**kwargs) -> CaptioningTask:
    return CaptioningTask(
        encoder=functools.partial(ConvEncoder, channels=(4,), project_dim=D),
        decoder=DECODERS["soft"],
        tgt_vocab_size=VOCAB,
        **kwargs,
    )


def test_doubly_stochastic_penalty_and_entropy_by_hand():
    task = bare_task(attention_penalty=2.0, entropy_weight=0.5)
    logits = torch.zeros(1, 2, VOCAB)  # uniform: every token costs log V
    alpha = torch.tensor([[[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]]])  # (B=1, T=2, S=3)
    mask = torch.tensor([[True, True, False]])  # the third position is padding
    loss = task.loss(DecoderOutput(logits, alpha), torch.tensor([[5, 3]]), mask)
    nll = 2 * torch.log(torch.tensor(float(VOCAB)))
    penalty = 2.0 * ((1 - 1.5) ** 2 + (1 - 0.5) ** 2)  # coverage 1.5 and 0.5; padding skipped
    entropy = torch.log(torch.tensor(2.0))  # H(0.5, 0.5); H(1, 0) = 0
    torch.testing.assert_close(loss, (nll + penalty - 0.5 * entropy) / 2)
    # A padded target position carries no attention, penalty or entropy.
    padded = task.loss(DecoderOutput(logits, alpha), torch.tensor([[5, 0]]), mask)
    expected = (nll / 2 + 2.0 * ((1 - 0.5) ** 2 + 0.5**2) - 0.5 * entropy) / 1
    torch.testing.assert_close(padded, expected)


def test_reinforce_pushes_up_choices_with_better_rewards():
    task = bare_task(attention_penalty=0.0, reward_scale=0.5).train()
    targets_ = torch.tensor([[5], [5]])
    logits = torch.zeros(2, 1, VOCAB)
    logits[0, 0, 5] = 4.0  # the first image's caption is likely given its choices
    choice = torch.tensor([[-1.0], [-1.0]], requires_grad=True)  # log p(s)
    output = DecoderOutput(logits, None, choice)
    task.loss(output, targets_, torch.ones(2, 1, dtype=torch.bool)).backward()
    # The first call starts the baseline at the batch mean: the better image's choice gets a
    # negative gradient (its probability goes up), the worse one's a positive one.
    assert choice.grad[0, 0] < 0 < choice.grad[1, 0]
    reward = -torch.nn.functional.cross_entropy(logits[:, 0], targets_[:, 0], reduction="none")
    torch.testing.assert_close(choice.grad[:, 0], -0.5 * (reward - reward.mean()) / 2)
    torch.testing.assert_close(task.reward_baseline, reward.mean())
    # b <- 0.9 b + 0.1 mean reward, and b is used before it moves.
    old = task.reward_baseline.clone()
    choice.grad = None
    task.loss(
        DecoderOutput(logits + 1.0, None, choice), targets_, torch.ones(2, 1, dtype=torch.bool)
    ).backward()
    new_reward = -torch.nn.functional.cross_entropy(
        (logits + 1.0)[:, 0], targets_[:, 0], reduction="none"
    )
    torch.testing.assert_close(task.reward_baseline, 0.9 * old + 0.1 * new_reward.mean())
    torch.testing.assert_close(choice.grad[:, 0], -0.5 * (new_reward - old) / 2)


def test_no_reinforce_outside_training_and_none_without_choices():
    task = bare_task(attention_penalty=0.0).eval()
    logits, tgt = torch.randn(2, 3, VOCAB), torch.tensor([[5, 6, 3], [7, 3, 0]])
    mask = torch.ones(2, 1, dtype=torch.bool)
    plain = task.loss(DecoderOutput(logits), tgt, mask)
    with_choices = task.loss(DecoderOutput(logits, None, torch.full((2, 3), -2.0)), tgt, mask)
    torch.testing.assert_close(plain, with_choices)
    assert task.reward_baseline is None
    expected = torch.nn.functional.cross_entropy(
        logits.flatten(0, 1), tgt.flatten(), ignore_index=0
    )
    torch.testing.assert_close(plain, expected)


def test_hard_attention_training_step_learns_attention_through_reinforce():
    """With the word loss cut off from the choice, the attention weights still get a gradient:
    REINFORCE's (through log α of the sampled locations) and the entropy bonus's."""
    torch.manual_seed(0)
    task = bare_task(attention_penalty=0.0, entropy_weight=0.002, reward_scale=0.1)
    task.decoder = HardAttentionDecoder(VOCAB, D, embed_dim=8, hidden_size=12, dropout=0.0)
    task.decoder.expectation_probability = 0.0  # every image samples
    task.train()
    memory, tgt = grid_memory(), targets()
    output = task.decoder(memory, tgt)
    task.loss(output, torch.roll(tgt, -1, 1), memory.mask).backward()
    assert task.decoder.attention.v.weight.grad.abs().sum() > 0
    assert task.reward_baseline is not None
