"""Surviving interruption: a run SIGKILLed and resumed with `--ckpt_path last` ends with the
weights and metrics of an uninterrupted run; checkpoints are written atomically, averaged by
apps/average_checkpoints.py, and never hold NaN weights."""

from __future__ import annotations

import functools
from pathlib import Path

import lightning as L
import pytest
import torch
import yaml
from conftest import REPO, load_script, relabel, with_test_folders
from test_cli import seqtasks
from torch import Tensor

from seqtasks.cli.main import SeqtasksCLI, main
from seqtasks.data.batching import bucketed_loader
from seqtasks.decoders import BahdanauDecoder
from seqtasks.encoders import RNNEncoder
from seqtasks.io.checkpoint_files import CheckpointError
from seqtasks.model_files.averaging import average_checkpoints
from seqtasks.model_files.sources import open_model
from seqtasks.tasks.load import load as seqtasks_load
from seqtasks.training.checkpoints import AtomicCheckpointIO
from seqtasks.translation.dates import DatesData
from seqtasks.translation.task import TranslationTask

DATES = REPO / "configs" / "translation" / "dates.yaml"


@pytest.fixture(scope="module")
def dates_config(tmp_path_factory) -> Path:
    """configs/translation/dates.yaml without its attention plots (a CPU second a validation)."""
    config = yaml.safe_load(DATES.read_text())
    callbacks = config["trainer"]["callbacks"]
    config["trainer"]["callbacks"] = [
        c for c in callbacks if "AttentionPlots" not in c["class_path"]
    ]
    path = tmp_path_factory.mktemp("config") / "dates.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def dates_run(config: Path, data_dir: Path, root: Path, *extra: str) -> list[str]:
    """`seqtasks fit` of the quick-start config on 120 generated pairs (6 batches an epoch),
    with dropout and a plateau schedule that halves the rate at every validation that does
    not improve, so that both the random state and the scheduler's state show in the weights."""
    return [
        "fit",
        "--config",
        str(config),
        f"--data.init_args.data_dir={data_dir}",
        "--data.init_args.num_train=120",
        "--data.init_args.max_tokens=512",
        "--model.init_args.encoder.init_args.dropout=0.3",
        "--model.init_args.decoder.init_args.dropout=0.3",
        "--model.init_args.lr_scheduler.class_path=torch.optim.lr_scheduler.ReduceLROnPlateau",
        "--model.init_args.lr_scheduler.init_args.mode=max",
        "--model.init_args.lr_scheduler.init_args.patience=0",
        "--trainer.limit_val_batches=1",
        f"--trainer.default_root_dir={root}",
        *extra,
    ]


def load(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)


def model_checkpoint_state(checkpoint: dict) -> dict:
    (state,) = [v for k, v in checkpoint["callbacks"].items() if k.startswith("ModelCheckpoint")]
    return state


# ---- the data position --------------------------------------------------------------------------


def loader(seed: int = 3):
    lengths = [1 + (7 * i) % 23 for i in range(200)]
    return bucketed_loader(list(range(200)), lengths, 60, True, seed, list, num_workers=0)


def test_loader_resumes_mid_epoch_where_it_stopped():
    whole = loader()
    whole.batch_sampler.set_epoch(2)
    expected = list(whole)
    assert len(expected) > 6

    killed = loader()
    killed.batch_sampler.set_epoch(2)
    seen = [batch for _, batch in zip(range(5), killed)]
    state = killed.state_dict()
    assert state == {"epoch": 2, "batches_done": 5}

    resumed = loader()  # a new process: Lightning loads the state, then sets the epoch
    resumed.load_state_dict(state)
    resumed.batch_sampler.set_epoch(2)
    assert seen + list(resumed) == expected
    assert resumed.state_dict() == {"epoch": 2, "batches_done": len(expected)}
    resumed.batch_sampler.set_epoch(3)  # the next epoch is whole again
    assert len(list(resumed)) == len(expected)


def test_state_saved_at_an_epoch_end_starts_the_next_epoch_whole():
    finished = loader()
    list(finished)
    resumed = loader()
    resumed.load_state_dict(finished.state_dict())
    resumed.batch_sampler.set_epoch(1)
    fresh = loader()
    fresh.batch_sampler.set_epoch(1)
    assert list(resumed) == list(fresh)


