"""What a run leaves for people to read: metrics.csv and TensorBoard events (with the attention
images) in one `version_N` folder, only the loggers a config names when it names any, plain
progress lines when stderr is not a terminal (by steps and by time, in training and in every
evaluation), preparations that say how far they have got, scores in one format, none of
Lightning's noise, and `--ckpt_path last` still resuming."""

from __future__ import annotations

import contextlib
import csv
import io
import logging
import os
import re
import shutil
import sys
import threading
import time as time_module
import warnings
from pathlib import Path
from types import SimpleNamespace

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from conftest import REPO
from lightning.pytorch import Trainer
from lightning.pytorch.callbacks import TQDMProgressBar
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities._pytree import _tree_flatten
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from seqtasks.captioning.shapes import LEVELS, write_world
from seqtasks.cli.main import SeqtasksCLI, main
from seqtasks.io.plots import png_pixels
from seqtasks.io.preparation import Preparation
from seqtasks.metrics.formats import format_score, score_table
from seqtasks.training.loggers import TensorBoardBeside
from seqtasks.training.noise import RANK_ZERO_LOGGER, silence_known_noise
from seqtasks.training.progress import LineProgress

DATES = REPO / "configs" / "translation" / "dates.yaml"
STEP_LINE = re.compile(
    r"^epoch \d+  step (\d+)/(\d+)  loss (\d+\.\d+(e-\d+)?)  lr 0\.003  [\d,]+ tgt tok/s"
)
VALIDATION_LINE = re.compile(
    r"^validation at step (\d+) \(epoch \d+\): .*val/exact_match \d+\.\d\d %  .*\(\d+\.\d s\)$"
)


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
    """`seqtasks fit` in this process, every step logged and a progress line every 2 steps
    (and none by time), with stderr a StringIO (no terminal); what it wrote to stderr."""
    line_progress = ["--trainer.callbacks+=seqtasks.training.progress.LineProgress"]
    line_progress += ["--trainer.callbacks.every_n_steps=2", "--trainer.log_every_n_steps=1"]
    line_progress += [
        "--trainer.callbacks.every_seconds=3600",
        "--trainer.callbacks.first_after=3600",
    ]
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        main(["fit", *dates_args(data, root, *line_progress, *extra)])
    return stderr.getvalue()


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Path, str]:
    """A 5-step fit validating at steps 2, 4 and 5, with a time limit (so its checkpoints hold
    a Timer's state): (its `default_root_dir`, its stderr)."""
    tmp = tmp_path_factory.mktemp("fit")
    steps = ["--trainer.max_steps=5", "--trainer.val_check_interval=2"]
    steps += ["--trainer.max_time=00:01:00:00"]
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


def fake_trainer(total: int = 1000, **state) -> SimpleNamespace:
    """What LineProgress reads of a Trainer, fitting at step 0 unless `state` says otherwise."""
    trainer = SimpleNamespace(
        estimated_stepping_batches=total,
        global_step=0,
        current_epoch=0,
        optimizers=[],
        callbacks=[],
        accumulate_grad_batches=1,
        sanity_checking=False,
        testing=False,
        predicting=False,
        state=SimpleNamespace(fn=TrainerFn.FITTING),
        num_val_batches=[40],
        num_test_batches=[40],
        callback_metrics={},
    )
    return SimpleNamespace(**{**vars(trainer), **state})


def test_lines_come_by_time_too_the_first_early(capsys):
    """4 s a step, a line every 50 steps: the first after 5 s (step 2), then one at the end of
    the first step 30 s after the last line (steps 10, 18, 26, 34)."""
    now = [0.0]
    progress = LineProgress(every_n_steps=50, every_seconds=30.0, first_after=5.0)
    progress.clock = lambda: now[0]
    trainer = fake_trainer()
    progress.on_train_start(trainer, None)
    batch = SimpleNamespace(tgt_out=torch.full((2, 4), 5))  # 8 target tokens
    for step in range(1, 41):
        now[0], trainer.global_step = 4.0 * step, step
        progress.on_train_batch_end(trainer, None, {"loss": torch.tensor(1.23456)}, batch, step)
    lines = capsys.readouterr().err.splitlines()
    assert [int(re.search(r" step (\d+)/1000 ", line)[1]) for line in lines] == [2, 10, 18, 26, 34]
    assert lines[0] == "epoch 0  step 2/1000  loss 1.235  2 tgt tok/s  elapsed 0:08  eta 1:06:32"


