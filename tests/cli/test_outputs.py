"""Outputs are checked before any work (`seqtasks.io.outputs`): an output that is one of the
run's inputs (the same file by any name), another output, or a file of seqtasks itself is
refused, and so is one that cannot be written; every app and data_prep script asks before it
reads a model or a corpus, and its inputs are left as they were."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest
import torch
import yaml
from conftest import REPO, load_script
from lightning.pytorch.callbacks import ModelCheckpoint

from seqtasks.io.outputs import OutputError, check_output


# ---- the check ----------------------------------------------------------------------------------
def test_an_output_that_is_an_input_by_any_name_is_refused(tmp_path):
    source = tmp_path / "news.de"
    source.write_text("Ein Hund.\n")
    (tmp_path / "link.de").symlink_to(source)
    os.link(source, tmp_path / "hard.de")
    (tmp_path / "sub").mkdir()
    for name in ("news.de", "link.de", "hard.de", "sub/../news.de"):
        with pytest.raises(OutputError) as error:
            check_output(tmp_path / name, "argument --output:", {"--input": source})
        assert str(error.value) == (
            f"argument --output: {tmp_path / name} is also --input ({source}): writing it would "
            "overwrite that file; choose another name"
        )
    assert (
        check_output(tmp_path / "news.en", "--output", {"--input": source}) == tmp_path / "news.en"
    )
    assert source.read_text() == "Ein Hund.\n"


def test_a_folder_the_run_replaces_may_not_hold_an_input(tmp_path):
    checkpoint = tmp_path / "run" / "last.ckpt"
    checkpoint.parent.mkdir()
    checkpoint.write_bytes(b"weights")
    for out in (tmp_path / "run", tmp_path):
        with pytest.raises(OutputError, match=f"OUT {out} holds the checkpoint"):
            check_output(out, "OUT", {"the checkpoint": checkpoint}, folder=True, replaces=True)
    check_output(
        tmp_path / "model", "OUT", {"the checkpoint": checkpoint}, folder=True, replaces=True
    )


def test_seqtasks_own_files_are_never_an_output():
    package = REPO / "seqtasks"
    with pytest.raises(OutputError, match="would overwrite the seqtasks package"):
        check_output(package / "cli" / "main.py", "--output")
    with pytest.raises(OutputError, match="would overwrite the seqtasks package"):
        check_output(REPO, "OUT", folder=True, replaces=True)


def test_a_place_that_cannot_be_written_is_refused(tmp_path):
    afile = tmp_path / "a.txt"
    afile.write_text("x")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    cases = {
        (tmp_path, False): "is a folder: name a file to write",
        (afile, True): "is a file, not a folder",
        (tmp_path / "dangling", True): f"is a link to {tmp_path / 'gone'}, which does not exist",
        (afile / "b" / "c.txt", False): f"cannot be written: {afile} is a file, not a folder",
        (Path("/proc/seqtasks-test/out.txt"), False): "cannot be written: no file can be created",
    }
    for (path, folder), reason in cases.items():
        with pytest.raises(OutputError) as error:
            check_output(path, "--output", folder=folder)
        assert str(error.value).startswith(f"--output {path} {reason}")
    assert sorted(tmp_path.iterdir()) == [afile, tmp_path / "dangling"], "nothing left behind"
    check_output(tmp_path / "new" / "deeper" / "out.txt", "--output")
    assert not (tmp_path / "new").exists(), "checking creates no folder"
    check_output("/dev/null", "--output")  # written as it is, not replaced


def test_writing_goes_through_a_link_and_into_a_pipe_without_replacing_them(tmp_path):
    """A rename over `--output latest.txt` (a link) or `--output /dev/stdout` (a link to a
    pipe or terminal) used to replace the link, or the device, with a plain file."""
    import threading

    from seqtasks.io.files import write_atomic

    target, link = tmp_path / "run1.txt", tmp_path / "latest.txt"
    target.write_text("old\n")
    link.symlink_to(target)
    write_atomic(link, "new\n")
    assert link.is_symlink() and target.read_text() == "new\n"
    pipe, heard = tmp_path / "pipe", []
    os.mkfifo(pipe)
    reader = threading.Thread(target=lambda: heard.append(pipe.read_bytes()), daemon=True)
    reader.start()
    write_atomic(pipe, "through the pipe\n")
    reader.join(timeout=30)
    assert heard == [b"through the pipe\n"] and stat.S_ISFIFO(os.stat(pipe).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest.txt", "pipe", "run1.txt"]


# ---- the apps and data_prep scripts ask first --------------------------------------------------
def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def refused(capsys, script: str, argv: list[str]) -> str:
    """The last line of the argparse error `script` ends with (status 2)."""
    with pytest.raises(SystemExit) as exit:
        load_script(script).main(argv)
    assert exit.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


@pytest.fixture
def files(tmp_path) -> dict[str, Path]:
    """Inputs of every kind; the checkpoints are not real (the checks come before loading)."""
    made = {}
    for name, text in {
        "src": "Ein Hund.\n",
        "ref": "A dog.\n",
        "gold": "(TOP (S (NN x)))\n",
        "ckpt": "not read",
        "a.ckpt": "not read",
        "photo.png": "not read",
    }.items():
        made[name] = tmp_path / name
        made[name].write_text(text)
    return made


def test_translate_refuses_to_write_over_its_input_or_checkpoint(capsys, files, tmp_path):
    app, before = "apps/translate.py", digest(files["src"])
    common = ["--checkpoint", str(files["ckpt"]), "--input", str(files["src"])]
    cases = {
        ("--output", files["src"]): "is also --input",
        ("--output", files["ckpt"]): "is also --checkpoint",
        ("--output", tmp_path): "is a folder: name a file to write",
        ("--output", files["ref"] / "x.txt"): "is a file, not a folder",
        ("--attention-plots", files["ref"]): "is a file, not a folder",
    }
    for (option, path), reason in cases.items():
        error = refused(capsys, app, [*common, option, str(path)])
        assert f"error: argument {option}: {path} " in error and reason in error
    out = tmp_path / "out.en"
    error = refused(capsys, app, [*common, "--output", str(out), "--attention-plots", str(out)])
    assert f"argument --attention-plots: {out} is also the --output file" in error
    assert digest(files["src"]) == before


def test_evaluate_refuses_outputs_over_its_inputs_or_each_other(capsys, files, tmp_path):
    app = "apps/evaluate.py"
    text = ["--src", str(files["src"]), "--ref", str(files["ref"])]
    one = ["translation", "--checkpoint", str(files["ckpt"]), *text]
    assert "argument --output: " in refused(capsys, app, [*one, "--output", str(files["ref"])])
    error = refused(capsys, app, [*one, "--output", str(files["src"])])
    assert error.endswith(
        "is also --src ({}): writing it would overwrite that file; choose another name".format(
            files["src"]
        )
    )
    plot = refused(capsys, app, [*one, "--output", "h.txt", "--length-plot", "h.txt"])
    assert "argument --length-plot: h.txt is also the --output file" in plot
    # two checkpoints write hyp.ckpt.txt and hyp.a.txt: the second would be the reference
    files["ref"].rename(tmp_path / "hyp.a.txt")
    two = ["translation", "--checkpoint", str(files["ckpt"]), str(files["a.ckpt"])]
    two += ["--src", str(files["src"]), "--ref", str(tmp_path / "hyp.a.txt")]
    error = refused(capsys, app, [*two, "--output", str(tmp_path / "hyp.txt")])
    assert f"argument --output: {tmp_path / 'hyp.a.txt'} is also --ref" in error
    parsing = ["parsing", "--gold", str(files["gold"]), "--checkpoint", str(files["ckpt"])]
    assert "is also --gold" in refused(capsys, app, [*parsing, "--output", str(files["gold"])])
    source = tmp_path / "shapes"
    (source / "images").mkdir(parents=True)
    (source / "captions.txt").write_text("image,caption\n")
    captioning = ["captioning", "--checkpoint", str(files["ckpt"]), "--source", str(source)]
    error = refused(capsys, app, [*captioning, "--output", str(source / "captions.txt")])
    assert "is also --source" in error
    assert (source / "captions.txt").read_text() == "image,caption\n"


def test_caption_refuses_to_write_over_an_image(capsys, files, tmp_path):
    app, photo = "apps/caption.py", files["photo.png"]
    common = [str(tmp_path), "--checkpoint", str(files["ckpt"])]
    assert "is also an input image" in refused(capsys, app, [*common, "--out", str(photo)])
    error = refused(capsys, app, [*common, "--attention-maps", str(tmp_path)])
    assert error.endswith(
        f"argument --attention-maps: the map of {photo} would be written over that image "
        f"({photo}): choose another folder"
    )
    assert photo.read_text() == "not read"


def test_averaging_refuses_to_write_over_a_checkpoint_it_averages(capsys, files, tmp_path):
    argv = [str(tmp_path), "--out", str(files["a.ckpt"])]
    error = refused(capsys, "apps/average_checkpoints.py", argv)
    assert f"argument --out: {files['a.ckpt']} is also a checkpoint to average" in error


def test_data_prep_refuses_to_write_over_its_source(capsys, tmp_path, shared_data):
    source = tmp_path / "multi30k"
    source.mkdir()
    (source / "val.de").write_text("Ein Hund.\n")
    error = refused(
        capsys, "data_prep/multi30k.py", ["--source", str(source), "--out", str(source)]
    )
    assert f"argument --out: {source / 'val.de'} is also a --source file" in error
    assert (source / "val.de").read_text() == "Ein Hund.\n"
    flickr = shared_data / "flickr8k_subset"
    error = refused(
        capsys, "data_prep/captions.py", ["--source", str(flickr), "--out", str(flickr)]
    )
    assert f"argument --out: {flickr} is also --source ({flickr}): writing there would mix" in error
    ptb = ["--source", str(shared_data / "ptb_sample"), "--out", str(source / "val.de")]
    assert refused(capsys, "data_prep/ptb.py", ptb).endswith("is a file, not a folder")
    shards = ["--source", str(source), "--split", "val", "--out", str(source / "val.de")]
    assert "is also an input file" in refused(capsys, "data_prep/shards.py", shards)
    shapes = ["--out", str(source / "val.de" / "shapes")]
    assert "cannot be written" in refused(capsys, "data_prep/shapes.py", shapes)


# ---- the checkpoints a fit writes ---------------------------------------------------------------
CONFIGS = sorted(p.relative_to(REPO / "configs") for p in (REPO / "configs").glob("*/*.yaml"))


@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_every_config_names_its_best_checkpoint_in_one_style(config):
    """epoch, step, then the monitored score by its name and 2 decimals as the reports print
    it, apart from the name (`f1_72.70`, not `f172.70`): `epoch2-step300-exact_match_100.00.
    ckpt`, never Lightning's `name=value` (which would put `val/bleu=` in the name, a folder)."""
    loaded = yaml.safe_load((REPO / "configs" / config).read_text())
    (kept,) = [c["init_args"] for c in loaded["trainer"]["callbacks"]
               if c["class_path"].endswith(".ModelCheckpoint")]  # fmt: skip
    monitor = kept["monitor"]
    name = monitor.removeprefix("val/")
    assert kept["filename"] == f"epoch{{epoch}}-step{{step}}-{name}_{{{monitor}:.2f}}"
    assert kept["auto_insert_metric_name"] is False
    checkpoint = ModelCheckpoint(filename=kept["filename"], auto_insert_metric_name=False)
    score = torch.tensor(100.00000000000004)
    written = checkpoint.format_checkpoint_name({"epoch": 2, "step": 300, monitor: score})
    assert written == f"epoch2-step300-{name}_100.00.ckpt"