def test_iterating_draws_nothing_from_torchs_global_generator():
    """Otherwise the first batch after a resume would shift every later dropout mask."""
    before = torch.get_rng_state()
    list(loader())
    assert torch.equal(torch.get_rng_state(), before)


# ---- kill and resume ----------------------------------------------------------------------------


@pytest.mark.slow
def test_killed_twice_and_resumed_equals_the_uninterrupted_run(dates_config, tmp_path, child_env):
    """12 steps (2 epochs of 6) validating every 3. The interrupted run is SIGKILLed at step 4
    (last.ckpt from step 3, mid-epoch) and at step 7 (last.ckpt from step 6, the end of
    epoch 0), resumed each time with `--ckpt_path last`: its final weights, optimiser state,
    learning rate and validation scores equal the uninterrupted run's exactly. Every run is a
    fresh process, so nothing earlier tests left in this one can change the reference's
    numbers."""
    data = tmp_path / "dates"
    steps = ["--trainer.max_steps=12", "--trainer.val_check_interval=3"]
    env = with_test_folders(child_env)  # the callbacks in tests/faults.py
    whole = seqtasks(dates_run(dates_config, data, tmp_path / "whole", *steps), env, tmp_path)
    assert whole.returncode == 0, whole.stderr[-3000:]
    summary = [line for line in whole.stdout.splitlines() if line.startswith("last")]
    assert summary, "FitSummary printed no validation scores"
    (reference,) = (tmp_path / "whole").glob("**/checkpoints/last.ckpt")
    epoch = DatesData(str(data), num_train=120, max_tokens=512)
    epoch.setup("fit")
    assert len(epoch.train_dataloader()) == 6

    run = dates_run(dates_config, data, tmp_path / "killed", *steps)
    last = tmp_path / "killed" / "lightning_logs" / "version_0" / "checkpoints" / "last.ckpt"
    for step, (saved, resume) in {4: (3, []), 7: (6, ["--ckpt_path", "last"])}.items():
        kill = ["--trainer.callbacks+=faults.KillAtStep", f"--trainer.callbacks.step={step}"]
        result = seqtasks([*run, *kill, *resume], env, tmp_path)
        assert result.returncode == -9, result.stderr[-3000:]
        assert load(last)["global_step"] == saved, "last.ckpt is refreshed at every validation"
        if resume:
            assert f"Restoring states from the checkpoint path at {last}" in result.stderr

    final = seqtasks([*run, "--ckpt_path", "last"], env, tmp_path)
    assert final.returncode == 0, final.stderr[-3000:]
    assert f"Restoring states from the checkpoint path at {last}" in final.stderr
    assert [line for line in final.stdout.splitlines() if line.startswith("last")] == summary
    assert list((tmp_path / "killed").glob("**/last.ckpt")) == [last], "one checkpoint folder"

    ours, theirs = load(last), load(reference)
    assert ours["global_step"] == theirs["global_step"] == 12
    for name, tensor in theirs["state_dict"].items():
        assert torch.equal(ours["state_dict"][name], tensor), name
    assert ours["lr_schedulers"] == theirs["lr_schedulers"]
    for mine, other in zip(ours["optimizer_states"], theirs["optimizer_states"]):
        assert mine["param_groups"][0]["lr"] == other["param_groups"][0]["lr"] < 0.003
        for key, state in other["state"].items():
            assert all(torch.equal(mine["state"][key][k], v) for k, v in state.items()), key
    ours_best, theirs_best = model_checkpoint_state(ours), model_checkpoint_state(theirs)
    assert ours_best["best_model_score"] == theirs_best["best_model_score"]
    assert Path(ours_best["best_model_path"]).name == Path(theirs_best["best_model_path"]).name


# ---- atomic writes ------------------------------------------------------------------------------


class FailsToPickle:
    """Stands for a write that breaks off half-way (a full disk, a lost mount)."""

    def __reduce__(self):
        raise OSError("No space left on device")


