"""The task's objective, against values worked out another way: label smoothing and the loss
terms of Show, Attend and Tell by hand, and the REINFORCE estimator of hard attention against
the exact gradient of a problem small enough to enumerate every attention path.

Sizes: V words, D annotation width, L image locations, T caption steps.
"""

from __future__ import annotations

import functools
import itertools
import math

import pytest
import torch
from torch import Tensor

from seqtasks.captioning.task import CaptioningTask
from seqtasks.decoders import HardAttentionDecoder, SoftAttentionDecoder
from seqtasks.decoders.base import DecoderOutput
from seqtasks.encoders import ConvEncoder
from seqtasks.layers.memory import Memory

V, D = 7, 4


def bare_task(**kwargs) -> CaptioningTask:
    return CaptioningTask(
        encoder=functools.partial(ConvEncoder, channels=(4,), project_dim=D),
        decoder=functools.partial(SoftAttentionDecoder, embed_dim=4, hidden_size=6),
        tgt_vocab_size=V,
        **kwargs,
    )


# ---- label smoothing, the doubly stochastic penalty, the entropy bonus ------------------------


def test_label_smoothing_by_hand():
    """Szegedy et al. (2016): the target distribution is (1 − ε) on the word plus ε/V on every
    word, so a token costs (1 − ε)(−log p_y) + ε · mean_v(−log p_v); padding costs nothing."""
    task = bare_task(label_smoothing=0.2, attention_penalty=0.0)
    logits = torch.tensor([[[2.0, 0.0, 1.0, 0.0, 0.0, -1.0, 3.0], [0.0] * V]])  # (1, 2, V)
    targets = torch.tensor([[6, 0]])  # the second position is padding
    z = math.log(sum(math.exp(x) for x in logits[0, 0].tolist()))
    log_p = [x - z for x in logits[0, 0].tolist()]
    expected = 0.8 * -log_p[6] + 0.2 * -sum(log_p) / V
    loss = task.loss(DecoderOutput(logits), targets, torch.ones(1, 1, dtype=torch.bool))
    assert loss.item() == pytest.approx(expected, rel=1e-6)


def test_doubly_stochastic_penalty_and_entropy_by_hand():
    task = bare_task(attention_penalty=2.0, entropy_weight=0.5)
    logits = torch.zeros(1, 2, V)  # uniform: every token costs log V
    alpha = torch.tensor([[[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]]])  # (B=1, T=2, S=3)
    mask = torch.tensor([[True, True, False]])  # the third position is padding
    loss = task.loss(DecoderOutput(logits, alpha), torch.tensor([[5, 3]]), mask)
    nll = 2 * math.log(V)
    penalty = 2.0 * ((1 - 1.5) ** 2 + (1 - 0.5) ** 2)  # coverage 1.5 and 0.5; padding skipped
    entropy = math.log(2.0)  # H(0.5, 0.5); H(1, 0) = 0
    assert loss.item() == pytest.approx((nll + penalty - 0.5 * entropy) / 2, rel=1e-6)
    # A padded target position carries no attention, penalty or entropy.
    padded = task.loss(DecoderOutput(logits, alpha), torch.tensor([[5, 0]]), mask)
    expected = nll / 2 + 2.0 * ((1 - 0.5) ** 2 + 0.5**2) - 0.5 * entropy
    assert padded.item() == pytest.approx(expected, rel=1e-6)


def test_objective_is_per_example_and_loss_divides_by_tokens():
    task = bare_task(attention_penalty=1.0)
    logits = torch.zeros(2, 2, V)
    alpha = torch.tensor([[[1.0, 0.0], [1.0, 0.0]], [[0.5, 0.5], [0.0, 0.0]]])  # (2, 2, 2)
    targets = torch.tensor([[4, 5], [4, 0]])
    mask = torch.ones(2, 2, dtype=torch.bool)
    per_example = task.objective(DecoderOutput(logits, alpha), targets, mask)
    # Example 0: 2 log V + (1 − 2)² + (1 − 0)²; example 1: log V + 2 · (1 − 0.5)².
    expected = [2 * math.log(V) + 2.0, math.log(V) + 0.5]
    assert per_example.tolist() == pytest.approx(expected, rel=1e-6)
    loss = task.loss(DecoderOutput(logits, alpha), targets, mask)
    assert loss.item() == pytest.approx(sum(expected) / 3, rel=1e-6)


# ---- REINFORCE: the rule by hand ----------------------------------------------------------------


