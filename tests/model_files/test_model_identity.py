"""A trained model knows what it is and refuses what it is not (docs/models.md, docs/resume.md).

Resuming onto data prepared with another tokeniser of the same size, or with a model of another
number of heads (same shapes), averaging a 2-head with a 4-head checkpoint, and every reader
given a checkpoint of a newer seqtasks: each refused in one line that names the setting or the
tokeniser and both values, before any file changes. What may change on resume is taken, and
takes effect (the learning rate against a schedule worked out on its own). A checkpoint written
before identity records existed still translates as it did, exports, and resumes."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest
import torch
import yaml
from conftest import REPO, fit_in_process, subprocess_env

import seqtasks
from seqtasks.cli.main import main as cli
from seqtasks.data.tokenizer import train_sentencepiece
from seqtasks.io.checkpoint_files import CheckpointError
from seqtasks.model_files import comparison, spec
from seqtasks.model_files.identity import NewerModelError, fingerprint
from seqtasks.training.schedules import InverseSqrtWarmup

TRANSFORMER = {"d_model": 16, "num_heads": 2, "num_layers": 1, "ff_dim": 32, "dropout": 0.1}
LR = 0.01


def config(root: Path, data: Path) -> dict:
    """A tiny Transformer translator on the toy corpus, 2 steps, a warm-up schedule."""
    part = {"init_args": TRANSFORMER}
    return {
        "seed_everything": 1,
        "trainer": {
            "max_steps": 2,
            "accelerator": "cpu",
            "limit_val_batches": 1,
            "num_sanity_val_steps": 0,
            "enable_progress_bar": False,
            "enable_model_summary": False,
            "default_root_dir": str(root),
            "callbacks": [
                {
                    "class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
                    "init_args": {"monitor": "val/bleu", "mode": "max"},
                },
                {"class_path": "seqtasks.training.checkpoints.LastCheckpoint"},
            ],
        },
        "model": {
            "class_path": "seqtasks.translation.task.TranslationTask",
            "init_args": {
                "encoder": {"class_path": "seqtasks.encoders.TransformerEncoder", **part},
                "decoder": {"class_path": "seqtasks.decoders.TransformerDecoder", **part},
                "optimizer": {"class_path": "torch.optim.Adam", "init_args": {"lr": LR}},
                "lr_scheduler": {
                    "class_path": "seqtasks.training.schedules.InverseSqrtWarmup",
                    "init_args": {"warmup_steps": 4},
                },
                "val_beam": 1,
            },
        },
        "data": {
            "class_path": "seqtasks.translation.data.TranslationData",
            "init_args": {"data_dir": str(data), "max_tokens": 400},
        },
    }


def test_a_tokenisers_fingerprint_reads_its_type_and_size_as_sentencepiece_does(multi30k_lines):
    """`fingerprint` reads a sentencepiece model's type and piece count from its bytes without
    the protobuf package; sentencepiece's own protobuf classes read them here."""
    from sentencepiece import sentencepiece_model_pb2 as protobuf

    for model_type in ("unigram", "bpe", "char"):
        model = train_sentencepiece(multi30k_lines["en"][:200], 120, model_type=model_type)
        parsed = protobuf.ModelProto.FromString(model.proto)
        kind = protobuf.TrainerSpec.ModelType.Name(parsed.trainer_spec.model_type).lower()
        found = fingerprint(model.proto)
        assert (found.kind, found.size) == (kind, len(parsed.pieces)) == (model_type, found.size)
        assert found.size == model.vocab_size
        assert found.sha256 == hashlib.sha256(model.proto).hexdigest()


@pytest.fixture(autouse=True)
def only_these_arguments(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["seqtasks"])


@pytest.fixture(scope="module")
def bpe_dir(toy_data_dir, multi30k_lines, tmp_path_factory) -> Path:
    """The toy corpus, its German side read by a BPE model of the unigram model's size."""
    folder = tmp_path_factory.mktemp("bpe") / "data"
    shutil.copytree(toy_data_dir, folder)
    unigram = (folder / "spm.de.model").read_bytes()
    bpe = train_sentencepiece(multi30k_lines["de"][:300], 250, model_type="bpe")
    assert bpe.vocab_size == fingerprint(unigram).size == 250
    (folder / "spm.de.model").write_bytes(bpe.proto)
    return folder


@pytest.fixture(scope="module")
def run(toy_data_dir, tmp_path_factory) -> Path:
    """The config file of a 2-step run, its run folder holding last.ckpt and the best."""
    folder = tmp_path_factory.mktemp("run")
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config(folder / "root", toy_data_dir)))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "argv", ["seqtasks"])
        fit_in_process("--config", str(path))
    return path