def test_a_save_that_fails_half_way_leaves_the_old_checkpoint(tmp_path):
    io = AtomicCheckpointIO()
    path = tmp_path / "checkpoints" / "last.ckpt"
    io.save_checkpoint({"state_dict": {"w": torch.ones(3)}, "global_step": 1}, path)
    good = path.read_bytes()

    broken = {"state_dict": {"w": torch.zeros(100_000)}, "global_step": 2, "z": FailsToPickle()}
    with pytest.raises(OSError, match="No space left"):
        io.save_checkpoint(broken, path)
    assert path.read_bytes() == good
    assert [p.name for p in path.parent.iterdir()] == ["last.ckpt"], "no temporary file left"

    io.save_checkpoint({"state_dict": {"w": torch.full((3,), 2.0)}, "global_step": 3}, path)
    assert torch.equal(load(path)["state_dict"]["w"], torch.full((3,), 2.0))
    assert [p.name for p in path.parent.iterdir()] == ["last.ckpt"]


def test_the_cli_writes_checkpoints_atomically_unless_told_otherwise(tmp_path):
    args = ["--config", str(DATES), f"--data.init_args.data_dir={tmp_path / 'dates'}"]
    args += ["--data.init_args.num_train=50", f"--trainer.default_root_dir={tmp_path}"]
    cli = SeqtasksCLI(subclass_mode_model=True, subclass_mode_data=True, run=False, args=args)
    assert type(cli.trainer.strategy.checkpoint_io) is AtomicCheckpointIO

    own = "lightning.pytorch.plugins.io.TorchCheckpointIO"
    cli = SeqtasksCLI(
        subclass_mode_model=True,
        subclass_mode_data=True,
        run=False,
        args=[*args, f"--trainer.plugins={own}"],
    )
    assert type(cli.trainer.strategy.checkpoint_io).__name__ == "TorchCheckpointIO"


# ---- averaging ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def step_checkpoints(dates_config, tmp_path_factory) -> list[Path]:
    """The checkpoints after steps 1, 2 and 3 of a quick-start run."""
    root = tmp_path_factory.mktemp("average")
    every_step = [
        "--trainer.max_steps=3",
        "--trainer.callbacks+=lightning.pytorch.callbacks.ModelCheckpoint",
        "--trainer.callbacks.save_top_k=-1",
        "--trainer.callbacks.every_n_train_steps=1",
        f"--trainer.callbacks.dirpath={root / 'steps'}",
        "--trainer.callbacks.filename={step}",
    ]
    main(dates_run(dates_config, root / "dates", root / "run", *every_step))
    paths = [root / "steps" / f"step={step}.ckpt" for step in (1, 2, 3)]
    assert all(path.is_file() for path in paths), sorted((root / "steps").iterdir())
    return paths


@pytest.mark.slow
def test_average_of_the_last_checkpoints(step_checkpoints, tmp_path):
    out = tmp_path / "averaged.ckpt"
    app = load_script("apps/average_checkpoints.py")
    assert app.main([str(step_checkpoints[0].parent), "--last", "2", "--out", str(out)]) == 0

    averaged, older, newer = load(out), load(step_checkpoints[1]), load(step_checkpoints[2])
    assert averaged["global_step"] == 3
    assert (
        averaged["optimizer_states"][0]["state"].keys()
        == newer["optimizer_states"][0]["state"].keys()
    )
    changed = 0
    for name, tensor in newer["state_dict"].items():
        if tensor.is_floating_point():
            changed += not torch.equal(older["state_dict"][name], tensor)
            mean = (older["state_dict"][name].double() + tensor.double()) / 2
            assert torch.equal(averaged["state_dict"][name], mean.to(tensor.dtype)), name
        else:
            assert torch.equal(averaged["state_dict"][name], tensor), name
    assert changed, "steps 2 and 3 have the same weights: the test would prove nothing"

    model = seqtasks_load(out)  # as every app loads it
    (best,) = model.translate(["march 3, 1999"], beam=1)
    assert isinstance(best.text, str)
    source, output = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("march 3, 1999\n\nthe first of may 2001\n")
    translate = load_script("apps/translate.py")
    args = ["--checkpoint", str(out), "--input", str(source), "--output", str(output)]
    assert translate.main([*args, "--beam", "1"]) == 0
    assert len(output.read_text().splitlines()) == 3


