"""Token-based bucketed batching: batches of about N tokens with little padding, DDP-aware."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset, Sampler


def _world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class TokenBucketSampler(Sampler[list[int]]):
    """Yields lists of example indices whose padded size stays within `max_tokens`.

    Examples are sorted by length once, and cut greedily into batches so that
    (examples in batch) × (longest example) ≤ max_tokens: similar lengths travel together and
    padding stays small. The batches are fixed; only their order is shuffled, from
    `seed + epoch`, so every epoch has the same number of batches and is reproducible.

    Under DDP every rank takes every world-th batch; the list is first padded by repeating
    batches from its start so that all ranks get the same count (no rank waits at epoch end).

    Args:
        lengths: per example, the length that costs memory (max of source and target tokens).
        max_tokens: budget of padded tokens per batch; an example longer than that gets a
            batch of its own.
        shuffle: shuffle the batch order every epoch (training) or keep it (evaluation).
        seed: base of the shuffling seed; Lightning calls `set_epoch` before each epoch.
    """

    def __init__(self, lengths: Sequence[int], max_tokens: int, shuffle: bool, seed: int = 0):
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be positive, got {max_tokens}")
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.batches = self._make_batches(lengths, max_tokens)

    @staticmethod
    def _make_batches(lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
        order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
        batches: list[list[int]] = []
        current: list[int] = []
        longest = 0
        for i in order:
            longest_if_added = max(longest, lengths[i])
            if current and longest_if_added * (len(current) + 1) > max_tokens:
                batches.append(current)
                current, longest_if_added = [], lengths[i]
            current.append(i)
            longest = longest_if_added
        if current:
            batches.append(current)
        return batches

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _rank_batches(self) -> list[list[int]]:
        batches = self.batches
        if self.shuffle:
            generator = torch.Generator().manual_seed(self.seed + self.epoch)
            batches = [batches[i] for i in torch.randperm(len(batches), generator=generator)]
        rank, world = _world()
        if world > 1:
            padded = -len(batches) % world
            batches = batches + batches[:padded]
            batches = batches[rank::world]
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self._rank_batches())

    def __len__(self) -> int:
        _, world = _world()
        return -(-len(self.batches) // world)


def bucketed_loader(
    dataset: Dataset,
    lengths: Sequence[int],
    max_tokens: int,
    train: bool,
    seed: int,
    collate_fn: Callable[[list[Any]], Any],
    num_workers: int,
) -> DataLoader:
    """A DataLoader over token-bucketed batches: shuffled for training; twice the token budget
    for evaluation, which keeps no activations for a backward pass."""
    budget = max_tokens if train else 2 * max_tokens
    sampler = TokenBucketSampler(lengths, budget, shuffle=train, seed=seed)
    return DataLoader(
        dataset,
        batch_sampler=sampler,
        collate_fn=collate_fn,
        num_workers=num_workers,
        persistent_workers=num_workers > 0,
    )
