"""Token-based bucketed batching: batches of about N tokens with little padding, DDP-aware."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset, Sampler


def _world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class Batches(Sequence[list[int]]):
    """Batches of example indices, stored as one index array cut at `bounds`: 8 bytes per
    example, where lists of Python ints cost about 48 (92 MiB for two million examples)."""

    def __init__(self, order: np.ndarray, bounds: np.ndarray):
        self.order, self.bounds = order, bounds  # (N,) indices; (batches + 1,) cuts

    def __len__(self) -> int:
        return len(self.bounds) - 1

    def __getitem__(self, k: int) -> list[int]:  # type: ignore[override]
        if not -len(self) <= k < len(self):
            raise IndexError(f"batch {k} of {len(self)}")
        k %= len(self)
        return self.order[self.bounds[k] : self.bounds[k + 1]].tolist()


class TokenBucketSampler(Sampler[list[int]]):
    """Yields lists of example indices whose padded size stays within `max_tokens`.

    Examples are sorted by length once, and cut greedily into batches so that
    (examples in batch) × (longest example) ≤ max_tokens: similar lengths travel together and
    padding stays small. The batches are fixed; only their order is shuffled, from
    `seed + epoch`, so every epoch has the same number of batches and is reproducible.

    Under DDP every rank takes every world-th batch; the list is first padded by repeating
    it from its start (as often as needed, even when there are fewer batches than ranks) so
    that all ranks get the same count: no rank waits for the others at the epoch's end.

    Since the order is a function of seed and epoch, `resume(epoch, batches_done)` is all it
    takes to continue an epoch where a killed run left it (see `BucketLoader`).

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
        self.skip = 0  # batches of `epoch` that the next pass leaves out (set by `resume`)
        self.batches = self._make_batches(lengths, max_tokens)

    @staticmethod
    def _make_batches(lengths: Sequence[int], max_tokens: int) -> Batches:
        """Sort by (length, index) and cut greedily: the next example joins the batch while
        (examples) × (its length) ≤ max_tokens; lengths ascend, so it is the longest. A batch
        that starts at length l holds at most max_tokens // l examples, so each cut looks at
        that window only, in numpy (two million examples take well under a second)."""
        length = np.asarray(lengths, dtype=np.int64)  # (N,)
        order = np.argsort(length, kind="stable")
        ascending = length[order]
        bounds = [0]
        while bounds[-1] < len(order):
            start = bounds[-1]
            first = int(ascending[start])
            window = ascending[start : start + (max_tokens // first if first else len(order))]
            fits = window * np.arange(1, len(window) + 1) <= max_tokens  # true on a prefix
            bounds.append(start + max(1, int(fits.sum())))
        return Batches(order, np.asarray(bounds, dtype=np.int64))

    @property
    def sampler(self) -> TokenBucketSampler:
        """Itself: Lightning calls `set_epoch` on a DataLoader's `batch_sampler.sampler`."""
        return self

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.skip = 0
        self.epoch = epoch

    def resume(self, epoch: int, batches_done: int) -> None:
        """Make the next pass the rest of `epoch`, after its first `batches_done` batches."""
        self.epoch, self.skip = epoch, batches_done

    def _rank_batches(self) -> np.ndarray:
        """The numbers of this rank's batches, in this epoch's order."""
        count = len(self.batches)
        numbers = np.arange(count)
        if self.shuffle:
            generator = torch.Generator().manual_seed(self.seed + self.epoch)
            numbers = torch.randperm(count, generator=generator).numpy()
        rank, world = _world()
        if world > 1 and count:
            # Pad by tiling: with fewer batches than ranks, slicing the list alone could not
            # reach a multiple of `world`, and ranks would get different counts (and hang).
            numbers = np.resize(numbers, -(-count // world) * world)[rank::world]
        return numbers

    def __iter__(self) -> Iterator[list[int]]:
        # A generator: the order is drawn at the first batch, since Lightning creates the
        # iterator before it calls `set_epoch`.
        skip, self.skip = self.skip, 0
        for number in self._rank_batches()[skip:]:
            yield self.batches[int(number)]

    def __len__(self) -> int:
        _, world = _world()
        return -(-len(self.batches) // world)


class BucketLoader(DataLoader):
    """A DataLoader over a `TokenBucketSampler` whose place in the epoch Lightning checkpoints.

    Lightning stores `state_dict()` of a training loader that has one, and on resuming calls
    `load_state_dict` before the first batch. The state is the epoch and the number of batches
    this loader has handed out in it, counted as they leave the loader, so batches that
    workers prefetched but training never saw are not skipped.
    """

    batch_sampler: TokenBucketSampler
    _position: tuple[int, int] = (0, 0)  # (epoch, batches handed out); DataLoader's __init__ kept

    def __iter__(self) -> Iterator[Any]:
        epoch, done = self.batch_sampler.epoch, self.batch_sampler.skip
        for batch in super().__iter__():
            done += 1
            self._position = (epoch, done)
            yield batch

    def state_dict(self) -> dict[str, int]:
        epoch, done = self._position
        return {"epoch": epoch, "batches_done": done}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.batch_sampler.resume(state["epoch"], state["batches_done"])
        self._position = (state["epoch"], state["batches_done"])


def bucketed_loader(
    dataset: Dataset,
    lengths: Sequence[int],
    max_tokens: int,
    train: bool,
    seed: int,
    collate_fn: Callable[[list[Any]], Any],
    num_workers: int,
    pin_memory: bool = False,
    prefetch_factor: int = 2,
) -> DataLoader:
    """A resumable DataLoader over token-bucketed batches: shuffled for training; twice the
    token budget for evaluation, which keeps no activations for a backward pass. Its own
    `generator` seeds the workers, so iterating it draws nothing from torch's global one (a
    resumed run then draws dropout masks exactly as the uninterrupted run did). `pin_memory`:
    batches in page-locked memory, for training on a GPU. Workers, if any, stay for the whole
    run and each prepares `prefetch_factor` batches ahead."""
    budget = max_tokens if train else 2 * max_tokens
    sampler = TokenBucketSampler(lengths, budget, shuffle=train, seed=seed)
    return BucketLoader(
        dataset,
        batch_sampler=sampler,
        collate_fn=collate_fn,
        num_workers=num_workers,
        persistent_workers=num_workers > 0,
        prefetch_factor=prefetch_factor if num_workers > 0 else None,
        pin_memory=pin_memory,
        generator=torch.Generator().manual_seed(seed),
    )
