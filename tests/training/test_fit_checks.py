"""`seqtasks fit|validate|test|predict` refuses, in one `error:` line and before its first step,
what would otherwise fail deep inside the run or lose its work: a checkpoint whose model,
optimiser or schedule differs from the config's, a place the run cannot write (or that holds
its input), an accelerator or devices this machine lacks, and a Transformer with fewer positions
than the data's sequences need. Each run is the real CLI, in this process."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest
import test_resume
import torch
from conftest import REPO
from test_resume import dates_run

import seqtasks
from seqtasks.cli.main import SeqtasksCLI, main
from seqtasks.io.checkpoint_files import CheckpointError
from seqtasks.model_files.sources import open_model
from seqtasks.translation.dates import DatesData

dates_config = test_resume.dates_config  # the quick-start config, without attention plots
HINT = "; give the settings it was trained with (its run's config.yaml)"
SHORT = ["--trainer.max_steps=2", "--trainer.val_check_interval=2"]


@pytest.fixture(autouse=True)
def only_these_arguments(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["seqtasks"])  # the arguments are `args`, not pytest's


@pytest.fixture(scope="module")
def dates_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("data") / "dates"
    DatesData(str(folder), num_train=120)
    return folder


@pytest.fixture(scope="module")
def trained(dates_config, dates_dir, tmp_path_factory) -> Path:
    """The root of a 2-step run of the quick-start model (plateau schedule, Adam), whose
    `lightning_logs/version_0/checkpoints` holds last.ckpt and the best checkpoint."""
    root = tmp_path_factory.mktemp("trained")
    main(dates_run(dates_config, dates_dir, root, *SHORT))
    assert (root / "lightning_logs/version_0/checkpoints/last.ckpt").is_file()
    return root


def refused(args: list[str], capsys) -> str:
    """The last line `seqtasks ARGS` writes to stderr, having checked it exits with status 2."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        main(args)
    assert stop.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


def resumed(trained: Path, tmp_path: Path) -> tuple[Path, Path, bytes]:
    """A copy of the trained run (root, its last.ckpt, the file's bytes), to resume from."""
    root = tmp_path / "run"
    shutil.copytree(trained, root)
    last = root / "lightning_logs/version_0/checkpoints/last.ckpt"
    return root, last, last.read_bytes()


def checkpoints(root: Path) -> list[Path]:
    return sorted(root.glob("**/*.ckpt"))


