"""What a run leaves for people to read: metrics.csv and TensorBoard events (with the attention
images) in one `version_N` folder, only the loggers a config names when it names any, plain
progress lines when stderr is not a terminal, and `--ckpt_path last` still resuming."""

from __future__ import annotations

import contextlib
import csv
import io
import os
import re
import shutil
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from lightning.pytorch.callbacks import TQDMProgressBar
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from seqtasks.cli.main import SeqtasksCLI, main
from seqtasks.io.plots import png_pixels
from seqtasks.training.loggers import TensorBoardBeside
from seqtasks.training.progress import LineProgress

REPO = Path(__file__).resolve().parents[1]
DATES = REPO / "configs" / "translation" / "dates.yaml"
STEP_LINE = re.compile(
    r"^epoch \d+  step (\d+)/(\d+)  loss \d+\.\d{4}  lr 0\.003  [\d,]+ tgt tok/s"
)
VALIDATION_LINE = re.compile(r"^validation at step (\d+) \(epoch \d+\): .*val/exact_match \S+")


def dates_args(data: Path, root: Path, *extra: str) -> list[str]:
    """The quick-start config on 40 generated pairs (3 batches an epoch), one validation batch."""
    return [
        "--config",
        str(DATES),
        f"--data.init_args.data_dir={data}",
        "--data.init_args.num_train=40",
        "--data.init_args.max_tokens=256",
        "--trainer.limit_val_batches=1",
        f"--trainer.default_root_dir={root}",
        *extra,
    ]


def fit(data: Path, root: Path, *extra: str) -> str:
    """`seqtasks fit` in this process, every step logged and a progress line every 2 steps,
    with stderr a StringIO (no terminal); what it wrote to stderr."""
    line_progress = ["--trainer.callbacks+=seqtasks.training.progress.LineProgress"]
    line_progress += ["--trainer.callbacks.every_n_steps=2", "--trainer.log_every_n_steps=1"]
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        main(["fit", *dates_args(data, root, *line_progress, *extra)])
    return stderr.getvalue()


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Path, str]:
    """A 5-step fit validating at steps 2, 4 and 5: (its `default_root_dir`, its stderr)."""
    tmp = tmp_path_factory.mktemp("fit")
    steps = ["--trainer.max_steps=5", "--trainer.val_check_interval=2"]
    return tmp / "run", fit(tmp / "dates", tmp / "run", *steps)


def built(data: Path, root: Path, *extra: str) -> SeqtasksCLI:
    """The CLI of the quick-start config, built but not run."""
    args = dates_args(data, root, *extra)
    return SeqtasksCLI(subclass_mode_model=True, subclass_mode_data=True, run=False, args=args)