@pytest.mark.slow
def test_averaging_refuses_unlike_checkpoints(step_checkpoints, tmp_path, capsys):
    first = step_checkpoints[0]
    other_task = load(first)
    relabel(other_task, "parsing")
    parsing = tmp_path / "parsing.ckpt"
    torch.save(other_task, parsing)
    with pytest.raises(CheckpointError, match=f"{parsing}: it declares a parsing model"):
        average_checkpoints([first, parsing])

    other_shape = load(first)
    name = next(iter(other_shape["state_dict"]))
    other_shape["state_dict"][name] = torch.zeros(3, 3)
    wider = tmp_path / "wider.ckpt"
    torch.save(other_shape, wider)
    with pytest.raises(CheckpointError, match=f"{wider}.*architecture differs: {name}"):
        average_checkpoints([first, wider])

    out = tmp_path / "never.ckpt"
    app = load_script("apps/average_checkpoints.py")
    assert app.main([str(first), str(wider), "--out", str(out)]) == 2
    assert f"error: cannot average {wider}" in capsys.readouterr().err
    assert not out.exists()


# ---- numerical faults ---------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "when, message",
    [
        ("start", "non-finite training loss nan at step 5, batch 5"),
        ("end", "not writing a checkpoint at step 6: parameter .* holds non-finite values"),
    ],
)
def test_a_numerical_fault_stops_the_run_before_any_nan_checkpoint(
    when, message, dates_config, tmp_path
):
    """NaN weights before step 6's forward pass make its loss NaN; NaN weights after step 6's
    update (a finite loss, as when an update overflows) reach the validation at step 6, whose
    checkpoint is refused. Either way the run stops naming the step, and last.ckpt is the
    good one from step 3."""
    step = 5 if when == "start" else 6
    args = dates_run(
        dates_config,
        tmp_path / "dates",
        tmp_path / "run",
        "--trainer.max_steps=9",
        "--trainer.val_check_interval=3",
        "--trainer.callbacks+=faults.PoisonWeights",
        f"--trainer.callbacks.step={step}",
        f"--trainer.callbacks.when={when}",
    )
    with pytest.raises(FloatingPointError, match=message):
        main(args)
    checkpoints = list((tmp_path / "run").glob("**/checkpoints/*"))
    assert "last.ckpt" in {p.name for p in checkpoints}, checkpoints
    for path in checkpoints:
        checkpoint = load(path)
        assert checkpoint["global_step"] == 3, path
        assert all(torch.isfinite(t).all() for t in checkpoint["state_dict"].values()), path
        open_model(path).build()


class Probe(L.Callback):
    """Sets the REINFORCE baseline and records the random state at chosen moments."""

    def __init__(self, baseline: float | None = None):
        self.baseline = baseline
        self.seen: tuple[Tensor | None, Tensor] | None = None

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if self.seen is None:
            self.seen = (pl_module.objective.baseline, torch.get_rng_state())

    def on_train_end(self, trainer, pl_module) -> None:
        if self.baseline is not None:
            pl_module.objective.baseline = torch.tensor(self.baseline)


def test_resuming_restores_the_reward_baseline_and_the_random_generators(tmp_path):
    """Neither is in Lightning's checkpoint; the task keeps them, per process, and sets them
    back before the first resumed batch (after the sanity check and the loaders' setup)."""

    def trainer(steps: int, probe: Probe) -> L.Trainer:
        return L.Trainer(
            max_steps=steps,
            limit_val_batches=1,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            callbacks=[probe],
            default_root_dir=tmp_path,
        )

    data = DatesData(str(tmp_path / "dates"), num_train=100, max_tokens=512)
    first = trainer(2, Probe(baseline=-3.5))
    first.fit(make_task(data), datamodule=data)
    path = tmp_path / "step2.ckpt"
    first.save_checkpoint(path)
    (state,) = torch.load(path, weights_only=False)["seqtasks_resume"]  # hparams: partials

    torch.manual_seed(123)  # the resumed process starts from another random state
    probe = Probe()
    trainer(3, probe).fit(make_task(data), datamodule=data, ckpt_path=path, weights_only=False)
    baseline, random_state = probe.seen
    assert baseline is not None and float(baseline) == -3.5
    assert torch.equal(random_state, state["random"]["torch"])


def make_task(data: DatesData) -> TranslationTask:
    return TranslationTask(
        encoder=functools.partial(RNNEncoder, embed_dim=8, hidden_size=8, dropout=0.3),
        decoder=functools.partial(BahdanauDecoder, embed_dim=8, hidden_size=16, readout_dim=8),
        src_vocab_size=data.src_vocab_size,
        tgt_vocab_size=data.tgt_vocab_size,
    )