def last(run: Path) -> Path:
    return run.parent / "root/lightning_logs/version_0/checkpoints/last.ckpt"


def tree(*folders: Path) -> dict[str, bytes]:
    """Every file under `folders` (their names and bytes): what a refused run must not change."""
    return {str(p): p.read_bytes() for f in folders for p in sorted(f.rglob("*")) if p.is_file()}


def refused(args: list[str], capsys) -> str:
    """What `seqtasks ARGS` says on stderr, having checked that it exits with status 2 and says
    one line."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        cli(args)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


SHA = r"\(sha [0-9a-f]{12}\)"


def test_resuming_on_data_of_another_tokeniser_of_the_same_size_is_refused(
    run, bpe_dir, toy_data_dir
):
    """The issue's case, in a process of its own, so that every line it writes is seen."""
    before = tree(run.parent, bpe_dir)
    command = [sys.executable, "-m", "seqtasks", "fit", "--config", str(run)]
    command += [f"--data.init_args.data_dir={bpe_dir}", "--ckpt_path", "last"]
    done = subprocess.run(command, capture_output=True, text=True, env=subprocess_env())
    assert done.returncode == 2 and done.stdout == ""
    assert re.fullmatch(
        f"error: {last(run)}: the checkpoint was trained on other data: source tokenizer: "
        f"checkpoint unigram 250 {SHA}, data bpe 250 {SHA}; give the data it was trained on, "
        r"prepared as it was \(its tokenisers\), or start a new run\n",
        done.stderr,
    ), done.stderr
    assert tree(run.parent, bpe_dir) == before


@pytest.mark.parametrize("subcommand", ["fit", "validate", "test"])
def test_a_model_of_another_number_of_heads_is_refused(run, subcommand, capsys):
    before = tree(run.parent)
    restored = "last" if subcommand == "fit" else str(last(run))
    args = [subcommand, "--config", str(run), "--ckpt_path", restored]
    line = refused([*args, "--model.init_args.decoder.init_args.num_heads=4"], capsys)
    assert line == (
        f"error: {last(run)}: the checkpoint's model differs from the config's: "
        "decoder.num_heads: checkpoint 2, config 4; give the settings it was trained with (its "
        "run's config.yaml)"
    )
    assert tree(run.parent) == before


def test_evaluating_on_data_of_another_tokeniser_is_refused(run, bpe_dir, capsys):
    before = tree(run.parent)
    args = ["validate", "--config", str(run), f"--data.init_args.data_dir={bpe_dir}"]
    line = refused([*args, "--ckpt_path", str(last(run))], capsys)
    assert "source tokenizer: checkpoint unigram 250 (sha " in line
    assert tree(run.parent) == before


class SettingsProbe(L.Callback):
    """Writes, at the first batch a run trains, what the settings the config may change are."""

    def __init__(self, output: str):
        self.output = output

    def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
        if Path(self.output).exists():
            return
        record = {
            "step": trainer.global_step,
            "lr": trainer.optimizers[0].param_groups[0]["lr"],
            "weight_decay": trainer.optimizers[0].param_groups[0]["weight_decay"],
            "warmup": trainer.lr_scheduler_configs[0].scheduler.warmup_steps,
            "dropout": module.encoder.layers[0].residual_ff.dropout.p,
            "label_smoothing": module.objective.label_smoothing,
            "test_beam": module.test_settings.beam,
            "max_tokens": trainer.datamodule.max_tokens,
            "data_dir": str(trainer.datamodule.data_dir),
        }
        Path(self.output).write_text(json.dumps(record))


def schedule_rate(lr: float, warmup: int, steps: int) -> float:
    """The rate InverseSqrtWarmup gives after `steps` steps from the start, by stepping a fresh
    optimiser and scheduler (the uninterrupted run's rate)."""
    optimizer = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=lr)
    scheduler = InverseSqrtWarmup(optimizer, warmup)
    for _ in range(steps):
        optimizer.step()
        scheduler.step()
    return scheduler.get_last_lr()[0]