def choices_output(logits: Tensor, sampled: list[bool]) -> tuple[DecoderOutput, Tensor]:
    """A one-step output whose choices have log-probability −1 each (a leaf to read the
    gradient from), sampled by the rows named."""
    choice = torch.full((len(sampled), 1), -1.0, requires_grad=True)
    masked = choice * torch.tensor(sampled, dtype=torch.float)[:, None]  # 0 where none was made
    return DecoderOutput(logits, None, masked, torch.tensor(sampled)), choice


def test_reinforce_by_hand_uses_sampled_examples_and_earlier_batches_only():
    """−λ_r (r − b) Σ_t log p(s_t) per sampled example; an example that used the expected
    context has no choice and no say in b; b starts at 0 and moves after each batch by
    b ← 0.9 b + 0.1 · (mean reward of the batch's sampled examples), so a batch never sees
    its own rewards in b."""
    task = bare_task(attention_penalty=0.0, reward_scale=0.5).train()
    targets = torch.tensor([[5], [5], [5]])
    logits = torch.zeros(3, 1, V)
    logits[0, 0, 5] = 4.0  # the first caption is likely given its choices
    logits[2, 0, 5] = 9.0  # the third is likelier still, but used the expectation
    reward = [4 - math.log(math.exp(4) + 6), -math.log(7)]  # log p(y | s): −0.10 and −1.95
    output, choice = choices_output(logits, [True, True, False])
    task.loss(output, targets, torch.ones(3, 1, dtype=torch.bool)).backward()
    # d loss / d log p(s) = −λ_r (r − b) / tokens with b = 0 in the first batch.
    expected = [-0.5 * (reward[0] - 0.0) / 3, -0.5 * (reward[1] - 0.0) / 3, 0.0]
    assert choice.grad[:, 0].tolist() == pytest.approx(expected, rel=1e-5)
    b1 = 0.1 * (reward[0] + reward[1]) / 2  # the third example does not count
    assert float(task.objective.baseline) == pytest.approx(b1, rel=1e-5)

    # The second batch uses b1, then moves it; a batch without a sampled example leaves it.
    output, choice = choices_output(logits[:2], [False, True])
    task.loss(output, targets[:2], torch.ones(2, 1, dtype=torch.bool)).backward()
    assert choice.grad[:, 0].tolist() == pytest.approx([0.0, -0.5 * (reward[1] - b1) / 2])
    b2 = 0.9 * b1 + 0.1 * reward[1]
    assert float(task.objective.baseline) == pytest.approx(b2, rel=1e-5)
    output, _ = choices_output(logits[:1], [False])
    task.loss(output, targets[:1], torch.ones(1, 1, dtype=torch.bool))
    assert float(task.objective.baseline) == pytest.approx(b2, rel=1e-5)


def test_no_reinforce_outside_training_and_none_without_choices():
    task = bare_task(attention_penalty=0.0).eval()
    logits, tgt = torch.randn(2, 3, V), torch.tensor([[5, 6, 3], [4, 3, 0]])
    mask = torch.ones(2, 1, dtype=torch.bool)
    plain = task.loss(DecoderOutput(logits), tgt, mask)
    choices = torch.full((2, 3), -2.0)
    with_choices = task.loss(
        DecoderOutput(logits, None, choices, torch.tensor([True, True])), tgt, mask
    )
    torch.testing.assert_close(plain, with_choices)
    assert task.objective.baseline is None
    expected = torch.nn.functional.cross_entropy(
        logits.flatten(0, 1), tgt.flatten(), ignore_index=0
    )
    torch.testing.assert_close(plain, expected)


# ---- REINFORCE: the estimator against the exact gradient -----------------------------------------

L_LOCATIONS, T_STEPS = 3, 2
TGT_IN, TGT_OUT = torch.tensor([[2, 5]]), torch.tensor([[5, 6]])  # BOS y1, then y1 y2


def enumerable_problem() -> tuple[CaptioningTask, Memory]:
    """One image of L = 3 locations, a caption of T = 2 words: 9 attention paths. The
    annotations differ strongly, so where the decoder looks changes the words' likelihood."""
    torch.manual_seed(3)
    task = bare_task(attention_penalty=0.0, reward_scale=1.0)
    task.decoder = HardAttentionDecoder(V, D, embed_dim=4, hidden_size=6, dropout=0.0)
    task.decoder.expectation_probability = 0.0  # every pass samples its locations
    states = 3.0 * torch.randn(1, L_LOCATIONS, D)
    memory = Memory(states, torch.ones(1, L_LOCATIONS, dtype=torch.bool), states.mean(1), (1, 3))
    return task.train(), memory


