"""Distributed training on CPU with the gloo backend, through the real CLI: validation under DDP
scores the whole split exactly as one process does, for every task; two single-process "nodes"
on the loopback interface train and save; token-bucketed batches shard evenly across ranks,
differ by rank and follow the seed, epoch by epoch."""

from __future__ import annotations

import csv
import json
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import lightning as L
import pytest
import torch
from conftest import REPO, with_test_folders
from test_cli import seqtasks
from torch import nn

import seqtasks.data.batching as batching
from seqtasks.cli.main import main
from seqtasks.data.batching import TokenBucketSampler, bucketed_loader
from seqtasks.translation.data import TranslationData

DDP = ["--trainer.accelerator", "cpu", "--trainer.devices", "2", "--trainer.strategy", "ddp"]


class EpochRecorder(L.LightningModule):
    """Keeps the batches it is given, per epoch; learns nothing."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(1))
        self.seen: dict[int, list[list[int]]] = {}

    def training_step(self, batch: torch.Tensor, batch_idx: int) -> torch.Tensor:
        self.seen.setdefault(self.current_epoch, []).append(batch.tolist())
        return self.weight.sum() * 0

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def test_lightning_reshuffles_the_buckets_every_epoch():
    """Lightning sets the epoch on `batch_sampler.sampler` after creating the iterator; the
    bucket order must follow it, or every epoch repeats the first one."""
    lengths = [1 + i % 7 for i in range(40)]
    loader = bucketed_loader(list(range(40)), lengths, 12, True, 3, torch.tensor, 0)
    model = EpochRecorder()
    trainer = L.Trainer(
        max_epochs=3,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model, loader)
    sampler = TokenBucketSampler(lengths, 12, shuffle=True, seed=3)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        assert model.seen[epoch] == list(sampler), f"epoch {epoch} is not seed + epoch's order"
    assert model.seen[0] != model.seen[1] != model.seen[2]


# ---- validation under DDP equals one process, on the same checkpoint ---------------------------
def translation_case(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, list[str]]:
    """200 Multi30k pairs; 20 validation sentences in several batches of 128 tokens."""
    data = request.getfixturevalue("toy_data_dir")
    config = REPO / "configs" / "translation" / "rnn_bahdanau.yaml"
    return config, ["--data.init_args.data_dir", str(data), "--data.init_args.max_tokens", "64"]


def parsing_case(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, list[str]]:
    """200 training trees of the WSJ sample and its first 15 dev trees, 512 tokens a batch in
    validation; the config's model, 64 units wide."""
    ptb, small = request.getfixturevalue("ptb_dir"), tmp_path / "ptb"
    small.mkdir()
    for split, count in (("train", 200), ("dev", 15)):
        trees = (ptb / f"{split}.mrg").read_text(encoding="utf-8").splitlines()[:count]
        (small / f"{split}.mrg").write_text("\n".join(trees) + "\n", encoding="utf-8")
    config = REPO / "configs" / "parsing" / "lstm_attention.yaml"
    return config, [
        "--data.init_args.data_dir",
        str(small),
        "--data.init_args.max_tokens=256",
        "--model.init_args.encoder.init_args.hidden_size=64",
        "--model.init_args.decoder.init_args.hidden_size=64",
    ]


def captioning_case(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, list[str]]:
    """A shapes world of 16 training and 9 validation images (one rank gets a repeat), 4 a
    batch: the ranks' batches differ from one process's."""
    sizes = {"train": 16, "val": 9, "test": 2, "holdout": 2}
    config = REPO / "configs" / "captioning" / "shapes_soft.yaml"
    return config, [
        "--data.init_args.data_dir",
        str(tmp_path / "shapes"),
        "--data.init_args.batch_size=4",
        *(f"--data.init_args.counts.{split}={n}" for split, n in sizes.items()),
    ]


CASES: dict[str, tuple[Callable, str, set[str]]] = {
    # task: (data, the main score, the whole-split scores validation must log)
    "translation": (translation_case, "val/chrf", {"val/bleu", "val/chrf", "val/loss"}),
    "parsing": (parsing_case, "val/f1", {"val/f1", "val/tagging_accuracy", "val/loss"}),
    "captioning": (captioning_case, "val/bleu1", {"val/cider", "val/exact_match", "val/loss"}),
}


def csv_logger(folder: Path) -> list[str]:
    return [
        "--trainer.logger=lightning.pytorch.loggers.CSVLogger",
        f"--trainer.logger.init_args.save_dir={folder}",
    ]