@pytest.mark.parametrize("changed", [False, True])
def test_what_may_change_on_resume_is_taken_and_takes_effect(run, toy_data_dir, tmp_path, changed):
    """Resumed with the same settings, the schedule goes on; with a new learning rate, weight
    decay, warm-up, dropout, label smoothing, test beam, batch size and a copy of the data in
    another folder, each is what the resumed run uses (the schedule's rate from the new
    learning rate at the resumed step)."""
    root = tmp_path / "run"
    shutil.copytree(run.parent, root)
    settings = config(root / "root", toy_data_dir)
    settings["trainer"]["max_steps"] = 3
    path = root / "config.yaml"
    path.write_text(yaml.safe_dump(settings))
    probe = ["--trainer.callbacks+=test_model_identity.SettingsProbe"]
    probe += [f"--trainer.callbacks.output={tmp_path / 'seen.json'}"]
    overrides = []
    if changed:
        copy = tmp_path / "data"
        shutil.copytree(toy_data_dir, copy)
        overrides = [
            "--model.init_args.optimizer.init_args.lr=0.02",
            "--model.init_args.optimizer.init_args.weight_decay=0.5",
            "--model.init_args.lr_scheduler.init_args.warmup_steps=8",
            "--model.init_args.encoder.init_args.dropout=0.3",
            "--model.init_args.label_smoothing=0.2",
            "--model.init_args.test_beam=2",
            "--data.init_args.max_tokens=300",
            f"--data.init_args.data_dir={copy}",
        ]
    fit_in_process("--config", str(path), *probe, *overrides, "--ckpt_path", "last")
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen["step"] == 2
    if not changed:
        assert seen["lr"] == pytest.approx(schedule_rate(LR, 4, 2), rel=1e-12)
        assert (seen["weight_decay"], seen["warmup"], seen["dropout"]) == (0.0, 4, 0.1)
        return
    assert seen["lr"] == pytest.approx(schedule_rate(0.02, 8, 2), rel=1e-12)
    assert (seen["weight_decay"], seen["warmup"], seen["dropout"]) == (0.5, 8, 0.3)
    assert (seen["label_smoothing"], seen["test_beam"], seen["max_tokens"]) == (0.2, 2, 300)
    assert seen["data_dir"] == str(tmp_path / "data")


def test_every_setting_is_compared_but_those_that_may_change_on_resume(run):
    """Each setting of a real checkpoint's specification, changed alone, is named by the
    comparison (`decoder.num_heads: checkpoint 2, config 3`) unless it is one docs/resume.md
    lists as free to change on resume, which is then not."""
    saved = torch.load(last(run), weights_only=True)["hyper_parameters"]
    resolved = spec.resolved(spec.from_hparams(saved, object))
    leaves = dict(comparison._leaves(resolved))
    assert len(leaves) > 40
    for path, value in leaves.items():
        other = another(value)
        changed = json.loads(json.dumps(resolved))
        set_setting(changed, path, other)
        found = comparison.difference(resolved, changed, ("checkpoint", "config"))
        if comparison.may_differ(path):
            assert found is None, path
        else:
            shown = comparison.shown
            assert found == f"{spec.name(path)}: checkpoint {shown(value)}, config {shown(other)}"


def test_a_part_of_another_class_is_named_by_its_class_alone(run):
    saved = torch.load(last(run), weights_only=True)["hyper_parameters"]
    resolved = spec.resolved(spec.from_hparams(saved, object))
    changed = json.loads(json.dumps(resolved))
    changed["init_args"]["decoder"] = {
        "class_path": "seqtasks.decoders.BahdanauDecoder",
        "init_args": {"hidden_size": 8, "dropout": 0.5},
    }
    assert comparison.difference(resolved, changed, ("checkpoint", "config")) == (
        "decoder.class_path: checkpoint seqtasks.decoders.transformer.TransformerDecoder, config "
        "seqtasks.decoders.bahdanau.BahdanauDecoder"
    )
    respelled = json.loads(json.dumps(resolved))  # the class by the path of its module
    assert respelled["init_args"]["decoder"]["class_path"] == "seqtasks.decoders.TransformerDecoder"
    respelled["init_args"]["decoder"]["class_path"] = (
        "seqtasks.decoders.transformer.TransformerDecoder"
    )
    assert comparison.difference(resolved, respelled, ("checkpoint", "config")) is None


