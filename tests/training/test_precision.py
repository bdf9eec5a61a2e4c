"""Every recurrent part runs under CPU bfloat16 autocast (the apps' `--precision bf16` and
`--trainer.precision bf16-mixed`), forward and backward, on any CPU.

PyTorch's autocast path for the LSTM fails on CPUs without AVX-512 ("could not create a
primitive descriptor for the LSTM forward propagation primitive"); `seqtasks.layers.recurrent.recur`
runs it on bfloat16 tensors instead. These tests are the regression test for that crash on such
machines, and check on every machine that bfloat16 stays close to float32.
"""

from __future__ import annotations

import functools

import pytest
import torch

from seqtasks.decoders import (
    BahdanauDecoder,
    LuongDecoder,
    NoAttentionDecoder,
    ShowTellDecoder,
    SoftAttentionDecoder,
)
from seqtasks.encoders import RNNEncoder
from seqtasks.layers.memory import lengths_to_mask

VOCAB, B, S, T = 11, 3, 6, 5
LENGTHS = torch.tensor([6, 3, 1])

PARTS = {
    "encoder-lstm-2": functools.partial(RNNEncoder, VOCAB, 8, 8, num_layers=2, cell="lstm"),
    "encoder-gru": functools.partial(RNNEncoder, VOCAB, 8, 8, cell="gru"),
    "bahdanau-lstm": functools.partial(
        BahdanauDecoder, VOCAB, 16, embed_dim=8, hidden_size=8, cell="lstm"
    ),
    "luong-feeding": functools.partial(
        LuongDecoder, VOCAB, 16, embed_dim=8, hidden_size=8, num_layers=2
    ),
    "luong-no-feeding": functools.partial(
        LuongDecoder, VOCAB, 16, embed_dim=8, hidden_size=8, num_layers=2, input_feeding=False
    ),
    "no-attention-lstm": functools.partial(
        NoAttentionDecoder, VOCAB, 16, embed_dim=8, hidden_size=8, cell="lstm"
    ),
    "show-tell": functools.partial(ShowTellDecoder, VOCAB, 16, embed_dim=8, hidden_size=8),
    "soft-attention": functools.partial(
        SoftAttentionDecoder, VOCAB, 16, embed_dim=8, hidden_size=8
    ),
}


def run(name: str, bf16: bool) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The part's output on fixed inputs in training mode without dropout, and its gradients."""
    torch.manual_seed(0)
    encoder = RNNEncoder(VOCAB, 8, 8, cell="lstm", dropout=0.0)
    part = PARTS[name](dropout=0.0).train()
    src = torch.randint(4, VOCAB, (B, S), generator=torch.Generator().manual_seed(1))
    mask = lengths_to_mask(LENGTHS, S)
    tgt = torch.randint(4, VOCAB, (B, T), generator=torch.Generator().manual_seed(2))
    with torch.autocast("cpu", torch.bfloat16, enabled=bf16):
        if name.startswith("encoder"):
            out = part(src.masked_fill(~mask, 0), mask).states
        else:
            out = part(encoder(src, mask), tgt).logits
    out.float().square().mean().backward()
    return out.float(), [p.grad for p in part.parameters() if p.grad is not None]


@pytest.mark.parametrize("name", PARTS)
def test_recurrent_parts_run_under_cpu_bfloat16_autocast(name):
    reference, reference_grads = run(name, bf16=False)
    output, grads = run(name, bf16=True)
    assert len(grads) == len(reference_grads)
    torch.testing.assert_close(output, reference, atol=0.05, rtol=0.05)
    for grad, expected in zip(grads, reference_grads):
        assert torch.isfinite(grad).all()
        torch.testing.assert_close(grad.float(), expected, atol=0.05, rtol=0.1)
