"""Gradient clipping with a fused optimiser (seqtasks.training.clipping): clipped here, to the
norm or value asked, where nothing scales the gradients; left to Lightning otherwise."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from seqtasks.training.clipping import clip_gradients


class Task(SimpleNamespace):
    """What `clip_gradients` reads of a LightningModule: its trainer's precision plugin, and
    Lightning's own clipping (recorded, not run)."""

    def clip_gradients(self, optimizer, value, algorithm):
        self.lightning_clipped = (value, algorithm)


def parameters_with_gradients(seed: int = 0) -> list[torch.nn.Parameter]:
    generator = torch.Generator().manual_seed(seed)
    parameters = [torch.nn.Parameter(torch.zeros(shape)) for shape in ((3, 4), (5,), (2, 2))]
    for p in parameters:
        p.grad = torch.randn(p.shape, generator=generator) * 3
    return parameters


def task(scaler=None) -> Task:
    return Task(trainer=SimpleNamespace(precision_plugin=SimpleNamespace(scaler=scaler)))


def test_a_fused_optimiser_is_clipped_to_the_norm_without_a_scaler():
    parameters = parameters_with_gradients()
    before = [p.grad.clone() for p in parameters]
    total = sum(float((g**2).sum()) for g in before) ** 0.5  # the norm over every gradient
    assert total > 1.0
    optimizer = torch.optim.AdamW(parameters, fused=True)
    clipped = task()
    clip_gradients(clipped, optimizer, 1.0, None)
    assert not hasattr(clipped, "lightning_clipped")
    after = sum(float((p.grad**2).sum()) for p in parameters) ** 0.5
    assert after == pytest.approx(1.0, rel=1e-5)
    for g, p in zip(before, parameters):  # scaled alike: directions kept
        torch.testing.assert_close(p.grad, g / total, rtol=1e-5, atol=1e-6)


def test_a_fused_optimiser_is_clipped_by_value_when_asked():
    parameters = parameters_with_gradients(1)
    before = [p.grad.clone() for p in parameters]
    clip_gradients(task(), torch.optim.Adam(parameters, fused=True), 0.5, "value")
    for g, p in zip(before, parameters):
        torch.testing.assert_close(p.grad, g.clamp(-0.5, 0.5))


@pytest.mark.parametrize("case", ["float16 scaler", "optimiser not fused", "no clipping asked"])
def test_lightning_clips_every_other_case(case):
    parameters = parameters_with_gradients()
    before = [p.grad.clone() for p in parameters]
    fused = case != "optimiser not fused"
    optimizer = torch.optim.AdamW(parameters, fused=fused, foreach=None if fused else True)
    lightning = task(scaler=object() if case == "float16 scaler" else None)
    value = 0.0 if case == "no clipping asked" else 1.0
    clip_gradients(lightning, optimizer, value, "norm")
    assert lightning.lightning_clipped == (value, "norm")
    assert all(torch.equal(g, p.grad) for g, p in zip(before, parameters))