def another(value):
    """A value of a setting unlike `value`."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value * 3 + 1
    if isinstance(value, list):
        return [*value, 1]
    return "another" if isinstance(value, str) else 1


def set_setting(resolved: dict, path: tuple[str, ...], value) -> None:
    """Set the setting at `path` (as `comparison._leaves` names it) of a resolved spec."""
    node, keys = resolved, list(path)
    while keys:
        key = keys.pop(0)
        if key == "class_path" and not keys:
            node["class_path"] = value
            return
        node = node["init_args"] if "class_path" in node else node
        if not keys:
            node[key] = value
            return
        node = node[key]


def test_docs_list_exactly_the_settings_that_may_change_on_resume():
    text = (REPO / "docs/resume.md").read_text()
    section = text.split("## What may change on resume")[1].split("\n## ")[0]
    listed = set(re.findall(r"^\| `(\w+)` \|", section, flags=re.MULTILINE))
    assert listed == comparison.TASK_SETTINGS | comparison.PART_SETTINGS


def edited(checkpoint: Path, path: Path, change) -> Path:
    stored = torch.load(checkpoint, weights_only=True)
    change(stored)
    torch.save(stored, path)
    return path


def test_averaging_a_2_head_with_a_4_head_checkpoint_is_refused(run, tmp_path, run_command):
    four = edited(
        last(run),
        tmp_path / "four.ckpt",
        lambda c: c["hyper_parameters"]["decoder"]["init_args"].update(num_heads=4),
    )
    mean = tmp_path / "mean.ckpt"
    status, out, err = run_command("average", str(last(run)), str(four), "--out", str(mean))
    assert status == 2 and out == "" and not mean.exists()
    assert err == (
        f"error: cannot average {four} with {last(run)}: decoder.num_heads: last.ckpt 2, "
        "four.ckpt 4\n"
    )


def with_source_tokenizer(stored: dict, proto: bytes, record: bool = True) -> None:
    """`stored` (a checkpoint, as torch.load read it) with another source tokeniser, and with
    (`record`) its identity record saying so, as a checkpoint trained with it would, or not, as
    a file altered after it was written would."""
    stored["seqtasks"]["src_tokenizer"] = proto
    if record:
        fingerprints = stored["seqtasks_identity"]["fingerprints"]
        fingerprints["src_tokenizer"] = vars(fingerprint(proto))


def test_averaging_checkpoints_of_other_tokenisers_is_refused(run, bpe_dir, tmp_path, run_command):
    proto = (bpe_dir / "spm.de.model").read_bytes()
    bpe = edited(last(run), tmp_path / "bpe.ckpt", lambda c: with_source_tokenizer(c, proto))
    mean = tmp_path / "mean.ckpt"
    status, out, err = run_command("average", str(last(run)), str(bpe), "--out", str(mean))
    assert status == 2 and out == "" and not mean.exists()
    assert re.fullmatch(
        f"error: cannot average {bpe} with {last(run)}: source tokenizer: last.ckpt unigram 250 "
        f"{SHA}, bpe.ckpt bpe 250 {SHA}\n",
        err,
    ), err


def test_a_checkpoint_whose_tokeniser_was_replaced_afterwards_is_refused(run, bpe_dir, tmp_path):
    proto = (bpe_dir / "spm.de.model").read_bytes()
    altered = edited(
        last(run), tmp_path / "altered.ckpt", lambda c: with_source_tokenizer(c, proto, False)
    )
    with pytest.raises(CheckpointError) as error:
        seqtasks.load(altered)
    assert re.fullmatch(
        rf"{altered}: what it stores is not what it was trained with \(source tokenizer: recorded "
        rf"unigram 250 {SHA}, stored bpe 250 {SHA}\): the file was altered after it was written",
        str(error.value),
    )


NEWER = {  # what a newer seqtasks may have written -> what the one line names
    "format": (
        lambda c: c["seqtasks_identity"].update(format=2, seqtasks_version="9.0.0"),
        "was written by seqtasks 9.0.0 in model format 2; this seqtasks ({v}) reads format 1 "
        "and older: upgrade seqtasks",
    ),
    "option": (
        lambda c: (
            c["seqtasks_identity"].update(seqtasks_version="9.0.0")
            or c["hyper_parameters"]["encoder"]["init_args"].update(rotary_base=10000)
        ),
        "was written by seqtasks 9.0.0 (this is {v}) and names what this seqtasks does not "
        "have: encoder.rotary_base: not a parameter of seqtasks.encoders.TransformerEncoder; "
        "upgrade seqtasks",
    ),
    "class": (
        lambda c: (
            c["seqtasks_identity"].update(seqtasks_version="9.0.0")
            or c["hyper_parameters"]["decoder"].update(class_path="seqtasks.decoders.MambaDecoder")
        ),
        "was written by seqtasks 9.0.0 (this is {v}) and names what this seqtasks does not "
        "have: decoder: class seqtasks.decoders.MambaDecoder, which this seqtasks does not have",
    ),
}


@pytest.mark.parametrize("kind", sorted(NEWER))
@pytest.mark.parametrize("command", ["translate", "average", "export", "serve", "fit"])
def test_a_checkpoint_of_a_newer_seqtasks_is_refused_in_one_line(
    run, kind, command, tmp_path, run_command, capsys
):
    change, says = NEWER[kind]
    newer = edited(last(run), tmp_path / "newer.ckpt", change)
    before = tree(tmp_path, run.parent)
    if command == "fit":
        line = refused(["fit", "--config", str(run), "--ckpt_path", str(newer)], capsys)
    else:
        argv = {
            "translate": ["translate", "--checkpoint", str(newer)],
            "average": ["average", str(newer), str(newer), "--out", str(tmp_path / "mean.ckpt")],
            "export": ["export", str(newer), "--to", "folder", str(tmp_path / "out")],
            "serve": ["serve", str(newer)],
        }[command]
        status, out, err = run_command(*argv, stdin="Ein Hund.\n")
        assert status == 2 and out == "" and err.count("\n") == 1, err
        line = err.strip()
    assert line.startswith("error: ") and str(newer) in line
    assert says.format(v=seqtasks.__version__) in line
    assert tree(tmp_path, run.parent) == before
    if command == "translate":
        with pytest.raises(NewerModelError):
            seqtasks.load(newer)


# ---- a checkpoint written before identity records existed ---------------------------------------
BEFORE = REPO / "tests/fixtures/before_identity"


def test_a_checkpoint_from_before_identity_records_translates_exports_and_resumes(
    run_command, tmp_path
):
    expected = json.loads((BEFORE / "expected.json").read_text())
    dates = "\n".join(expected["dates"]) + "\n"
    checkpoint = tmp_path / "old.ckpt"
    shutil.copy(BEFORE / "translation_transformer.ckpt", checkpoint)
    folder = tmp_path / "folder"
    assert run_command("export", str(checkpoint), "--to", "folder", str(folder))[0] == 0
    for model in (checkpoint, folder):
        for options, key in (
            (["--beam", "3", "--n-best", "3"], "translate --beam 3 --n-best 3"),
            (["--beam", "1"], "translate --beam 1"),
        ):
            status, out, err = run_command("translate", "--checkpoint", str(model), *options,
                                           stdin=dates)  # fmt: skip
            assert status == 0 and out.splitlines() == expected[key], (model, err)
    identity = json.loads((folder / "config.json").read_text())["identity"]
    assert identity["fingerprints"]["src_tokenizer"]["kind"] == "char"
    fit_in_process(
        "--config",
        str(REPO / "configs/translation/dates.yaml"),
        "--config",
        str(REPO / "tests/fixtures/pre_redesign/configs/tiny_transformer.yaml"),
        "--data.init_args.num_train=200",
        f"--data.init_args.data_dir={tmp_path / 'dates'}",
        f"--trainer.default_root_dir={tmp_path / 'run'}",
        "--trainer.max_steps=3",
        "--trainer.logger=false",
        "--trainer.callbacks=[]",
        "--trainer.enable_checkpointing=true",
        "--trainer.max_time=null",
        "--trainer.limit_val_batches=1",
        "--ckpt_path",
        str(checkpoint),
    )
    (resumed,) = (tmp_path / "run").rglob("*.ckpt")
    stored = torch.load(resumed, weights_only=True)
    assert stored["global_step"] == 3 and stored["seqtasks_identity"]["format"] == 1


def test_the_model_card_says_what_the_fit_reached_as_the_hub_reads_it(run, run_command, tmp_path):
    """The README of an exported folder, read by huggingface_hub's own model card parser: its
    library, task, languages, data, and the fit's validation scores with their split."""
    from huggingface_hub import ModelCard

    folder = tmp_path / "de-en"
    assert run_command("export", str(last(run)), "--to", "folder", str(folder))[0] == 0
    identity = json.loads((folder / "config.json").read_text())["identity"]
    card = ModelCard.load(folder / "README.md")
    assert card.data.library_name == "seqtasks" and card.data.pipeline_tag == "translation"
    assert card.data.language == ["de", "en"]
    assert card.data.datasets == [identity["data"]["name"]]
    front = yaml.safe_load((folder / "README.md").read_text().split("---\n")[1])
    assert "license" in front and front["license"] is None  # left for the author
    results = {r.metric_type: (r.metric_value, r.dataset_split) for r in card.data.eval_results}
    recorded = identity["scores"]["metrics"]
    assert results == {
        name.removeprefix("val/"): (value, "val")
        for name, value in recorded.items()
        if name != "val/loss"
    }
    assert {"val/bleu", "val/chrf"} <= recorded.keys() and identity["scores"]["step"] == 2
    assert 'seqtasks.load("hf://ORG/NAME")' in card.text
