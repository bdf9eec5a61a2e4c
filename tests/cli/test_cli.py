"""The `seqtasks` command in subprocesses: every shipped config runs, fit/test end to end."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from conftest import REPO, flickr8k_subset, prepare_ptb, subprocess_env, write_monolingual

from seqtasks.captioning.data import CaptionData, ShapesData
from seqtasks.cli.main import main
from seqtasks.parsing.data import ParsingData
from seqtasks.pretraining.data import MonolingualData
from seqtasks.translation.data import TranslationData
from seqtasks.translation.dates import DatesData
from seqtasks.translation.streaming.sharded_translation import ShardedTranslationData

CONFIGS = sorted((REPO / "configs").glob("**/*.yaml"))
SMALL_BATCHES = ["--data.init_args.max_tokens", "512"]  # the configs' models, smaller batches

pytestmark = pytest.mark.slow


def seqtasks(args: list[str], env: dict[str, str], cwd: Path, timeout: int = 240):
    return subprocess.run(
        [sys.executable, "-m", "seqtasks", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def data_class(config: Path) -> type:
    class_path = yaml.safe_load(config.read_text())["data"]["class_path"]
    module, _, name = class_path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def data_overrides(
    config: Path, multi30k_dir: Path, tmp_path: Path, ptb: Path | None = None
) -> list[str]:
    """Command-line overrides that point a config's data module at test data (`ptb`: the PTB
    sample already prepared, else prepared into `tmp_path`)."""
    cls = data_class(config)
    if issubclass(cls, DatesData):  # generates its own corpus into data_dir
        return [
            "--data.init_args.data_dir",
            str(tmp_path / "dates"),
            "--data.init_args.num_train",
            "1000",
            *SMALL_BATCHES,
        ]
    if issubclass(cls, ShardedTranslationData):  # shards of the test corpus, by data_prep
        shards = tmp_path / "shards"
        prepare = [sys.executable, str(REPO / "data_prep" / "shards.py"), "--source"]
        result = subprocess.run(
            [*prepare, str(multi30k_dir), "--out", str(shards)],
            capture_output=True,
            text=True,
            env=subprocess_env(),
            timeout=300,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        return [
            "--data.init_args.data_dir",
            str(multi30k_dir),
            "--data.init_args.shard_dir",
            str(shards),
            *SMALL_BATCHES,
        ]
    if issubclass(cls, TranslationData):
        return ["--data.init_args.data_dir", str(multi30k_dir), *SMALL_BATCHES]
    if issubclass(cls, ParsingData):
        ptb = ptb or prepare_ptb(tmp_path / "ptb")
        init = yaml.safe_load(config.read_text())["data"].get("init_args") or {}
        pieces = init.get("source_tokenizer") and str(multi30k_dir / "spm.en.model")
        tokenizer = [f"--data.init_args.source_tokenizer={pieces}"] if pieces else []
        return ["--data.init_args.data_dir", str(ptb), *tokenizer, *SMALL_BATCHES]
    if issubclass(cls, ShapesData):  # generates a small world into data_dir
        sizes = ["--data.init_args.counts", "{train: 8, val: 8, test: 8, holdout: 8}"]
        return ["--data.init_args.data_dir", str(tmp_path / "shapes"), *sizes]
    if issubclass(cls, CaptionData):  # the shared photos, with an untrained, uncached backbone
        return [
            "--data.init_args.source",
            str(flickr8k_subset()),
            "--data.init_args.feature_cache=null",
            "--data.init_args.batch_size=4",
            "--model.init_args.encoder.init_args.pretrained=false",
        ]
    if issubclass(cls, MonolingualData):  # text a line, read with the corpus' German tokeniser
        lines = (multi30k_dir / "train.de").read_text().splitlines()
        spm = (multi30k_dir / "spm.de.model").read_bytes()
        folder = write_monolingual(tmp_path / "monolingual", lines[:200], lines[200:240], spm)
        return ["--data.init_args.data_dir", str(folder), *SMALL_BATCHES]
    pytest.fail(f"{config}: test_cli.py does not know how to give data to {cls.__name__}")


def test_configs_are_found():
    names = {c.relative_to(REPO / "configs").as_posix() for c in CONFIGS}
    assert {
        "translation/rnn_bahdanau.yaml",
        "translation/rnn_luong.yaml",
        "translation/rnn_plain.yaml",
    } <= names


def test_every_config_that_keeps_a_best_checkpoint_says_which_at_the_end():
    """A fit ends with `FitSummary`'s lines (the best score and its checkpoint, the last
    scores): six translation configs once ended on their last validation line instead."""
    missing = []
    for config in CONFIGS:
        callbacks = (yaml.safe_load(config.read_text()).get("trainer") or {}).get("callbacks") or []
        paths = {c["class_path"] for c in callbacks if isinstance(c, dict)}
        if "lightning.pytorch.callbacks.ModelCheckpoint" in paths:
            if "seqtasks.training.callbacks.FitSummary" not in paths:
                missing.append(config.relative_to(REPO / "configs").as_posix())
    assert not missing, f"no FitSummary in {missing}"


@pytest.mark.parametrize(
    "config", CONFIGS, ids=lambda c: c.relative_to(REPO / "configs").as_posix()
)
def test_config_fast_dev_run(config, multi30k_dir, tmp_path, request, monkeypatch):
    """Every shipped config builds and takes a step; a GPU recipe takes it on the CPU here. In
    this process: the command line itself is tested in a child process elsewhere
    (`test_fit_then_test_end_to_end`), and importing Lightning again for each of ~25 configs
    would cost about 6 s each."""
    trainer = yaml.safe_load(config.read_text()).get("trainer", {})
    on_cpu = trainer.get("accelerator") == "gpu" and not torch.cuda.is_available()
    # weights to start from are tested where they are made (tests/parsing/test_pieces.py,
    # tests/tasks/test_self_critical.py): here the config's model starts afresh
    model = yaml.safe_load(config.read_text())["model"].get("init_args") or {}
    afresh = [f"--model.init_args.{k}=null" for k in ("pretrained_encoder", "pretrained_model")
              if model.get(k) is not None]  # fmt: skip
    ptb = (
        request.getfixturevalue("ptb_dir") if issubclass(data_class(config), ParsingData) else None
    )
    monkeypatch.chdir(tmp_path)
    main(
        [
            "fit",
            "--config",
            str(config),
            "--trainer.fast_dev_run",
            "1",
            "--trainer.default_root_dir",
            str(tmp_path / "run"),
            *data_overrides(config, multi30k_dir, tmp_path, ptb),
            *(["--trainer.accelerator", "cpu"] if on_cpu else []),
            *afresh,
        ]
    )


def test_unknown_key_is_an_error(multi30k_dir, tmp_path, child_env):
    config = REPO / "configs" / "translation" / "rnn_bahdanau.yaml"
    result = seqtasks(
        [
            "fit",
            "--config",
            str(config),
            "--model.init_args.bogus",
            "1",
            *data_overrides(config, multi30k_dir, tmp_path),
        ],
        child_env,
        tmp_path,
    )
    assert result.returncode != 0
    assert "bogus" in result.stderr
    assert not (tmp_path / "lightning_logs").exists()


def test_the_command_line_reaches_lightning_cli_as_its_own(tmp_path, child_env):
    """`seqtasks fit …` from a shell: LightningCLI reads sys.argv itself (given the same list
    as `args` too, it warns that both were given), and the Transformer settings reach YAML."""
    config = REPO / "configs" / "translation" / "transformer.yaml"
    option = "--model.init_args.decoder.init_args.self_attention"
    result = seqtasks(["fit", "--config", str(config), option, "linear", "--print_config"],
                      child_env, tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert "args parameter" not in result.stderr
    assert "self_attention: linear" in result.stdout


def test_fit_under_ddp_on_two_cpu_processes(multi30k_dir, tmp_path, child_env):
    """Token-bucketed batches shard across 2 gloo processes: no hang at the epoch end, the
    whole-split validation BLEU is gathered, and the checkpoints are written."""
    config = REPO / "configs" / "translation" / "rnn_bahdanau.yaml"
    root = tmp_path / "ddp"
    fit = seqtasks(
        [
            "fit",
            "--config",
            str(config),
            *data_overrides(config, multi30k_dir, tmp_path),
            "--trainer.accelerator",
            "cpu",
            "--trainer.devices",
            "2",
            "--trainer.strategy",
            "ddp",
            "--trainer.max_steps",
            "3",
            "--trainer.limit_val_batches",
            "3",
            "--trainer.default_root_dir",
            str(root),
        ],
        child_env,
        tmp_path,
    )
    assert fit.returncode == 0, fit.stderr[-4000:]
    assert list(root.glob("**/checkpoints/last.ckpt"))
    assert list(root.glob("**/checkpoints/epoch*-bleu*.ckpt")), "val/bleu was logged"