def csv_values(version: Path) -> dict[str, list[tuple[int, float]]]:
    """Every metric metrics.csv holds: (step, value) per row that has it."""
    with (version / "metrics.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    names = [name for name in rows[0] if name not in ("epoch", "step")]
    return {
        name: [(int(row["step"]), float(row[name])) for row in rows if row[name]] for name in names
    }


def validation_steps(stderr: str) -> list[int]:
    return [int(m[1]) for line in stderr.splitlines() if (m := VALIDATION_LINE.match(line))]


# ---- loggers ------------------------------------------------------------------------------------


def test_metrics_csv_and_tensorboard_events_share_one_version_folder(run):
    root, _ = run
    assert [p.name for p in (root / "lightning_logs").iterdir()] == ["version_0"]
    version = root / "lightning_logs" / "version_0"
    assert (version / "metrics.csv").is_file()
    assert len(list(version.glob("events.out.tfevents.*"))) == 1, sorted(os.listdir(version))
    assert (version / "checkpoints" / "last.ckpt").is_file()
    assert (version / "attention" / "example0.png").is_file()


def test_the_event_file_holds_what_metrics_csv_holds(run):
    version = run[0] / "lightning_logs" / "version_0"
    events = EventAccumulator(str(version))
    events.Reload()
    expected = csv_values(version)
    assert {"train/loss", "val/loss", "val/exact_match", "val/bleu"} <= set(expected)
    assert len(expected["train/loss"]) == 5, "log_every_n_steps=1: a row a step"
    for name, points in expected.items():
        logged = [(event.step, event.value) for event in events.Scalars(name)]
        assert [step for step, _ in logged] == [step for step, _ in points], name
        assert [value for _, value in logged] == pytest.approx([v for _, v in points]), name
    assert "hp_metric" not in events.Tags()["scalars"], "no placeholder scalar"


def test_the_event_file_holds_the_attention_plots_at_each_validation(run):
    root, stderr = run
    version = root / "lightning_logs" / "version_0"
    events = EventAccumulator(str(version))
    events.Reload()
    tags = sorted(tag for tag in events.Tags()["images"] if tag.startswith("attention/"))
    assert tags == ["attention/example0", "attention/example1", "attention/example2"]
    steps = validation_steps(stderr)
    assert steps == [2, 4, 5]
    for tag in tags:
        images = events.Images(tag)
        assert [image.step for image in images] == steps, f"{tag}: one at each global step"
        last = plt.imread(io.BytesIO(images[-1].encoded_image_string), format="png")
        expected = png_pixels(version / "attention" / f"{tag.split('/')[1]}.png")
        assert np.array_equal((last[..., :3] * 255).round().astype(np.uint8), expected), tag


@pytest.mark.parametrize(
    "given, expected",
    [
        ([], [CSVLogger, TensorBoardBeside]),
        (["--trainer.logger=true"], [CSVLogger, TensorBoardBeside]),
        (["--trainer.logger=false"], []),
        (["--trainer.logger=lightning.pytorch.loggers.CSVLogger"], [CSVLogger]),
        (["--trainer.logger=lightning.pytorch.loggers.TensorBoardLogger"], [TensorBoardLogger]),
        (["--config", "OWN"], [CSVLogger, CSVLogger]),
    ],
    ids=["unset", "true", "false", "csv", "tensorboard", "config-list"],
)
def test_a_config_that_names_loggers_keeps_exactly_them(given, expected, tmp_path):
    own = tmp_path / "own.yaml"
    own.write_text(
        "trainer:\n  logger:\n"
        + "".join(
            f"    - class_path: lightning.pytorch.loggers.CSVLogger\n"
            f"      init_args: {{save_dir: {tmp_path}, name: {name}}}\n"
            for name in ("mine", "theirs")
        )
    )
    given = [str(own) if arg == "OWN" else arg for arg in given]
    if given and given[0].startswith("--trainer.logger=lightning"):
        given.append(f"--trainer.logger.save_dir={tmp_path / 'own'}")
    cli = built(tmp_path / "dates", tmp_path / "run", *given)
    assert [type(logger) for logger in cli.trainer.loggers] == expected
    if expected == [CSVLogger, CSVLogger]:
        assert [logger.name for logger in cli.trainer.loggers] == ["mine", "theirs"]


def test_tensorboard_joins_the_csv_folder_whichever_is_first_written(tmp_path):
    (tmp_path / "lightning_logs" / "version_0").mkdir(parents=True)
    cli = built(tmp_path / "dates", tmp_path)
    csv_logger, board = cli.trainer.loggers
    board.experiment.add_scalar("x", 1.0, 0)  # TensorBoard writes first: version_1 exists now
    board.experiment.flush()
    assert board.log_dir == csv_logger.log_dir == cli.trainer.log_dir
    assert Path(board.log_dir).name == "version_1"


# ---- progress -----------------------------------------------------------------------------------


def test_without_a_terminal_progress_is_plain_lines_every_n_steps(run):
    _, stderr = run
    assert "\r" not in stderr
    steps = [STEP_LINE.match(line) for line in stderr.splitlines() if line.startswith("epoch")]
    assert all(steps), stderr
    assert [(int(m[1]), int(m[2])) for m in steps] == [(2, 5), (4, 5), (5, 5)]
    lines = [line for line in stderr.splitlines() if STEP_LINE.match(line)]
    assert all(" elapsed " in line and " eta " in line for line in lines), lines
    assert lines[-1].endswith("eta 0:00")
    assert validation_steps(stderr), stderr


def test_the_eta_is_the_steps_left_at_this_runs_pace(monkeypatch):
    """A run resumed at step 100 of 200 that took 50 s for 50 steps has 50 s left."""
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    trainer = SimpleNamespace(
        estimated_stepping_batches=200,
        global_step=100,
        current_epoch=3,
        optimizers=[],
        callbacks=[],
        accumulate_grad_batches=1,
    )
    progress = LineProgress(every_n_steps=50)
    progress.on_train_start(trainer, None)
    now[0], trainer.global_step = 1050.0, 150
    line = progress.step_line(trainer)
    assert line.startswith("epoch 3  step 150/200  ") and line.endswith("elapsed 0:50  eta 0:50")


@pytest.mark.parametrize(
    "terminal, extra, expected",
    [
        (True, [], TQDMProgressBar),
        (False, [], LineProgress),
        (False, ["--trainer.enable_progress_bar=false"], type(None)),
        (False, ["--trainer.callbacks+=TQDMProgressBar"], TQDMProgressBar),
    ],
    ids=["terminal", "no-terminal", "disabled", "named"],
)
def test_the_cli_shows_lines_only_where_stderr_is_no_terminal(
    terminal, extra, expected, tmp_path, monkeypatch
):
    leader, follower = os.openpty()
    stream = os.fdopen(follower, "w") if terminal else io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    try:
        cli = built(tmp_path / "dates", tmp_path / "run", *extra)
    finally:
        monkeypatch.undo()
        stream.close()
        os.close(leader)
    assert type(cli.trainer.progress_bar_callback) is expected
    assert sum(isinstance(c, LineProgress) for c in cli.trainer.callbacks) == (
        expected is LineProgress
    )


# ---- resume -------------------------------------------------------------------------------------


def test_ckpt_path_last_resumes_where_the_default_loggers_left_it(run, tmp_path):
    root = tmp_path / "run"
    shutil.copytree(run[0], root)
    stderr = fit(tmp_path / "dates", root, "--trainer.max_steps=7", "--ckpt_path=last")
    checkpoints = root / "lightning_logs" / "version_0" / "checkpoints"
    last = torch.load(checkpoints / "last.ckpt", map_location="cpu", weights_only=False)
    assert last["global_step"] == 7, "resumed from step 5 and went on writing in version_0"
    resumed = root / "lightning_logs" / "version_1"
    assert (resumed / "metrics.csv").is_file() and list(resumed.glob("events.out.tfevents.*"))
    assert not (resumed / "checkpoints").exists()
    steps = [int(m[1]) for line in stderr.splitlines() if (m := STEP_LINE.match(line))]
    assert steps == [6, 7]