def test_a_long_validation_and_a_test_say_how_far_they_have_got(capsys):
    """7 s a validation batch inside `fit`: a line when 30 s have passed since the last one
    (no early line: training just wrote one), then the scores in seqtasks' format; 3 s a test
    batch: a line after 5 s, then every 30 s, and one when it is done; prediction alike."""
    now = [100.0]
    progress = LineProgress(every_seconds=30.0, first_after=5.0)
    progress.clock = lambda: now[0]
    trainer = fake_trainer(
        global_step=250, callback_metrics={"val/exact_match": torch.tensor(10.0)}
    )
    progress._write("a training line at 100 s")
    progress.on_validation_start(trainer, None)
    for batch in range(10):
        now[0] += 7.0
        progress.on_validation_batch_end(trainer, None, None, None, batch)
    trainer.callback_metrics["val/loss"] = torch.tensor(1.23456)
    progress.on_validation_end(trainer, None)

    trainer = fake_trainer(testing=True, state=SimpleNamespace(fn=TrainerFn.TESTING))
    now[0] = 1000.0
    progress.on_test_start(trainer, None)
    for batch in range(40):
        now[0] += 3.0
        progress.on_test_batch_end(trainer, None, None, None, batch)
    progress.on_test_end(trainer, None)

    trainer = fake_trainer(predicting=True, num_predict_batches=[4])
    progress.on_predict_start(trainer, None)
    for batch in range(4):
        now[0] += 2.0
        progress.on_predict_batch_end(trainer, None, None, None, batch)
    progress.on_predict_end(trainer, None)
    assert capsys.readouterr().err.splitlines() == [
        "a training line at 100 s",
        "validation at step 250 (epoch 0): batch 5/40  elapsed 0:35  eta 4:05",
        "validation at step 250 (epoch 0): batch 10/40  elapsed 1:10  eta 3:30",
        "validation at step 250 (epoch 0): val/exact_match 10.00 %  val/loss 1.235  (70.0 s)",
        "test: batch 2/40  elapsed 0:06  eta 1:54",
        "test: batch 12/40  elapsed 0:36  eta 1:24",
        "test: batch 22/40  elapsed 1:06  eta 0:54",
        "test: batch 32/40  elapsed 1:36  eta 0:24",
        "test: done in 2:00",
        "predict: batch 3/4  elapsed 0:06  eta 0:02",
        "predict: done in 0:08",
    ]


def test_an_evaluation_of_several_dataloaders_counts_all_their_batches(capsys):
    """`seqtasks validate` of two dataloaders of 3 and 5 batches, 10 s each: the lines count
    the batches of both, out of 8, whatever index Lightning gives each within its own."""
    now = [0.0]
    progress = LineProgress(every_seconds=30.0, first_after=5.0)
    progress.clock = lambda: now[0]
    trainer = fake_trainer(num_val_batches=[3, 5], state=SimpleNamespace(fn=TrainerFn.VALIDATING))
    progress.on_validation_start(trainer, None)
    for dataloader, batches in enumerate([3, 5]):
        for batch in range(batches):
            now[0] += 10.0
            progress.on_validation_batch_end(trainer, None, None, None, batch, dataloader)
    assert capsys.readouterr().err.splitlines() == [
        "validation: batch 1/8  elapsed 0:10  eta 1:10",
        "validation: batch 4/8  elapsed 0:40  eta 0:40",
        "validation: batch 7/8  elapsed 1:10  eta 0:10",
    ]


def test_the_eta_is_the_steps_left_at_this_runs_pace():
    """A run resumed at step 100 of 200 that took 50 s for 50 steps has 50 s left."""
    now = [1000.0]
    trainer = fake_trainer(total=200, global_step=100, current_epoch=3)
    progress = LineProgress(every_n_steps=50)
    progress.clock = lambda: now[0]
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


# ---- preparations -------------------------------------------------------------------------------


def test_a_preparation_says_when_it_starts_how_far_it_got_and_when_it_is_done():
    """1 s an item, a line at least every 15 s; nothing more when it fails."""
    now, stream = [0.0], io.StringIO()

    def preparation(start: str, total: int | None = None) -> Preparation:
        return Preparation(
            "world", start, total, "things", 15.0, clock=lambda: now[0], stream=stream
        )

    with preparation("making 100 things", 100) as p:
        for _ in range(100):
            now[0] += 1.0
            p.advance()
    lines = stream.getvalue().splitlines()
    assert lines[0] == "world: making 100 things"
    assert lines[1] == "world: 15/100 things (15 %)  elapsed 0:15  eta 1:25"
    done = [line.split()[1] for line in lines[1:-1]]
    assert done == ["15/100", "30/100", "45/100", "60/100", "75/100", "90/100"]
    assert lines[-1] == "world: done, 100 things in 1:40"
    stream.seek(0)
    stream.truncate()
    with pytest.raises(KeyError), preparation("failing"):
        raise KeyError("the error says why")
    assert stream.getvalue() == "world: failing\n", "no 'done' for a preparation that failed"


def test_a_preparation_that_cannot_count_still_says_it_is_working():
    """Around a call that cannot count (sentencepiece's training), a thread writes the line."""
    ticked = threading.Event()

    class Stream(io.StringIO):
        def write(self, text: str) -> int:
            if "still working" in text:
                ticked.set()
            return super().write(text)

    stream = Stream()
    with Preparation("sentencepiece", "training", every=0.001, ticking=True, stream=stream):
        assert ticked.wait(30)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "sentencepiece: training" and lines[-1].startswith("sentencepiece: done in ")
    assert re.fullmatch(r"sentencepiece: still working  elapsed \d:\d\d", lines[1])