def flat_grad(module: torch.nn.Module) -> Tensor:
    return torch.cat([p.grad.flatten() for p in module.parameters() if p.grad is not None])


def exact_gradient(task: CaptioningTask, memory: Memory, monkeypatch) -> Tensor:
    """∇ E_s[−log p(y | s)] / T, with E_s the sum over all L^T paths s of p(s) = Π_t α_t(s_t),
    each path decoded with its locations forced."""
    decoder = task.decoder
    expected_nll = torch.zeros(())
    for path in itertools.product(range(L_LOCATIONS), repeat=T_STEPS):
        forced = iter(path)
        monkeypatch.setattr(torch, "multinomial", lambda w, n, s=forced: torch.tensor([[next(s)]]))
        output = decoder(memory, TGT_IN)
        log_p_path = output.choice_log_prob.sum()
        nll = torch.nn.functional.cross_entropy(output.logits[0], TGT_OUT[0], reduction="sum")
        expected_nll = expected_nll + log_p_path.exp() * nll
    monkeypatch.undo()
    decoder.zero_grad()
    (expected_nll / T_STEPS).backward()
    return flat_grad(decoder)


def sampled_gradients(task: CaptioningTask, memory: Memory, n: int, keep_baseline: bool):
    """n REINFORCE estimates of the gradient, one training loss of one image each; with
    `keep_baseline` False, b is reset to 0 before every estimate (no baseline)."""
    torch.manual_seed(11)
    grads = []
    for _ in range(n):
        if not keep_baseline:
            task.objective.baseline = None
        task.decoder.zero_grad()
        output = task.decoder(memory, TGT_IN)
        task.loss(output, TGT_OUT, memory.mask).backward()
        grads.append(flat_grad(task.decoder))
    return torch.stack(grads)  # (n, parameters)


@pytest.fixture(scope="module")
def estimates():
    """The exact gradient, and 1,200 estimates with the baseline and 1,200 without."""
    monkeypatch = pytest.MonkeyPatch()
    task, memory = enumerable_problem()
    exact = exact_gradient(task, memory, monkeypatch)
    with_baseline = sampled_gradients(task, memory, 1200, keep_baseline=True)
    task.objective.baseline = None
    without = sampled_gradients(task, memory, 1200, keep_baseline=False)
    return exact, with_baseline, without


def projections(exact: Tensor) -> Tensor:
    """(P, k) directions: the exact gradient's own, and four random ones."""
    g = torch.Generator().manual_seed(0)
    return torch.stack([exact, *torch.randn(4, exact.numel(), generator=g)], dim=1)


def test_reinforce_estimate_is_unbiased(estimates):
    """The mean of the sampled gradients matches the exact one within 3 standard errors, along
    the exact gradient and along random directions, with the baseline and without. All
    estimates count, the first ones too (while b is still far from the rewards): a baseline
    from earlier batches leaves every estimate unbiased."""
    exact, with_baseline, without = estimates
    directions = projections(exact)
    for sample in (with_baseline, without):
        projected = sample @ directions  # (n, k)
        mean = projected.mean(0)
        standard_error = projected.std(0) / math.sqrt(len(projected))
        target = exact @ directions
        assert ((mean - target).abs() <= 3 * standard_error).all(), (mean, target, standard_error)


def test_the_baseline_lowers_the_variance(estimates):
    """The estimates with the moving-average baseline vary less than those without one
    (b = 0), in total (the trace of their covariance) and along the exact gradient."""
    exact, with_baseline, without = estimates
    settled = with_baseline[200:]  # once b has moved from 0 to the rewards
    assert settled.var(0).sum() < 0.5 * without.var(0).sum()
    assert (settled @ exact).var() < 0.5 * (without @ exact).var()


def test_hard_attention_training_step_learns_attention_through_reinforce():
    """With the word loss cut off from the choice, the attention weights still get a gradient:
    REINFORCE's (through log α of the sampled locations) and the entropy bonus's."""
    task, memory = enumerable_problem()
    output = task.decoder(memory, TGT_IN)
    task.loss(output, TGT_OUT, memory.mask).backward()
    assert task.decoder.attention.v.weight.grad.abs().sum() > 0
    assert task.objective.baseline is not None