def logged(folder: Path) -> dict[str, float]:
    """Every metric a CSVLogger wrote under `folder` (the last value of each)."""
    (path,) = folder.glob("**/metrics.csv")
    metrics: dict[str, float] = {}
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            metrics.update({key: float(value) for key, value in row.items() if value})
    return metrics


@pytest.mark.slow
@pytest.mark.parametrize("task", CASES)
def test_ddp_validation_equals_one_process(task, request, tmp_path, child_env):
    """`seqtasks validate` on 2 gloo processes gives every whole-split score of 1 process,
    to the last bit. The checkpoint comes from a few training steps in this process, so its
    outputs are neither empty nor all alike."""
    case, main_score, scores = CASES[task]
    config, data = case(request, tmp_path)
    common = ["--config", str(config), *data, "--trainer.enable_progress_bar=false"]
    fit = ["fit", *common, "--trainer.max_steps=20", *csv_logger(tmp_path / "fit")]
    main([*fit, "--trainer.default_root_dir", str(tmp_path / "fit")])
    (checkpoint,) = (tmp_path / "fit").glob("**/checkpoints/last.ckpt")

    validate = ["validate", *common, "--ckpt_path", str(checkpoint)]
    main([*validate, *csv_logger(tmp_path / "one")])
    result = seqtasks([*validate, *DDP, *csv_logger(tmp_path / "two")], child_env, tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]

    one, two = logged(tmp_path / "one"), logged(tmp_path / "two")
    assert scores <= one.keys(), f"validation logged {sorted(one)}"
    assert one[main_score] > 0, f"the checkpoint's outputs are degenerate: {one}"
    whole_split = {key for key in one if key.startswith("val/") and key != "val/loss"}
    assert {key: two.get(key) for key in whole_split} == {key: one[key] for key in whole_split}
    # val/loss sums per-example losses, each example once: the ranks' batches hold other
    # neighbours, so only the last bits of the sum may differ.
    assert two["val/loss"] == pytest.approx(one["val/loss"], rel=1e-6)


# ---- two single-process nodes on the loopback interface ------------------------------------------
def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_nodes(args: list[str], env: dict[str, str], cwd: Path, timeout: float) -> list[str]:
    """Start one `seqtasks` process per node (NODE_RANK 0, 1) and wait for both; returns
    their logs. A node that has not finished within `timeout` seconds fails the test."""
    logs = [cwd / f"node{rank}.log" for rank in (0, 1)]
    nodes = []
    try:
        for rank, log in enumerate(logs):
            with log.open("w") as out:
                nodes.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "seqtasks", *args],
                        cwd=cwd,
                        env={**env, "NODE_RANK": str(rank)},
                        stdout=out,
                        stderr=subprocess.STDOUT,
                    )
                )
        for rank, node in enumerate(nodes):
            try:
                node.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pytest.fail(f"node {rank} hangs: {logs[rank].read_text()[-3000:]}")
    finally:
        for node in nodes:
            if node.poll() is None:
                node.kill()
                node.wait()
    texts = [log.read_text() for log in logs]
    for rank, (node, text) in enumerate(zip(nodes, texts)):
        assert node.returncode == 0, f"node {rank} failed:\n{text[-4000:]}"
    return texts