# ---- a checkpoint unlike the config's model, optimiser or schedule ------------------------------
CHANGED_MODELS = {  # a setting that differs is named before the tensors it reshapes
    "hidden size": (
        ["--model.init_args.encoder.init_args.hidden_size=96"],
        "encoder.hidden_size: checkpoint 64, config 96",
    ),
    "layers": (
        ["--model.init_args.encoder.init_args.num_layers=2"],
        "encoder.num_layers: checkpoint 1, config 2",
    ),
    "a tensor only in the checkpoint": (  # an edited file: its settings are the config's
        [],
        "first at encoder.extra, in the checkpoint but not in the config (1 tensor only in the "
        "checkpoint)",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize(
    "subcommand, ckpt_path, change",
    [("fit", "last", "hidden size"), ("validate", "file", "layers")]
    + [("test", "last", "layers"), ("predict", "file", "a tensor only in the checkpoint")],
)
def test_a_checkpoint_of_another_model_is_refused_naming_the_first_difference(
    trained, dates_config, dates_dir, tmp_path, capsys, subcommand, ckpt_path, change
):
    root, last, before = resumed(trained, tmp_path)
    if change == "a tensor only in the checkpoint":
        checkpoint = torch.load(last, weights_only=True)
        checkpoint["state_dict"]["encoder.extra"] = torch.zeros(2)
        torch.save(checkpoint, last)
        before = last.read_bytes()
    overrides, difference = CHANGED_MODELS[change]
    args = dates_run(dates_config, dates_dir, root, *SHORT, *overrides)
    args[0] = subcommand
    if subcommand != "fit":  # the fit-only settings of dates_run
        args = [a for a in args if "val_check_interval" not in a and "max_steps" not in a]
    line = refused([*args, "--ckpt_path", "last" if ckpt_path == "last" else str(last)], capsys)
    assert line == (
        f"error: {last}: the checkpoint's model differs from the config's: {difference}{HINT}"
    )
    assert last.read_bytes() == before
    assert len(checkpoints(root)) == len(checkpoints(trained)), "no checkpoint was written"


@pytest.mark.slow
def test_a_checkpoint_whose_weights_differ_from_its_own_settings_is_named_by_the_apps(
    trained, tmp_path
):
    """`open_model` (every app, `seqtasks.load`) builds the model from the checkpoint's own
    hyperparameters; weights unlike them (an edited file) get the same one-line account."""
    path = tmp_path / "edited.ckpt"
    checkpoint = torch.load(trained / "lightning_logs/version_0/checkpoints/last.ckpt")
    checkpoint["state_dict"]["decoder.embedding.weight"] = torch.zeros(7, 32)
    torch.save(checkpoint, path)
    with pytest.raises(CheckpointError) as error:
        open_model(path).build()
    assert str(error.value).startswith(
        f"{path}: its weights do not fit the model its hyperparameters describe: first at "
        "decoder.embedding.weight, [7, 32] in the checkpoint, "
    )


def edited(last: Path, change: str) -> None:
    """Rewrite the checkpoint `last` as one of another training state."""
    checkpoint = torch.load(last, weights_only=True)
    if change == "weights only":
        del checkpoint["optimizer_states"], checkpoint["lr_schedulers"]
    else:  # its single parameter group as two
        (state,) = checkpoint["optimizer_states"]
        (group,) = state["param_groups"]
        state["param_groups"] = [
            {**group, "params": group["params"][:3]},
            {**group, "params": group["params"][3:]},
        ]
    torch.save(checkpoint, last)


TRAINING_STATES = {
    "optimiser": (
        ["--model.init_args.optimizer=torch.optim.SGD", "--model.init_args.optimizer.lr=0.1"],
        "the optimiser is Adam in the checkpoint, SGD in the config",
    ),
    "no schedule": (
        ["--model.init_args.lr_scheduler=null"],
        "the learning-rate scheduler is ReduceLROnPlateau in the checkpoint, none in the config",
    ),
    "parameter groups": (
        [],
        "the optimiser has 2 parameter groups in the checkpoint, 1 in the config",
    ),
    "weights only": (
        [],
        "it holds weights only, without the optimiser's state "
        "(ModelCheckpoint(save_weights_only=True)), so it cannot resume training",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("change", TRAINING_STATES)
def test_resuming_into_another_optimiser_or_schedule_is_refused_naming_it(
    trained, dates_config, dates_dir, tmp_path, capsys, change
):
    root, last, before = resumed(trained, tmp_path)
    if change in ("parameter groups", "weights only"):
        edited(last, change)
        before = last.read_bytes()
    overrides, difference = TRAINING_STATES[change]
    args = dates_run(dates_config, dates_dir, root, "--trainer.max_steps=4", *overrides)
    line = refused([*args, "--ckpt_path", "last"], capsys)
    assert line == (
        f"error: {last}: the checkpoint's training state differs from the config's: "
        f"{difference}{HINT}"
    )
    assert last.read_bytes() == before
    assert len(checkpoints(root)) == len(checkpoints(trained)), "no checkpoint was written"


@pytest.mark.slow
def test_resuming_past_max_epochs_is_one_line(trained, dates_config, dates_dir, tmp_path, capsys):
    """Lightning's own check, which it raises as a traceback."""
    root, last, _ = resumed(trained, tmp_path)
    checkpoint = torch.load(last, weights_only=True)
    for count in checkpoint["loops"]["fit_loop"]["epoch_progress"].values():
        count.update(ready=4, started=4, processed=4, completed=3)
    torch.save(checkpoint, last)
    before = last.read_bytes()
    args = dates_run(dates_config, dates_dir, root, "--trainer.max_epochs=2", "--ckpt_path=last")
    line = refused(args, capsys)
    assert line == (
        "error: You restored a checkpoint with current_epoch=3, but you have set "
        "Trainer(max_epochs=2)."
    )
    assert last.read_bytes() == before


@pytest.mark.slow
def test_ckpt_path_file_keeps_the_settings_the_command_line_gives(
    trained, dates_config, dates_dir, tmp_path
):
    """LightningCLI would read the model's settings from the file over the config's: the
    validation beam given here would be the checkpoint's 1 without a word."""
    last = trained / "lightning_logs/version_0/checkpoints/last.ckpt"
    args = ["validate", "--config", str(dates_config), f"--data.init_args.data_dir={dates_dir}"]
    args += [f"--trainer.default_root_dir={tmp_path}", "--trainer.limit_val_batches=1"]
    cli = SeqtasksCLI(
        subclass_mode_model=True,
        subclass_mode_data=True,
        args=[*args, "--model.init_args.val_beam=2", "--ckpt_path", str(last)],
    )
    assert cli.model.val_settings.beam == 2


@pytest.mark.slow
def test_ckpt_path_best_is_the_best_of_the_newest_run(
    trained, dates_config, dates_dir, tmp_path, capsys
):
    """Lightning knows `best` only within the process that trained; from a new one it ends
    with a ValueError. The newest run's last.ckpt records which checkpoint was best."""
    (best,) = (trained / "lightning_logs/version_0/checkpoints").glob("epoch*.ckpt")
    args = ["test", "--config", str(dates_config), f"--data.init_args.data_dir={dates_dir}"]
    args += ["--trainer.limit_test_batches=1"]
    cli = SeqtasksCLI(
        subclass_mode_model=True,
        subclass_mode_data=True,
        args=[*args, f"--trainer.default_root_dir={trained}", "--ckpt_path", "best"],
    )
    assert Path(cli.trainer.ckpt_path) == best

    line = refused([*args, f"--trainer.default_root_dir={tmp_path}", "--ckpt_path=best"], capsys)
    assert line.startswith(
        "error: --ckpt_path best: no earlier run of this config left a last.ckpt to say which "
        f"checkpoint was best (looked under {tmp_path})"
    )


@pytest.mark.parametrize("kind", ["missing", "folder"])
def test_a_ckpt_path_that_is_no_file_is_refused_before_anything_is_built(
    dates_config, tmp_path, capsys, kind
):
    path = tmp_path / "nothing.ckpt"
    if kind == "folder":
        path.mkdir()
    data = tmp_path / "never"
    args = ["validate", "--config", str(dates_config), f"--data.init_args.data_dir={data}"]
    line = refused([*args, "--ckpt_path", str(path)], capsys)
    message = f"no such checkpoint: {path}" if kind == "missing" else f"{path} is a folder"
    assert line.startswith(f"error: {message}")
    assert not data.exists(), "the data module was not built"


# ---- places the run writes ----------------------------------------------------------------------
def places(tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    """Per case, the overrides and the error line's start."""
    a_file = tmp_path / "a_file"
    package = Path(seqtasks.__file__).parent
    return {
        "root under a file": (
            [f"--trainer.default_root_dir={a_file}/run"],
            f"trainer.default_root_dir {a_file}/run cannot be written: {a_file} is a file, not a "
            "folder",
        ),
        "root is a file": (
            [f"--trainer.default_root_dir={a_file}"],
            f"trainer.default_root_dir {a_file} is a file, not a folder",
        ),
        "root read-only": (
            ["--trainer.default_root_dir=/sys/seqtasks-run"],
            "trainer.default_root_dir /sys/seqtasks-run cannot be written: no file can be created "
            "in /sys",
        ),
        "root in the package": (
            [f"--trainer.default_root_dir={package}/runs"],
            f"trainer.default_root_dir {package}/runs would overwrite the seqtasks package",
        ),
        "checkpoint folder is a file": (
            ["--trainer.callbacks+=lightning.pytorch.callbacks.ModelCheckpoint"]
            + [f"--trainer.callbacks.dirpath={a_file}"],
            f"trainer.callbacks[ModelCheckpoint].init_args.dirpath {a_file} is a file, not a "
            "folder",
        ),
        "logger under a file": (
            ["--trainer.logger=lightning.pytorch.loggers.CSVLogger"]
            + [f"--trainer.logger.save_dir={a_file}/logs"],
            f"trainer.logger[CSVLogger].init_args.save_dir {a_file}/logs cannot be written: "
            f"{a_file} is a file, not a folder",
        ),
    }


@pytest.mark.parametrize("case", list(places(Path("/x"))))
def test_a_place_the_run_cannot_write_is_refused_before_training(
    dates_config, dates_dir, tmp_path, capsys, case
):
    (tmp_path / "a_file").write_text("kept\n")
    overrides, message = places(tmp_path)[case]
    args = dates_run(dates_config, dates_dir, tmp_path / "run", *SHORT)
    line = refused([*args, *overrides], capsys)
    assert line.startswith(f"error: {message}")
    assert (tmp_path / "a_file").read_text() == "kept\n"
    assert not (Path(seqtasks.__file__).parent / "runs").exists()
    assert not checkpoints(tmp_path)


@pytest.mark.parametrize("output", ["a source of the split", "under a file", "the checkpoint"])
def test_a_prediction_file_that_would_replace_an_input_or_cannot_be_written_is_refused(
    dates_config, dates_dir, tmp_path, capsys, output
):
    (tmp_path / "a_file").write_text("kept\n")
    checkpoint = tmp_path / "model.ckpt"  # a translation checkpoint to `require_task`, no more
    torch.save({"state_dict": {}, "seqtasks": {"task": "translation"}}, checkpoint)
    path = {
        "a source of the split": dates_dir / "test.text",
        "under a file": tmp_path / "a_file" / "out.txt",
        "the checkpoint": checkpoint,
    }[output]
    before = {p: p.read_bytes() for p in [*dates_dir.iterdir(), tmp_path / "a_file"]}
    args = ["predict", "--config", str(dates_config), f"--data.init_args.data_dir={dates_dir}"]
    args += [f"--trainer.default_root_dir={tmp_path / 'run'}"]
    args += ["--trainer.callbacks+=seqtasks.training.callbacks.TranslationWriter"]
    args += [f"--trainer.callbacks.output={path}"]
    if output == "the checkpoint":
        args += ["--ckpt_path", str(checkpoint)]
    before[checkpoint] = checkpoint.read_bytes()
    line = refused(args, capsys)
    key = "error: trainer.callbacks[TranslationWriter].init_args.output"
    expected = {
        "a source of the split": f"{key} {path} is also a file of data.init_args.data_dir",
        "under a file": f"{key} {path} cannot be written: {tmp_path / 'a_file'} is a file",
        "the checkpoint": f"{key} {path} is also --ckpt_path",
    }[output]
    assert line.startswith(expected)
    assert {p: p.read_bytes() for p in before} == before


# ---- devices ------------------------------------------------------------------------------------
NO_GPU = {
    "gpu": (["--trainer.accelerator=gpu"], "trainer.accelerator: device 'gpu' is not here:"),
    "tpu": (["--trainer.accelerator=tpu"], "trainer.accelerator 'tpu' is not available here"),
    "unknown": (
        ["--trainer.accelerator=gpus"],
        "trainer.accelerator 'gpus' is not known: use auto, cpu, gpu, cuda, mps or tpu",
    ),
    "GPU indices": (["--trainer.devices=[0, 1]"], "trainer.devices [0, 1] names GPUs, but the"),
}


@pytest.mark.skipif(torch.cuda.is_available(), reason="asks for GPUs this machine lacks")
@pytest.mark.parametrize("case", NO_GPU)
def test_devices_that_are_not_here_are_refused_naming_them(
    dates_config, dates_dir, tmp_path, capsys, case
):
    overrides, message = NO_GPU[case]
    args = dates_run(dates_config, dates_dir, tmp_path / "run", *SHORT)
    line = refused([*args, *overrides], capsys)
    assert line.startswith(f"error: {message}")
    assert "(devices here: cpu" in line or case == "unknown"
    assert not (tmp_path / "run").exists()


def test_more_gpus_than_there_are_are_refused(
    dates_config, dates_dir, tmp_path, capsys, monkeypatch
):
    """On a machine with one GPU (as torch reports it here), before Lightning looks."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    args = dates_run(dates_config, dates_dir, tmp_path / "run", *SHORT)
    for devices, message in [
        ("3", "trainer.devices '3' asks for 3 GPUs, but torch sees 1 here"),
        ("[1]", "trainer.devices [1] names GPU 1, but torch sees 1 here"),
    ]:
        line = refused(
            [*args, "--trainer.accelerator=cuda", f"--trainer.devices={devices}"], capsys
        )
        assert line == f"error: {message} (devices here: cpu, cuda, cuda:0)"


# ---- positions --------------------------------------------------------------------------------
TOO_SHORT = re.compile(
    r"error: model\.init_args\.(?P<part>encoder|decoder)\.init_args\.max_positions (?P<limit>\d+) "
    r"is too small for the (?P<split>training split 'train'|validation split 'dev'): it has a "
    r"(source|target) of (?P<tokens>\d+) tokens, (?P<needed>\d+) positions with (EOS|BOS); raise "
    r"it to at least (?P=needed)"
)


def transformer_dates(dates_dir: Path, root: Path, *extra: str) -> list[str]:
    """A tiny Transformer on the dates corpus (max_length 100)."""
    layers = "{d_model: 16, num_heads: 2, num_layers: 1, ff_dim: 32, dropout: 0.0}"
    return [
        "fit",
        "--config",
        str(REPO / "configs/translation/transformer.yaml"),
        f"--model.init_args.encoder.init_args={layers}",
        f"--model.init_args.decoder.init_args={layers}",
        "--data=seqtasks.translation.dates.DatesData",
        f"--data.init_args.data_dir={dates_dir}",
        "--data.init_args.max_tokens=512",
        f"--trainer.default_root_dir={root}",
        "--trainer.limit_val_batches=1",
        "--trainer.max_steps=1",
        *extra,
    ]


@pytest.mark.slow
@pytest.mark.parametrize("part", ["encoder", "decoder"])
def test_a_transformer_too_short_for_the_training_data_is_refused_by_the_position_it_needs(
    dates_dir, tmp_path, capsys, part
):
    """Refused at 8 positions, naming the number the longest example needs: with that many,
    training runs; with one fewer it is refused again (where it would otherwise fail at the
    first batch holding that example)."""
    key = f"--model.init_args.{part}.init_args.max_positions"
    line = refused(transformer_dates(dates_dir, tmp_path / "short", f"{key}=8"), capsys)
    found = TOO_SHORT.fullmatch(line.split(", or lower")[0])
    assert found and found["part"] == part and found["split"] == "training split 'train'", line
    assert line.endswith(", or lower data.init_args.max_length (100) to 7")
    needed = int(found["needed"])
    assert needed == int(found["tokens"]) + 1 > 8
    main(transformer_dates(dates_dir, tmp_path / "enough", f"{key}={needed}"))
    assert checkpoints(tmp_path / "enough")
    line = refused(
        transformer_dates(dates_dir, tmp_path / "one_fewer", f"{key}={needed - 1}"), capsys
    )
    assert f"max_positions {needed - 1} is too small" in line
    assert not checkpoints(tmp_path / "short") and not checkpoints(tmp_path / "one_fewer")


@pytest.mark.slow
def test_evaluation_splits_kept_whole_count_too(ptb_dir, tmp_path, capsys):
    """Parsing skips training trees over max_length but validates on every tree: a decoder with
    room for the training trees alone is refused, naming the validation split."""
    args = ["fit", "--config", str(REPO / "configs/parsing/transformer.yaml")]
    args += [f"--data.init_args.data_dir={ptb_dir}", "--data.init_args.max_length=100"]
    args += ["--model.init_args.decoder.init_args.max_positions=101"]
    line = refused([*args, f"--trainer.default_root_dir={tmp_path}"], capsys)
    found = TOO_SHORT.fullmatch(line)
    assert found and found["split"] == "validation split 'dev'" and found["limit"] == "101", line
    assert int(found["tokens"]) > 100
