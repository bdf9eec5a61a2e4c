"""TokenBucketSampler: token budgets, coverage, reproducible order, DDP sharding; padding to
a few lengths (`Padding`) and the loaders' worker settings."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from lightning.fabric.utilities.apply_func import move_data_to_device

import seqtasks.data.batching as batching
from seqtasks.captioning.data import CaptionBatch
from seqtasks.data.batch import Batch, Padding, pad, teacher_forcing
from seqtasks.data.batching import TokenBucketSampler
from seqtasks.data.tokenizer import BOS_ID, EOS_ID, PAD_ID
from seqtasks.parsing.data import ParsingData
from seqtasks.translation.data import TranslationData


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


def test_padding_rounds_to_the_multiple_or_the_first_bucket_that_holds():
    lengths = np.arange(1, 41)
    assert Padding().lengths(lengths).tolist() == lengths.tolist()
    assert [Padding(8).length(n) for n in (1, 8, 9, 16, 17, 40)] == [8, 8, 16, 16, 24, 40]
    buckets = Padding(8, (12, 20))
    assert [buckets.length(n) for n in (1, 12, 13, 20, 21, 33)] == [12, 12, 20, 20, 24, 40]
    for wrong in (dict(multiple=0), dict(buckets=(20, 12)), dict(buckets=(0, 8))):
        with pytest.raises(ValueError, match="pad_to_multiple|length_buckets"):
            Padding(**wrong)


def reference_pad(sequences: list[list[int]], length: int) -> torch.Tensor:
    """Padding row by row, as written before `pad` filled all rows at once."""
    out = torch.full((len(sequences), length), PAD_ID, dtype=torch.long)
    for row, ids in enumerate(sequences):
        out[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    return out


@pytest.mark.parametrize("padding", [Padding(), Padding(8), Padding(1, (5, 9))])
def test_pad_and_teacher_forcing_fill_every_row_in_one_go_as_row_by_row(padding):
    rng = random.Random(0)
    targets = [[rng.randint(4, 99) for _ in range(rng.randint(0, 11))] for _ in range(40)]
    targets[3] = [rng.randint(4, 99) for _ in range(12)]  # the longest: 13 with BOS or EOS
    width = padding.length(13)
    tgt_in, tgt_out = teacher_forcing(targets, padding)
    torch.testing.assert_close(tgt_in, reference_pad([[BOS_ID, *t] for t in targets], width))
    torch.testing.assert_close(tgt_out, reference_pad([[*t, EOS_ID] for t in targets], width))
    torch.testing.assert_close(pad(targets, padding), reference_pad(targets, padding.length(12)))


@pytest.mark.parametrize("padding", [dict(pad_to_multiple=8), dict(length_buckets=(12, 24))])
@pytest.mark.parametrize("task", ["translation", "parsing"])
def test_token_budget_counts_the_padded_lengths(task, padding, request):
    """Every training batch's padded tensors hold at most `max_tokens` positions (one example
    over it alone), however far the lengths are rounded up."""
    if task == "translation":
        folder, budget = request.getfixturevalue("toy_data_dir"), 200
        data = TranslationData(str(folder), max_tokens=budget, **padding)
    else:
        folder, budget = request.getfixturevalue("ptb_dir"), 2000
        data = ParsingData(str(folder), test_split="dev", max_tokens=budget, **padding)
    data.setup("fit")
    lengths = set()
    for batch in data.train_dataloader():
        rows, longest = len(batch), max(batch.src.size(1), batch.tgt_in.size(1))
        assert rows * longest <= budget or rows == 1, (rows, longest)
        lengths |= {batch.src.size(1), batch.tgt_in.size(1)}
    if "pad_to_multiple" in padding:
        assert all(n % 8 == 0 for n in lengths), lengths
    else:
        assert all(n in (12, 24) or n > 24 for n in lengths), lengths


def test_loader_workers_prefetch_and_stay(toy_data_dir):
    data = TranslationData(str(toy_data_dir), num_workers=2, prefetch_factor=6)
    data.setup("fit")
    loader = data.train_dataloader()
    assert (loader.num_workers, loader.prefetch_factor, loader.persistent_workers) == (2, 6, True)
    plain = TranslationData(str(toy_data_dir))
    plain.setup("fit")
    loader = plain.train_dataloader()
    assert (loader.num_workers, loader.prefetch_factor, loader.persistent_workers) == (
        0,
        None,
        False,
    )


def test_batches_move_their_tensors_and_share_their_texts():
    """Lightning moves a batch through its `to()` (`moved`) instead of walking its lists and
    dataclasses: the tensors reach the device, the texts, references and scenes are the same
    objects (a walk would rebuild every list, 64 ms a 512-image captioning batch)."""
    tokens = torch.tensor([[5, 6, EOS_ID], [7, EOS_ID, PAD_ID]])
    batch = Batch(
        tokens, tokens != PAD_ID, tokens, tokens, torch.arange(2), ["a b", "c"], ["x", "y"]
    )
    images = torch.rand(2, 3, 4, 4)
    captions = CaptionBatch(
        images, None, tokens, tokens, torch.arange(2), [["a b"], ["c"]], [None, None]
    )
    for original in (batch, captions):
        there = move_data_to_device(original, torch.device("meta"))
        assert type(there) is type(original)
        for name, value in vars(original).items():
            if isinstance(value, torch.Tensor):
                assert getattr(there, name).device.type == "meta", name
                assert getattr(there, name).shape == value.shape, name
            else:
                assert getattr(there, name) is value, name
