"""`smoothed_cross_entropy` against PyTorch's own `F.cross_entropy`: the same losses and the same
gradients, with and without label smoothing, with ignored rows, across its blocks of rows."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from seqtasks.layers.cross_entropy import ROWS, smoothed_cross_entropy


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_losses_and_gradients_equal_torchs_cross_entropy(smoothing):
    generator = torch.Generator().manual_seed(0)
    n, vocab, ignore = 2 * ROWS + 37, 53, 0  # three blocks, the last one short
    logits = (4 * torch.randn(n, vocab, generator=generator, dtype=torch.float64)).requires_grad_()
    targets = torch.randint(0, vocab, (n,), generator=generator)
    targets[::7] = ignore
    weights = torch.rand(n, generator=generator, dtype=torch.float64)  # a non-uniform upstream

    expected = F.cross_entropy(logits, targets, ignore_index=ignore, label_smoothing=smoothing,
                               reduction="none")  # fmt: skip
    (expected_grad,) = torch.autograd.grad((expected * weights).sum(), logits)
    ours = smoothed_cross_entropy(logits, targets, smoothing, ignore)
    (ours_grad,) = torch.autograd.grad((ours * weights).sum(), logits)

    assert torch.allclose(ours, expected, rtol=1e-12, atol=1e-12)
    assert torch.allclose(ours_grad, expected_grad, rtol=1e-12, atol=1e-12)
    assert (ours[targets == ignore] == 0).all() and (ours_grad[targets == ignore] == 0).all()


def test_a_confident_correct_row_costs_about_the_smoothing_alone():
    """Worked by hand: logits (20, 0, 0) with target 0 and ε = 0.3 lose
    lse − 0.7 · 20 − 0.3 · 20/3 = lse − 16, lse = 20 + log(1 + 2e⁻²⁰)."""
    logits = torch.tensor([[20.0, 0.0, 0.0]], dtype=torch.float64)
    loss = smoothed_cross_entropy(logits, torch.tensor([0]), 0.3, -100)
    lse = 20 + torch.log1p(torch.tensor(2.0, dtype=torch.float64) * torch.exp(torch.tensor(-20.0)))
    assert loss.item() == pytest.approx((lse - 16).item(), rel=1e-12)
