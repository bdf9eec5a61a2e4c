"""TokenBucketSampler: token budgets, coverage, reproducible order, DDP sharding."""

from __future__ import annotations

import random

import pytest

import seqtasks.data.batching as batching
from seqtasks.data.batching import TokenBucketSampler


def random_lengths(n: int = 500, seed: int = 0, high: int = 60) -> list[int]:
    rng = random.Random(seed)
    return [rng.randint(1, high) for _ in range(n)]


@pytest.mark.parametrize("max_tokens", [50, 200, 1000])
def test_batches_respect_the_token_budget(max_tokens):
    lengths = random_lengths() + [max_tokens + 7, 3 * max_tokens]  # two over-long examples
    sampler = TokenBucketSampler(lengths, max_tokens, shuffle=True, seed=1)
    batches = list(sampler)
    for batch in batches:
        cost = len(batch) * max(lengths[i] for i in batch)
        if cost > max_tokens:
            assert len(batch) == 1, f"batch of {len(batch)} costs {cost} > {max_tokens}"
    for i in (len(lengths) - 2, len(lengths) - 1):
        assert [i] in batches, "an over-long example travels alone"


def test_batches_are_full_and_length_sorted():
    """Greedy cutting of the length-sorted list: adding the next example would break the budget."""
    lengths = random_lengths()
    max_tokens = 300
    sampler = TokenBucketSampler(lengths, max_tokens, shuffle=False)
    batches = list(sampler)
    longest = [max(lengths[i] for i in b) for b in batches]
    assert longest == sorted(longest), "unshuffled batches come in length order"
    for batch, following in zip(batches, batches[1:]):
        bigger = batch + following[:1]
        assert len(bigger) * max(lengths[i] for i in bigger) > max_tokens
    assert len(batches) < len(lengths) / 4, "batches should hold many short examples"


@pytest.mark.parametrize("shuffle", [True, False])
def test_every_index_exactly_once_per_epoch(shuffle):
    lengths = random_lengths(301)
    sampler = TokenBucketSampler(lengths, 256, shuffle=shuffle, seed=3)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        seen = sorted(i for batch in sampler for i in batch)
        assert seen == list(range(len(lengths)))
        assert len(sampler) == len(list(sampler))


def test_order_depends_on_seed_and_epoch_only():
    lengths = random_lengths()
    a = TokenBucketSampler(lengths, 200, shuffle=True, seed=5)
    b = TokenBucketSampler(lengths, 200, shuffle=True, seed=5)
    a.set_epoch(2)
    b.set_epoch(2)
    assert list(a) == list(b)
    assert list(a) == list(a), "iterating twice gives the same epoch"
    first = list(a)
    a.set_epoch(3)
    assert list(a) != first
    assert sorted(map(sorted, a)) == sorted(map(sorted, first)), "same batches, new order"
    c = TokenBucketSampler(lengths, 200, shuffle=True, seed=6)
    c.set_epoch(2)
    assert list(c) != first
    length = len(a)
    for epoch in range(5):
        a.set_epoch(epoch)
        assert len(a) == length == len(list(a))


def test_unshuffled_order_is_fixed():
    lengths = random_lengths()
    sampler = TokenBucketSampler(lengths, 200, shuffle=False, seed=5)
    first = list(sampler)
    sampler.set_epoch(4)
    assert list(sampler) == first


def test_invalid_budget():
    with pytest.raises(ValueError, match="max_tokens"):
        TokenBucketSampler([1, 2, 3], 0, shuffle=False)


DDP_CASES = {
    "odd": ([8] * 24, 3),  # 64 tokens = 8 examples a batch: 3 batches, one repeated
    "even": ([8] * 32, 4),
    "single": ([8] * 5, 1),  # rank 1 repeats rank 0's only batch
    "random": (random_lengths(301, seed=4), None),
}


@pytest.mark.parametrize("case", DDP_CASES)
def test_ddp_ranks_get_equal_counts_and_cover_everything(monkeypatch, case):
    lengths, expected = DDP_CASES[case]
    unsharded = len(TokenBucketSampler(lengths, 64, shuffle=True).batches)
    if expected is not None:
        assert unsharded == expected
    per_rank = {}
    for rank in (0, 1):
        monkeypatch.setattr(batching, "_world", lambda rank=rank: (rank, 2))
        sampler = TokenBucketSampler(lengths, 64, shuffle=True, seed=9)
        sampler.set_epoch(1)
        per_rank[rank] = list(sampler)
        assert len(sampler) == len(per_rank[rank])
    assert len(per_rank[0]) == len(per_rank[1]) == -(-unsharded // 2)
    covered = {i for batches in per_rank.values() for batch in batches for i in batch}
    assert covered == set(range(len(lengths)))
    # Ranks share no batch except the repeats that pad the count.
    shared = {tuple(b) for b in per_rank[0]} & {tuple(b) for b in per_rank[1]}
    assert len(shared) == unsharded % 2


def test_ddp_padding_by_tiling_for_every_world_and_batch_count(monkeypatch):
    """World sizes 1–9 against 0–20 batches (one example each): every rank gets
    ceil(batches / world) batches, as `len` says, and together they hold every batch; a batch
    is repeated only to pad, and no more often than the tiling needs."""
    for count in range(21):
        lengths = [5] * count  # max_tokens 5: one example a batch
        for world in range(1, 10):
            per_rank = []
            for rank in range(world):
                monkeypatch.setattr(batching, "_world", lambda r=rank, w=world: (r, w))
                sampler = TokenBucketSampler(lengths, 5, shuffle=True, seed=2)
                sampler.set_epoch(3)
                batches = list(sampler)
                assert len(batches) == len(sampler) == -(-count // world), (count, world, rank)
                per_rank.append(batches)
            drawn = [i for batches in per_rank for batch in batches for i in batch]
            assert set(drawn) == set(range(count)), (count, world)
            padded = -(-count // world) * world if count else 0
            assert len(drawn) == padded
            if count:
                assert max(drawn.count(i) for i in range(count)) <= -(-padded // count)