@pytest.mark.slow
def test_two_nodes_on_loopback_shard_the_buckets(toy_data_dir, tmp_path, child_env, monkeypatch):
    """`--trainer.num_nodes 2 --trainer.devices 1`, MASTER_ADDR=127.0.0.1, NODE_RANK 0 and 1
    (what Lightning's default cluster environment reads): two epochs train without a hang and
    rank 0 writes the checkpoint. Every rank gets the same number of batches each epoch,
    their shards differ and cover the split, and each epoch's order is the one that the data
    seed and the epoch give."""
    config = REPO / "configs" / "translation" / "rnn_bahdanau.yaml"
    max_tokens = 512
    args = [
        "fit",
        "--config",
        str(config),
        "--data.init_args.data_dir",
        str(toy_data_dir),
        f"--data.init_args.max_tokens={max_tokens}",
        "--trainer.max_epochs=2",
        "--trainer.limit_val_batches=1",
        "--trainer.enable_progress_bar=false",
        "--trainer.accelerator=cpu",
        "--trainer.strategy=ddp",
        "--trainer.num_nodes=2",
        "--trainer.devices=1",
        "--trainer.default_root_dir=run",
        "--trainer.callbacks+=batch_log.BatchLog",
        f"--trainer.callbacks.folder={tmp_path / 'batches'}",
    ]
    env = {
        **with_test_folders(child_env),  # tests/batch_log.py
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
    }
    run_nodes(args, env, tmp_path, timeout=300)

    ranks = [json.loads((tmp_path / "batches" / f"rank{r}.json").read_text()) for r in (0, 1)]
    data = TranslationData(data_dir=str(toy_data_dir), max_tokens=max_tokens)
    data.setup("fit")
    lengths = data.datasets["fit"].lengths()
    unsharded = len(TokenBucketSampler(lengths, max_tokens, shuffle=True).batches)
    for epoch in ("0", "1"):
        first, second = ranks[0][epoch], ranks[1][epoch]
        assert len(first) == len(second) == -(-unsharded // 2), f"epoch {epoch}"
        assert first != second
        covered = {i for batch in first + second for i in batch}
        assert covered == set(range(len(lengths))), f"epoch {epoch} misses examples"
        for rank, batches in enumerate((first, second)):
            monkeypatch.setattr(batching, "_world", lambda rank=rank: (rank, 2))
            expected = TokenBucketSampler(lengths, max_tokens, shuffle=True, seed=data.seed)
            expected.set_epoch(int(epoch))
            assert batches == list(expected), f"rank {rank}, epoch {epoch}: not the seed's order"
    assert ranks[0]["0"] != ranks[0]["1"], "the second epoch repeats the first one's order"

    # Rank 0 logged both epochs' validation and wrote the checkpoint at an epoch's end.
    (version,) = (tmp_path / "run").glob("**/version_0")
    with (version / "metrics.csv").open(newline="") as f:
        validated = [row["epoch"] for row in csv.DictReader(f) if row["val/bleu"]]
    assert validated == ["0", "1"]
    checkpoint = torch.load(version / "checkpoints" / "last.ckpt", weights_only=False)
    assert checkpoint["global_step"] in (len(ranks[0]["0"]), 2 * len(ranks[0]["0"]))


# ---- DDP on one process: the path a one-GPU machine can check ----------------------------------
@pytest.mark.slow
def test_ddp_on_one_process_trains_and_validates_as_one_device(toy_data_dir, tmp_path, child_env):
    """`--trainer.strategy ddp --trainer.devices 1` (a process group of one, gloo here, NCCL on
    a GPU) takes the same steps as the plain run: after 12 steps and a validation, the same
    weights to the last bit and the same validation scores. Dropout is off: Lightning re-seeds
    torch's generator when it starts the process group (`reset_seed`), after the model is
    built, so under DDP the masks are drawn from another point of the stream. The plain run is
    in this process, the DDP one a child; both on one thread, so they compute alike."""
    config = REPO / "configs" / "translation" / "rnn_bahdanau.yaml"
    common = [
        "fit",
        "--config",
        str(config),
        "--data.init_args.data_dir",
        str(toy_data_dir),
        "--data.init_args.max_tokens=64",
        "--trainer.max_steps=12",
        "--trainer.enable_progress_bar=false",
        "--trainer.accelerator=cpu",
        "--model.init_args.encoder.init_args.dropout=0",
        "--model.init_args.decoder.init_args.dropout=0",
    ]
    runs = {}
    for name, extra in (("plain", []), ("ddp", ["--trainer.strategy=ddp", "--trainer.devices=1"])):
        folder = tmp_path / name
        args = [*common, *extra, "--trainer.default_root_dir", str(folder), *csv_logger(folder)]
        if extra:  # a process group is the child's, not this test process's
            result = seqtasks(args, child_env, tmp_path)
            assert result.returncode == 0, result.stderr[-4000:]
        else:
            main(args)
        (checkpoint,) = folder.glob("**/checkpoints/last.ckpt")
        weights = torch.load(checkpoint, map_location="cpu", weights_only=False)["state_dict"]
        runs[name] = weights, logged(folder)
    (plain, plain_scores), (ddp, ddp_scores) = runs["plain"], runs["ddp"]
    assert plain.keys() == ddp.keys()
    assert all(torch.equal(plain[key], ddp[key]) for key in plain), "DDP took other steps"
    val = {key for key in plain_scores if key.startswith("val/")}
    assert val and {key: ddp_scores.get(key) for key in val} == {k: plain_scores[k] for k in val}
