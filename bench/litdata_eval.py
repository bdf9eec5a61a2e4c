"""Can litdata carry seqtasks' token-bucket batching? (evaluation experiment)

    python3 -m venv /tmp/litdata && /tmp/litdata/bin/pip install torch==2.14.1 litdata numpy
    OMP_WAIT_POLICY=PASSIVE /tmp/litdata/bin/python bench/litdata_eval.py [--fresh]

(its own environment: litdata is not a seqtasks dependency; docs/streaming.md has the results)

Data: 20,000 synthetic sequences, lengths uniform in 5..80, tokens (i + arange(L)) % 32000, so a
read-back can be checked against its id. Budget 4096 padded tokens, 2 simulated DDP ranks
(litdata reads WORLD_SIZE / GLOBAL_RANK from the environment: litdata/utilities/env.py).

Designs tried:
  A  "pre-bucketed": the global sort-and-cut of TokenBucketSampler is done once, at optimize time;
     each litdata item is one whole batch. StreamingDataset(shuffle=True) + StreamingDataLoader
     (batch_size=1, collate unwraps it). litdata then shuffles/shards/resumes *batches*.
  B  "pool-bucketed": one item per sequence; StreamingDataLoader(batch_size=POOL) hands a
     fixed-size pool of shuffled items to a collate_fn that sorts the pool and cuts it into
     token-budget batches (a list of batches per loader step).
  C  "map-style": litdata only as storage; StreamingDataset.__getitem__(int) behind a
     map-style Dataset, with a copy of seqtasks' TokenBucketSampler and a plain DataLoader.
  H  home-made reference: .npy token array + (N, 2) index read with os.pread per example
     (as seqtasks ArrayFile), TokenBucketSampler copy, plain DataLoader.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections import Counter

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("LITDATA_DISABLE_VERSION_CHECK", "1")

import litdata
import numpy as np
import torch
from litdata import StreamingDataLoader, StreamingDataset, optimize
from torch.utils.data import DataLoader, Dataset, Sampler

torch.set_num_threads(1)

ROOT = os.environ.get("LITDATA_EVAL_DIR", "/tmp/litdata_eval")  # datasets written here
N, MAX_TOKENS, SEED, WORLD, POOL = 20_000, 4096, 0, 2, 2048
ODD_BUDGET = 3900
LENGTHS = np.random.default_rng(0).integers(5, 81, N).astype(np.int64)  # (N,)


def tokens_of(i: int) -> np.ndarray:
    return ((np.arange(LENGTHS[i]) + i) % 32000).astype(np.int32)


# ---- a copy of seqtasks.data.batching.TokenBucketSampler (cut and rank split) ---------------
def make_batches(lengths: np.ndarray, max_tokens: int) -> list[np.ndarray]:
    order = np.argsort(lengths, kind="stable")
    ascending = lengths[order]
    bounds = [0]
    while bounds[-1] < len(order):
        start = bounds[-1]
        first = int(ascending[start])
        window = ascending[start : start + max_tokens // first]
        fits = window * np.arange(1, len(window) + 1) <= max_tokens
        bounds.append(start + max(1, int(fits.sum())))
    return [order[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


class TokenBucketSampler(Sampler):
    def __init__(self, batches, seed, rank, world):
        self.batches, self.seed, self.rank, self.world, self.epoch, self.skip = (
            batches,
            seed,
            rank,
            world,
            0,
            0,
        )

    def __iter__(self):
        count = len(self.batches)
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        numbers = torch.randperm(count, generator=g).numpy()
        numbers = np.resize(numbers, -(-count // self.world) * self.world)[self.rank :: self.world]
        skip, self.skip = self.skip, 0
        for k in numbers[skip:]:
            yield self.batches[int(k)].tolist()

    def __len__(self):
        return -(-len(self.batches) // self.world)


def waste(batches_lengths) -> float:
    """padded tokens / real tokens over a list of per-batch length arrays."""
    padded = sum(len(b) * int(b.max()) for b in batches_lengths)
    real = sum(int(b.sum()) for b in batches_lengths)
    return padded / real


# ---- writing ------------------------------------------------------------------------------------
def item_fn(i):  # design B/C: one sequence per item
    return {"id": int(i), "tokens": tokens_of(i)}


def batch_fn(ids):  # design A: one token-budget batch per item
    ids = np.asarray(ids, np.int64)
    return {
        "ids": ids,
        "lengths": LENGTHS[ids].astype(np.int32),
        "tokens": np.concatenate([tokens_of(int(i)) for i in ids]),
    }


def prepare(fresh: bool) -> dict:
    info = {}
    if fresh and os.path.exists(ROOT):
        shutil.rmtree(ROOT)
    os.makedirs(ROOT, exist_ok=True)
    if not os.path.exists(f"{ROOT}/items/index.json"):
        t = time.perf_counter()
        optimize(
            fn=item_fn,
            inputs=list(range(N)),
            output_dir=f"{ROOT}/items",
            chunk_size=1000,
            num_workers=1,
            verbose=False,
            mode="overwrite",
        )
        info["optimize_items_s"] = time.perf_counter() - t
        np.save(f"{ROOT}/items_lengths.npy", LENGTHS)  # sidecar the sampler needs (design C)
    batches = make_batches(LENGTHS, MAX_TOKENS)
    if not os.path.exists(f"{ROOT}/batches/index.json"):
        # written in a fixed random order so each chunk mixes lengths (see FINDINGS)
        perm = np.random.default_rng(SEED).permutation(len(batches))
        t = time.perf_counter()
        optimize(
            fn=batch_fn,
            inputs=[batches[k].tolist() for k in perm],
            output_dir=f"{ROOT}/batches",
            chunk_size=16,
            num_workers=1,
            verbose=False,
            mode="overwrite",
        )
        info["optimize_batches_s"] = time.perf_counter() - t
    odd = make_batches(LENGTHS, ODD_BUDGET)  # 221 batches: odd, so 2 ranks cannot split it
    if not os.path.exists(f"{ROOT}/batches_odd/index.json"):
        perm = np.random.default_rng(SEED).permutation(len(odd))
        optimize(
            fn=batch_fn,
            inputs=[odd[k].tolist() for k in perm],
            output_dir=f"{ROOT}/batches_odd",
            chunk_size=16,
            num_workers=1,
            verbose=False,
            mode="overwrite",
        )
    if not os.path.exists(f"{ROOT}/npy/index.npy"):  # home-made-style reference shard
        os.makedirs(f"{ROOT}/npy", exist_ok=True)
        np.save(
            f"{ROOT}/npy/tokens.npy",
            np.concatenate([tokens_of(i) for i in range(N)]).astype(np.uint16),
        )
        off = np.concatenate([[0], np.cumsum(LENGTHS)[:-1]])
        np.save(f"{ROOT}/npy/index.npy", np.stack([off, LENGTHS], 1).astype(np.int64))
    return info


# ---- design A ------------------------------------------------------------------------------------
def set_rank(rank: int, world: int) -> None:
    os.environ["WORLD_SIZE"], os.environ["GLOBAL_RANK"] = str(world), str(rank)


def unwrap_and_pad(items):
    """collate for design A: the single item is a whole batch; pad it to (n, longest)."""
    b = items[0]
    lengths = np.asarray(b["lengths"])
    out = torch.zeros(len(lengths), int(lengths.max()), dtype=torch.long)
    flat = torch.as_tensor(np.asarray(b["tokens"]), dtype=torch.long)
    start = 0
    for row, n in enumerate(lengths.tolist()):
        out[row, :n] = flat[start : start + n]
        start += n
    return {"ids": np.asarray(b["ids"]), "lengths": lengths, "tokens": out}


def loader_a(rank, world, workers, seed=SEED, name="batches"):
    set_rank(rank, world)
    ds = StreamingDataset(f"{ROOT}/{name}", shuffle=True, seed=seed, item_shuffle_window="full")
    return StreamingDataLoader(
        ds,
        batch_size=1,
        num_workers=workers,
        collate_fn=unwrap_and_pad,
        persistent_workers=workers > 0,
    )


def check_batch(b):
    for row, (i, n) in enumerate(zip(b["ids"].tolist(), b["lengths"].tolist())):
        assert int(b["tokens"][row, 0]) == i % 32000 and n == LENGTHS[i]


def run_epochs(make, epochs, ranks=range(WORLD), take=None):
    """{rank: [epoch -> list of batch id tuples]} with a fresh loader per rank."""
    out = {}
    for rank in ranks:
        dl = make(rank)
        out[rank] = []
        for _ in range(epochs):
            seq = []
            for _k, b in enumerate(dl):
                check_batch(b)
                seq.append(tuple(b["ids"].tolist()))
            out[rank].append(seq)
    return out


def coverage(seqs):
    c = Counter(i for s in seqs for b in s for i in b)
    missing = N - len(c)
    repeated = sum(1 for v in c.values() if v > 1)
    return missing, repeated


def resume_test(make, rank, epoch, k):
    """Iterate `epoch-1` full epochs and k batches of the next; save; resume on a new loader."""
    full = make(rank)
    for _ in range(epoch - 1):
        for _ in full:
            pass
    ref = [tuple(b["ids"].tolist()) for b in full]
    ref_next = [tuple(b["ids"].tolist()) for b in full]  # the epoch after
    dl = make(rank)
    for _ in range(epoch - 1):
        for _ in dl:
            pass
    it = iter(dl)
    head = [tuple(next(it)["ids"].tolist()) for _ in range(k)]
    state = dl.state_dict()
    del it
    dl2 = make(rank)
    dl2.load_state_dict(state)
    rest = [tuple(b["ids"].tolist()) for b in dl2]
    after = [tuple(b["ids"].tolist()) for b in dl2]
    return {
        "epoch": epoch,
        "k": k,
        "head_ok": head == ref[:k],
        "rest_equal": rest == ref[k:],
        "rest_len": len(rest),
        "expected_len": len(ref) - k,
        "next_epoch_equal": after == ref_next,
        "state_keys": sorted(state["dataset"].keys())[:6],
        "num_samples_yielded": state["num_samples_yielded"],
    }


def resume_cross(rank, k):
    """Save with num_workers=0 after k batches, resume with num_workers=1."""
    ref = [tuple(b["ids"].tolist()) for b in loader_a(rank, WORLD, 0)]
    dl = loader_a(rank, WORLD, 0)
    it = iter(dl)
    for _ in range(k):
        next(it)
    state = dl.state_dict()
    del it
    dl2 = loader_a(rank, WORLD, 1)
    dl2.load_state_dict(state)
    rest = [tuple(b["ids"].tolist()) for b in dl2]
    return {
        "rest_equal": rest == ref[k:],
        "rest_len": len(rest),
        "expected_len": len(ref) - k,
        "missing_from_rest": len(set(ref[k:]) - set(rest)),
        "extra": len(set(rest) - set(ref[k:])),
    }


def throughput(make_iterable, epochs=3):
    """batches/s and examples/s of each of `epochs` full passes of one loader (median reported),
    and the first batch's latency in the first pass (loader start-up)."""
    it = make_iterable()
    rates, first = [], None
    for _e in range(epochs):
        t0, nb, ne = time.perf_counter(), 0, 0
        for b in it:
            if first is None:
                first = time.perf_counter() - t0
            nb += 1
            ne += len(b["lengths"])
        dt = time.perf_counter() - t0
        rates.append((nb / dt, ne / dt))
    bps, eps = sorted(rates)[len(rates) // 2]
    return {
        "batches_per_s": round(bps, 1),
        "examples_per_s": round(eps),
        "batches": nb,
        "first_batch_s": round(first, 3),
    }


# ---- design B ------------------------------------------------------------------------------------
def bucket_pool(items):
    """collate for design B: sort a pool of items by length, cut into token-budget batches."""
    ids = np.array([it["id"] for it in items])
    lens = np.array([len(it["tokens"]) for it in items])
    cuts = make_batches(lens, MAX_TOKENS)
    return [{"ids": ids[c], "lengths": lens[c]} for c in cuts]


class Flatten:
    """Iterates the token-budget batches of a design-B loader (a list of batches per step)."""

    def __init__(self, loader):
        self.loader = loader

    def __iter__(self):
        for pool in self.loader:
            yield from pool


def loader_b(rank, world, workers, seed=SEED, pool=None):
    set_rank(rank, world)
    ds = StreamingDataset(f"{ROOT}/items", shuffle=True, seed=seed)
    return StreamingDataLoader(
        ds, batch_size=pool or POOL, num_workers=workers, collate_fn=bucket_pool
    )


# ---- design C and H (map-style + TokenBucketSampler copy) --------------------------------------
class LitMap(Dataset):
    batch_decode = 0

    def __init__(self):
        set_rank(0, 1)  # global indexing; the sampler does the rank split
        # batch_decode=0: decode only the asked item; the "auto" default (256 for text/arrays)
        # decodes a whole window per random access
        self.ds = StreamingDataset(f"{ROOT}/items", batch_decode=self.batch_decode)

    def __len__(self):
        return N

    def __getitem__(self, i):
        it = self.ds[i]
        return int(it["id"]), np.asarray(it["tokens"])


class LitMapAuto(LitMap):
    batch_decode = "auto"


class NpyPread(Dataset):
    def __init__(self):
        self.paths = [f"{ROOT}/npy/tokens.npy", f"{ROOT}/npy/index.npy"]
        self.offsets = []
        for p in self.paths:
            with open(p, "rb") as f:
                np.lib.format.read_magic(f)
                np.lib.format.read_array_header_1_0(f)
                self.offsets.append(f.tell())
        self.fds = None

    def __len__(self):
        return N

    def __getitem__(self, i):
        if self.fds is None:
            self.fds = [os.open(p, os.O_RDONLY) for p in self.paths]
        off, n = np.frombuffer(os.pread(self.fds[1], 16, self.offsets[1] + 16 * i), np.int64)
        tok = np.frombuffer(
            os.pread(self.fds[0], 2 * int(n), self.offsets[0] + 2 * int(off)), np.uint16
        )
        return i, tok


def pad_pairs(items):
    lengths = np.array([len(t) for _, t in items])
    out = torch.zeros(len(items), int(lengths.max()), dtype=torch.long)
    for row, (_, t) in enumerate(items):
        out[row, : len(t)] = torch.as_tensor(t.astype(np.int64))
    return {"ids": np.array([i for i, _ in items]), "lengths": lengths, "tokens": out}


def loader_map(ds_cls, rank, world, workers):
    sampler = TokenBucketSampler(make_batches(LENGTHS, MAX_TOKENS), SEED, rank, world)
    return DataLoader(
        ds_cls(),
        batch_sampler=sampler,
        num_workers=workers,
        collate_fn=pad_pairs,
        persistent_workers=workers > 0,
    )


# ---- main ----------------------------------------------------------------------------------------
def main():
    res = {
        "litdata": litdata.__version__,
        "torch": torch.__version__,
        "N": N,
        "max_tokens": MAX_TOKENS,
        "world": WORLD,
    }
    res["prepare"] = prepare("--fresh" in sys.argv)
    global_batches = make_batches(LENGTHS, MAX_TOKENS)
    res["global_sort_and_cut"] = {
        "batches": len(global_batches),
        "waste": round(waste([LENGTHS[b] for b in global_batches]), 4),
    }
    res["random_batches_of_same_count"] = {  # what no bucketing would cost, for scale
        "waste": round(
            waste(
                [
                    LENGTHS[b]
                    for b in np.array_split(
                        np.random.default_rng(1).permutation(N), len(global_batches)
                    )
                ]
            ),
            4,
        )
    }

    # A: counts, coverage, waste, determinism, epochs differ
    A = run_epochs(lambda r: loader_a(r, WORLD, 0), epochs=2)
    A2 = run_epochs(lambda r: loader_a(r, WORLD, 0), epochs=1)  # rebuilt: same epoch 1?
    A_w1 = run_epochs(lambda r: loader_a(r, WORLD, 1), epochs=1)
    ra = {}
    for e in range(2):
        seqs = [A[r][e] for r in range(WORLD)]
        ra[f"epoch{e + 1}"] = {
            "batches_per_rank": [len(s) for s in seqs],
            "missing_examples, repeated": coverage(seqs),
            "waste": round(waste([np.array([LENGTHS[i] for i in b]) for s in seqs for b in s]), 4),
            "max_padded_tokens": max(len(b) * max(LENGTHS[list(b)]) for s in seqs for b in s),
        }
    ra["same_order_when_rebuilt"] = all(A[r][0] == A2[r][0] for r in range(WORLD))
    ra["same_order_with_num_workers_1"] = all(A[r][0] == A_w1[r][0] for r in range(WORLD))
    ra["epoch2_differs_from_epoch1"] = all(A[r][0] != A[r][1] for r in range(WORLD))
    ra["ranks_disjoint"] = not (set(A[0][0]) & set(A[1][0]))
    # batch-order quality: how often do consecutive batches come from the same chunk?
    pos = {}  # batch tuple -> position it was written at
    perm = np.random.default_rng(SEED).permutation(len(global_batches))
    for p, k in enumerate(perm):
        pos[tuple(global_batches[k].tolist())] = p
    seq = A[0][0]
    same_chunk = np.mean([pos[a] // 16 == pos[b] // 16 for a, b in zip(seq, seq[1:])])
    ra["consecutive_batches_same_chunk"] = round(float(same_chunk), 3)
    ra["uniform_expectation_same_chunk"] = round(15 / (len(global_batches) - 1), 3)
    ra["resume"] = [
        resume_test(lambda r: loader_a(r, WORLD, 0), rank=1, epoch=1, k=37),
        resume_test(lambda r: loader_a(r, WORLD, 1), rank=0, epoch=1, k=37),
        resume_test(lambda r: loader_a(r, WORLD, 1), rank=1, epoch=2, k=50),
    ]
    ra["resume_w0_to_w1"] = resume_cross(rank=0, k=37)
    odd = run_epochs(lambda r: loader_a(r, WORLD, 0, name="batches_odd"), epochs=3)
    ra["odd_221_batches"] = [
        {
            "batches_per_rank": [len(odd[r][e]) for r in range(WORLD)],
            "missing_examples, repeated": coverage([odd[r][e] for r in range(WORLD)]),
        }
        for e in range(3)
    ]
    res["A_prebucketed"] = ra

    # B: pools
    rb = {}
    for _ in range(1):
        per_rank, seqs = [], []
        for r in range(WORLD):
            dl = loader_b(r, WORLD, 0)
            batches = [b for pool in dl for b in pool]
            per_rank.append(len(batches))
            seqs.append([tuple(b["ids"].tolist()) for b in batches])
            if r == 0:
                rb["pools_per_rank"] = len(dl)
        rb["token_batches_per_rank"] = per_rank
        rb["missing_examples, repeated"] = coverage(seqs)
        rb["waste"] = round(waste([np.array([LENGTHS[i] for i in b]) for s in seqs for b in s]), 4)
    # resume at pool granularity: num_samples_yielded counts POOL items per loader step
    full = [[tuple(b["ids"].tolist()) for b in pool] for pool in loader_b(0, WORLD, 0)]
    dl = loader_b(0, WORLD, 0)
    it = iter(dl)
    next(it), next(it)
    st = dl.state_dict()
    del it
    dl2 = loader_b(0, WORLD, 0)
    dl2.load_state_dict(st)
    rest = [[tuple(b["ids"].tolist()) for b in pool] for pool in dl2]
    rb["resume_after_2_pools_equal"] = rest == full[2:]
    rb["num_samples_yielded_after_2_pools"] = st["num_samples_yielded"]
    for pool in (1000, 4096):
        dls = [loader_b(r, WORLD, 0, pool=pool) for r in range(WORLD)]
        rb[f"pool{pool}_token_batches_per_rank_epochs1to4"] = [
            [sum(len(p) for p in dl) for dl in dls] for _ in range(4)
        ]
        rb[f"pool{pool}_pools_per_rank"] = len(dls[0])
    res["B_pool_bucketed"] = rb

    # C: map-style view over litdata (correctness of ids/tokens, same batches as H)
    c_batches = [tuple(b["ids"].tolist()) for b in loader_map(LitMap, 0, WORLD, 0)]
    h_batches = [tuple(b["ids"].tolist()) for b in loader_map(NpyPread, 0, WORLD, 0)]
    res["C_map_style"] = {
        "same_batches_as_H": c_batches == h_batches,
        "batches_rank0": len(c_batches),
    }

    # throughput (rank 0 of 2, second of two epochs), workers 0 and 1
    tp = {}
    for w in (0, 1):
        tp[f"A_prebucketed_w{w}"] = throughput(lambda w=w: loader_a(0, WORLD, w))
        tp[f"C_litdata_map_w{w}"] = throughput(lambda w=w: loader_map(LitMap, 0, WORLD, w))
        if w == 0:
            tp["C_litdata_map_batch_decode_auto_w0"] = throughput(
                lambda: loader_map(LitMapAuto, 0, WORLD, 0), epochs=1
            )
        tp[f"H_npy_pread_w{w}"] = throughput(lambda w=w: loader_map(NpyPread, 0, WORLD, w))
    tp["B_pool_w0"] = throughput(lambda: Flatten(loader_b(0, WORLD, 0)))
    res["throughput_rank0_of_2"] = tp
    res["cpu_seconds"] = round(time.process_time(), 1)
    print(json.dumps(res, indent=1, default=str))


if __name__ == "__main__":
    main()