def test_the_shapes_world_says_what_it_generates_and_how_far_it_has_got(
    tmp_path, capsys, monkeypatch
):
    now = [0.0]

    def clock() -> float:  # 4 s each time it is read: a line every 4th image or so
        now[0] += 4.0
        return now[0]

    monkeypatch.setattr(time_module, "monotonic", clock)
    counts = {"train": 8, "val": 2, "test": 1, "holdout": 1}
    write_world(tmp_path / "world", LEVELS[1], counts, seed=0)
    monkeypatch.undo()
    lines = capsys.readouterr().err.splitlines()
    where = tmp_path / "world"
    assert (
        lines[0]
        == f"shapes world: generating 12 images (8 train, 2 val, 1 test, 1 holdout) into {where}"
    )
    progress = [
        line
        for line in lines[1:-1]
        if re.fullmatch(
            r"shapes world: \d+/12 images \(\d+ %\)  elapsed \d:\d\d  eta \d:\d\d", line
        )
    ]
    assert progress and progress == lines[1:-1]
    assert re.fullmatch(r"shapes world: done, 12 images in \d:\d\d", lines[-1])


# ---- one format for scores ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, value, shown",
    [
        ("test/exact_match", 10.0000001, "10.00 %"),  # computed × 100 (a task's scores.py)
        ("val/attention_hits", 99.6875, "99.69 %"),
        ("val/malformed", 0.0, "0.00 %"),
        ("test/bleu", 31.5234, "31.52"),
        ("val/f1", 14.70279312133789, "14.70"),
        ("val/cider", 52.125, "52.12"),
        ("test/loss", 1.23449, "1.234"),
        ("val/loss", 0.000839512, "0.0008395"),
        ("train/loss", 12.0, "12.00"),
        ("lr-Adam", 0.003, "0.003"),
        ("test/bleu/dataloader_idx_1", 3.14159, "3.14"),
    ],
)
def test_every_score_is_shown_with_its_unit_and_sensible_digits(name, value, shown):
    assert format_score(name, value) == shown


def test_the_score_table_is_sorted_and_aligned():
    table = score_table([("test/loss", 1.23449), ("test/exact_match", 10.0), ("test/bleu", 31.5)])
    assert table.splitlines() == [
        "test/bleu         31.50",
        "test/exact_match  10.00 %",
        "test/loss         1.234",
    ]


# ---- Lightning's noise --------------------------------------------------------------------------


def test_lightnings_leafspec_futurewarning_is_silenced_and_no_other_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _tree_flatten(torch.zeros(1))  # Lightning builds a LeafSpec: torch warns
        assert [w.category for w in caught] == [FutureWarning], "the warning this is about"
        caught.clear()
        silence_known_noise()
        _tree_flatten(torch.zeros(1))
        warnings.warn(
            "`isinstance(treespec, LeafSpec)` is deprecated here too", FutureWarning, stacklevel=1
        )
    assert [str(w.message) for w in caught] == [
        "`isinstance(treespec, LeafSpec)` is deprecated here too"
    ], "the same words from another module still show"


def test_lightnings_adverts_are_dropped_and_its_other_lines_kept():
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger(RANK_ZERO_LOGGER)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        silence_known_noise()
        Trainer(logger=False, accelerator="cpu", enable_checkpointing=False)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    messages = [record.getMessage() for record in records]
    assert any(m.startswith("GPU available") for m in messages), messages
    assert not [m for m in messages if "Tip" in m or "litlogger" in m]


def test_seqtasks_test_prints_its_scores_in_one_format_and_no_fit_state_warnings(
    run, tmp_path, capsys, monkeypatch
):
    """`seqtasks test` of a checkpoint whose fit had a time limit (a Timer) and wrote into
    another version folder: no warning about either, a progress line at the end, and the
    scores as `score_table` writes them instead of Lightning's table."""
    root, _ = run
    monkeypatch.setattr(sys, "argv", ["seqtasks"])
    last = root / "lightning_logs" / "version_0" / "checkpoints" / "last.ckpt"
    args = dates_args(root.parent / "dates", root, "--trainer.limit_test_batches=1")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        main(["test", *args, f"--ckpt_path={last}"])
    shown = [str(w.message) for w in caught]
    assert not [m for m in shown if "ckpt_path" in m or "dirpath" in m or "LeafSpec" in m], shown
    out, err = capsys.readouterr()
    assert re.fullmatch(
        r"test/bleu +\d+\.\d\d\ntest/chrf +\d+\.\d\d\ntest/exact_match +\d+\.\d\d %\n"
        r"test/loss +\d\.\d{3,}(e-\d+)?\n",
        out,
    ), out
    assert re.search(r"^test: done in 0:\d\d$", err, re.MULTILINE), err
