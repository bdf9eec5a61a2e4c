"""End to end without Lightning: a small Bahdanau model learns to reverse sequences."""

from __future__ import annotations

import time

import pytest
import torch
import torch.nn.functional as F

from seqtasks.data.tokenizer import BOS_ID, EOS_ID, PAD_ID
from seqtasks.decoders import BahdanauDecoder
from seqtasks.encoders import RNNEncoder
from seqtasks.layers.memory import lengths_to_mask
from seqtasks.search import SearchSettings, beam_search, greedy

SYMBOLS = 10
VOCAB = 4 + SYMBOLS  # PAD, UNK, BOS, EOS, then the symbols


def reverse_task(n: int = 200, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(3, 8, (n,), generator=g)
    mask = lengths_to_mask(lengths)
    src = torch.randint(4, VOCAB, mask.shape, generator=g).masked_fill(~mask, PAD_ID)
    sequences = [src[i, : lengths[i]].tolist() for i in range(n)]
    targets = [list(reversed(s)) for s in sequences]
    width = int(lengths.max()) + 1
    tgt_in = torch.full((n, width), PAD_ID)
    tgt_out = torch.full((n, width), PAD_ID)
    for i, target in enumerate(targets):
        tgt_in[i, : len(target) + 1] = torch.tensor([BOS_ID] + target)
        tgt_out[i, : len(target) + 1] = torch.tensor(target + [EOS_ID])
    return src, mask, tgt_in, tgt_out, targets


@pytest.mark.slow
def test_bahdanau_learns_to_reverse():
    torch.manual_seed(0)
    src, mask, tgt_in, tgt_out, targets = reverse_task()
    encoder = RNNEncoder(VOCAB, embed_dim=32, hidden_size=32, dropout=0.0)
    decoder = BahdanauDecoder(
        VOCAB, encoder.out_dim, embed_dim=32, hidden_size=64, readout_dim=32, dropout=0.0
    )
    parameters = [*encoder.parameters(), *decoder.parameters()]
    optimizer = torch.optim.Adam(parameters, lr=0.01)
    start = time.perf_counter()
    batch = 50
    epochs = 0
    for _ in range(100):
        epochs += 1
        order = torch.randperm(len(src))
        total = 0.0
        for b in range(0, len(src), batch):
            rows = order[b : b + batch]
            logits = decoder(encoder(src[rows], mask[rows]), tgt_in[rows]).logits
            loss = F.cross_entropy(
                logits.flatten(0, 1), tgt_out[rows].flatten(), ignore_index=PAD_ID
            )
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(parameters, 1.0)
            optimizer.step()
            total += loss.item()
        if total / (len(src) // batch) < 0.003:  # well past 100% exact match, for margin
            break
    print(f"trained {epochs} epochs in {time.perf_counter() - start:.1f}s, loss {total:.4f}")

    encoder.eval(), decoder.eval()
    with torch.no_grad():
        memory = encoder(src, mask)
    limit = memory.lengths + 3
    for name, results in [
        ("greedy", greedy(decoder, memory, limit)),
        ("beam 3", beam_search(decoder, memory, SearchSettings(3), limit)),
    ]:
        outputs = [r[0].tokens for r in results]
        exact = sum(o == t for o, t in zip(outputs, targets, strict=True)) / len(targets)
        assert exact == 1.0, f"{name}: exact match {exact:.1%}"
        assert all(r[0].finished for r in results)
