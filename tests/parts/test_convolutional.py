"""The convolutional text encoder (`ConvS2SEncoder`) against its equations written out one
position at a time in float64: c_i = f(wᵀ x_{i−(h−1)/2 … i+(h−1)/2} + b) over zero-padded
sequences, the gated linear unit A ⊗ σ(B), the residual scaled by √0.5, positions added; and
what the contract asks: padding neither read nor written, the summary pooled over real positions."""

from __future__ import annotations

import math

import pytest
import torch

from seqtasks.encoders import ConvS2SEncoder


def reference(encoder: ConvS2SEncoder, ids: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """(S, D) annotations and (D,) summary of one unpadded sequence, position by position."""
    double = {name: p.detach().double() for name, p in encoder.named_parameters()}
    e = [double["embedding.weight"][t] + double["positions.weight"][i] for i, t in enumerate(ids)]
    x = [double["into.weight"] @ v + double["into.bias"] for v in e]  # C each
    for n, layer in enumerate(encoder.layers):
        weight, bias = double[f"layers.{n}.conv.weight"], double[f"layers.{n}.conv.bias"]
        width = weight.size(2)
        out = []
        for i in range(len(ids)):
            total = bias.clone()
            for k in range(width):
                j = i + k - width // 2  # the filter's k-th tap reads position j
                if 0 <= j < len(ids):  # beyond either end: the zero padding
                    total += weight[:, :, k] @ x[j]
            if layer.glu:
                a, b = total.chunk(2)
                h = a * torch.sigmoid(b)
            else:
                h = torch.tanh(total)
            out.append((h + x[i]) * math.sqrt(0.5) if layer.residual else h)
        x = out
    states = torch.stack([double["out.weight"] @ v + double["out.bias"] for v in x])
    summary = states.mean(0) if encoder.pooling == "mean" else states.amax(0)
    return states, summary


@pytest.mark.parametrize(
    "settings",
    [
        {"kernel_widths": [3, 5, 1]},
        {"kernel_widths": [3], "glu": False, "residual": False, "pooling": "max"},  # the deck's
        {"kernel_widths": [5, 3], "out_dim": 6},
    ],
    ids=["convs2s", "one-layer-tanh-max-pooled", "out-dim"],
)
def test_annotations_and_summary_match_the_equations_and_ignore_padding(settings):
    torch.manual_seed(0)
    encoder = ConvS2SEncoder(30, embed_dim=8, hidden_size=6, dropout=0.0, **settings).eval()
    sequences = [[5, 9, 4, 22, 7, 13, 2], [11, 3], [8, 8, 19, 4]]
    longest = max(map(len, sequences))
    ids = torch.tensor([s + [0] * (longest - len(s)) for s in sequences])
    mask = ids != 0
    memory = encoder(ids, mask)
    for row, sequence in enumerate(sequences):
        states, summary = reference(encoder, sequence)
        n = len(sequence)
        torch.testing.assert_close(memory.states[row, :n].double(), states, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(memory.summary[row].double(), summary, atol=1e-5, rtol=1e-5)
        assert memory.states[row, n:].abs().sum() == 0  # padding written as zeros
        alone = encoder(ids[row : row + 1, :n], mask[row : row + 1, :n])  # no padding at all
        torch.testing.assert_close(alone.states[0], memory.states[row, :n])


def test_its_settings_are_refused_by_name():
    with pytest.raises(ValueError, match="kernel widths must be odd and positive, got 4"):
        ConvS2SEncoder(10, kernel_widths=[3, 4])
    with pytest.raises(ValueError, match="kernel_widths must name at least one layer"):
        ConvS2SEncoder(10, kernel_widths=[])
    with pytest.raises(ValueError, match="pooling must be 'mean' or 'max', got 'sum'"):
        ConvS2SEncoder(10, pooling="sum")  # type: ignore[arg-type]


def test_an_empty_source_has_a_zero_summary_under_max_pooling():
    encoder = ConvS2SEncoder(10, embed_dim=4, hidden_size=4, pooling="max", dropout=0.0)
    ids = torch.tensor([[3, 4], [0, 0]])
    memory = encoder(ids, ids != 0)
    assert torch.isfinite(memory.summary).all() and memory.summary[1].abs().sum() == 0
