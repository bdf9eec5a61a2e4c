"""Model folders (`seqtasks export --to folder`): one of each task and decoder family (RNN,
Show-Attend-Tell soft and hard, Transformer with shared embeddings) loads with the checkpoint's
weights, tokenisers and search settings, and every caller (`seqtasks.load`, the commands, an
ensemble, `export --to ctranslate2`) gives the same outputs from it as from the checkpoint; the
folder holds nothing that can carry a pickle, and reading it unpickles nothing; a missing,
truncated, foreign, newer or malformed file is named in one line."""

from __future__ import annotations

import json
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import save_checkpoint, subprocess_env
from PIL import Image
from test_bad_input import LUONG, RNN, sample_trees

import seqtasks
from seqtasks.captioning.task import CaptioningTask
from seqtasks.cli.export import main as export
from seqtasks.data.words import WordTokenizer
from seqtasks.io.checkpoint_files import CheckpointError
from seqtasks.model_files.identity import NewerModelError
from seqtasks.parsing.task import ParsingTask
from seqtasks.parsing.vocabulary import ParsingVocabulary
from seqtasks.translation.task import TranslationTask

SENTENCES = ["Ein Hund rennt.", "", "Zwei Männer spielen Fußball im Park.", "Eine Frau."]
WORDS = ["The dog barked .", "Stocks rose sharply in early trading .", "He said no ."]
TRANSFORMER = {"d_model": 16, "num_heads": 2, "num_layers": 1, "ff_dim": 32}
BAHDANAU = {
    "class_path": "seqtasks.decoders.BahdanauDecoder",
    "init_args": {"embed_dim": 8, "hidden_size": 16, "readout_dim": 8},
}
CONV = {"class_path": "seqtasks.encoders.ConvEncoder", "init_args": {"channels": [4, 8]}}
SIZES = {"embed_dim": 8, "hidden_size": 8}
SOFT = {"class_path": "seqtasks.decoders.SoftAttentionDecoder", "init_args": SIZES}
HARD = {"class_path": "seqtasks.decoders.HardAttentionDecoder", "init_args": SIZES}
ALLOWED = {"model.safetensors", "config.json", "README.md", "source.spm", "target.spm"}
ALLOWED |= {"vocabulary.json"}


def translator(path: Path, tokenizers, **parts) -> Path:
    src, tgt = tokenizers
    hparams = {"_class_path": "seqtasks.translation.task.TranslationTask", **parts}
    hparams |= {"src_vocab_size": src.vocab_size, "tgt_vocab_size": tgt.vocab_size}
    return save_checkpoint(TranslationTask, hparams, lambda m: m.set_tokenizers(src, tgt), path)


def captioner(path: Path, decoder: dict) -> Path:
    words = WordTokenizer(["a", "dog", "runs", "red", "circle"])
    hparams = {"_class_path": "seqtasks.captioning.task.CaptioningTask", "encoder": CONV}
    hparams |= {"decoder": decoder, "tgt_vocab_size": words.vocab_size}
    return save_checkpoint(CaptioningTask, hparams, lambda m: m.set_preprocessing(words, 32), path)


def parser(path: Path) -> Path:
    vocabulary = ParsingVocabulary.build(sample_trees(20), tags=True, reverse=True, min_count=1)
    hparams = {"_class_path": "seqtasks.parsing.task.ParsingTask", "encoder": RNN, "decoder": LUONG}
    hparams |= {"src_vocab_size": len(vocabulary.words), "tgt_vocab_size": len(vocabulary.tokens)}
    return save_checkpoint(ParsingTask, hparams, lambda m: m.set_vocabulary(vocabulary), path)


def family_checkpoints(folder: Path, toy_tokenizers) -> dict[str, Path]:
    """One tiny untrained checkpoint of each task and decoder family, in `folder`."""
    torch.manual_seed(0)
    joint = (toy_tokenizers[1], toy_tokenizers[1])
    transformer = {
        "encoder": {"class_path": "seqtasks.encoders.TransformerEncoder", "init_args": TRANSFORMER},
        "decoder": {"class_path": "seqtasks.decoders.TransformerDecoder", "init_args": TRANSFORMER},
    }
    return {
        "rnn": translator(  # search settings of its own, which its folder must keep
            folder / "rnn.ckpt",
            toy_tokenizers,
            encoder=RNN,
            decoder=BAHDANAU,
            test_beam=3,
            length_alpha=0.6,
            beam_stop="heuristic",
            max_length_offset=7,
        ),
        "transformer": translator(
            folder / "transformer.ckpt", joint, **transformer, share_embeddings=True
        ),
        "parsing": parser(folder / "parsing.ckpt"),
        "soft": captioner(folder / "soft.ckpt", SOFT),
        "hard": captioner(folder / "hard.ckpt", HARD),
    }


def exported(checkpoints: dict[str, Path], root: Path) -> dict[str, Path]:
    """Each checkpoint exported by `seqtasks export --to folder` into `root`."""
    for name, checkpoint in checkpoints.items():
        assert export([str(checkpoint), "--to", "folder", str(root / name)]) == 0
    return {name: root / name for name in checkpoints}


def some_images() -> list[Image.Image]:
    draw = np.random.default_rng(0)
    return [Image.fromarray(draw.integers(0, 256, (40, 48, 3), dtype=np.uint8)) for _ in range(3)]


@pytest.fixture(scope="module")
def checkpoints(toy_tokenizers, tmp_path_factory) -> dict[str, Path]:
    return family_checkpoints(tmp_path_factory.mktemp("checkpoints"), toy_tokenizers)


@pytest.fixture(scope="module")
def folders(checkpoints, tmp_path_factory) -> dict[str, Path]:
    return exported(checkpoints, tmp_path_factory.mktemp("folders"))


@pytest.fixture(scope="module")
def images() -> list[Image.Image]:
    return some_images()


def outputs(model, images) -> list[tuple]:
    """Everything a model's results hold, n-best lists and attention included, as plain data
    (attention as exact float64 lists: equal means bit for bit)."""

    def exact(result) -> tuple:
        attention = getattr(result, "attention", None)
        attention = None if attention is None else attention.double().tolist()
        pieces = getattr(result, "tokens", None) or getattr(result, "words", None)
        return (result.text, pieces, result.score, attention)

    if isinstance(model, seqtasks.Translator):
        results = model.translate(SENTENCES, beam=3, n_best=2, attention=True)
        results += model.translate(SENTENCES)  # greedy, the model's own settings
    elif isinstance(model, seqtasks.Parser):
        results = model.parse(WORDS, beam=3, n_best=2) + model.parse(WORDS)
    else:
        results = model.caption(images, beam=2, n_best=2, attention=True) + model.caption(images)
    return [(exact(r), [exact(a) for a in r.alternatives]) for r in results]


@pytest.mark.parametrize("name", ["rnn", "transformer", "parsing", "soft", "hard"])
def test_a_folder_is_its_checkpoint(name, checkpoints, folders, images):
    from_checkpoint, from_folder = seqtasks.load(checkpoints[name]), seqtasks.load(folders[name])
    assert type(from_folder) is type(from_checkpoint)
    ours, theirs = from_folder.task.state_dict(), from_checkpoint.task.state_dict()
    assert ours.keys() == theirs.keys()
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)
    assert from_folder.search_settings() == from_checkpoint.search_settings()
    assert outputs(from_folder, images) == outputs(from_checkpoint, images)


def test_a_folder_holds_no_pickle_and_loading_it_unpickles_nothing(folders, monkeypatch):
    for folder in folders.values():
        assert {p.name for p in folder.iterdir()} <= ALLOWED, sorted(folder.iterdir())
        assert (folder / "model.safetensors").read_bytes()[8:9] == b"{"  # a JSON header

    def refuse(*args, **kwargs):
        raise AssertionError("loading a model folder unpickled something")

    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "Unpickler", refuse)
    monkeypatch.setattr(torch, "load", refuse)
    for folder in folders.values():
        seqtasks.load(folder)


def test_tied_embeddings_are_stored_once_and_tied_again(folders):
    from safetensors import safe_open

    with safe_open(folders["transformer"] / "model.safetensors", "pt") as weights:
        names = set(weights.keys())
    task = seqtasks.load(folders["transformer"]).task
    assert "decoder.embeddings.embedding.weight" not in names
    assert task.decoder.embedding.weight is task.encoder.embedding.weight


def test_commands_ensembles_and_ctranslate2_take_a_folder(
    checkpoints, folders, run_command, tmp_path
):
    ckpt, folder = str(checkpoints["rnn"]), str(folders["rnn"])
    text = "\n".join(SENTENCES) + "\n"
    for models in ([ckpt], [ckpt, ckpt]):  # alone, and as an ensemble with the checkpoint
        expected = run_command("translate", "--checkpoint", *models, "--n-best", "2", stdin=text)
        mixed = [folder if i == 0 else m for i, m in enumerate(models)]
        assert run_command("translate", "--checkpoint", *mixed, "--n-best", "2", stdin=text) == (
            expected
        )
    src, ref = tmp_path / "src.de", tmp_path / "ref.en"
    src.write_text(text)
    ref.write_text("A dog runs.\n\nTwo men play football in the park.\nA woman.\n")
    scores = []
    for model in (ckpt, folder):
        status, out, _ = run_command(
            "evaluate", "translation", "--checkpoint", model, "--src", str(src), "--ref", str(ref),
            "--json",
        )  # fmt: skip
        report = json.loads(out.splitlines()[-1])
        scores.append({k: v for k, v in report.items() if k not in ("checkpoint", "models")})
    assert scores[0] == scores[1] and "bleu" in scores[0]
    words = "\n".join(WORDS) + "\n"
    parsed = [
        run_command("parse", "--checkpoint", str(m), "--beam", "2", stdin=words)
        for m in (checkpoints["parsing"], folders["parsing"])
    ]
    assert parsed[0] == parsed[1] and parsed[0][0] == 0
    image = tmp_path / "image.png"
    Image.fromarray(np.full((32, 32, 3), 200, dtype=np.uint8)).save(image)
    captions = [
        run_command("caption", str(image), "--checkpoint", str(m))[:2]
        for m in (checkpoints["hard"], folders["hard"])
    ]  # fmt: skip (stderr: the time taken)
    assert captions[0] == captions[1] and captions[0][0] == 0
    converted = []
    for i, source in enumerate((checkpoints["transformer"], folders["transformer"])):
        out = tmp_path / f"ct2-{i}"
        assert export([str(source), "--to", "ctranslate2", str(out)]) == 0
        converted.append({p.name: p.read_bytes() for p in out.iterdir() if p.suffix != ".md"})
    del converted[0]["seqtasks_export.json"], converted[1]["seqtasks_export.json"]
    assert converted[0] == converted[1]


def test_a_folder_of_another_task_or_to_average_is_refused_by_name(
    checkpoints, folders, run_command, tmp_path, capsys
):
    status, _, err = run_command("parse", "--checkpoint", str(folders["rnn"]), stdin="a b\n")
    assert status == 2
    assert err == f"error: {folders['rnn']} is a translation model folder, not a parsing one\n"
    mean = tmp_path / "mean.ckpt"
    with pytest.raises(SystemExit) as stop:  # an argparse error
        run_command("average", str(folders["rnn"]), str(checkpoints["rnn"]), "--out", str(mean))
    assert stop.value.code == 2 and not mean.exists()
    assert f"argument checkpoints: {folders['rnn']} is a model folder: average takes" in (
        capsys.readouterr().err
    )


def damaged_copy(folder: Path, tmp_path: Path, change) -> Path:
    copy = tmp_path / folder.name
    shutil.copytree(folder, copy)
    change(copy)
    return copy


def with_config(change):
    def edit(folder: Path) -> None:
        config = json.loads((folder / "config.json").read_text())
        change(config)
        (folder / "config.json").write_text(json.dumps(config))

    return edit


def swap_files(folder: Path, a: str, b: str) -> None:
    """Swap the files `a` and `b`, and what config.json says of their sizes and sums (not which
    entry each holds): every file matches config.json, but not the identity's fingerprints."""
    first, second = (folder / a).read_bytes(), (folder / b).read_bytes()
    (folder / a).write_bytes(second)
    (folder / b).write_bytes(first)

    def swap(config: dict) -> None:
        files = config["files"]
        for key in ("size", "sha256"):
            files[a][key], files[b][key] = files[b][key], files[a][key]

    with_config(swap)(folder)


BAD_FOLDERS = {  # what is done to a copy of the rnn folder -> what the one line says
    "missing": (
        lambda f: (f / "target.spm").unlink(),
        "{f}/target.spm is missing: config.json lists it, so the model folder is incomplete",
    ),
    "truncated": (
        lambda f: (f / "model.safetensors").write_bytes(
            (f / "model.safetensors").read_bytes()[:1000]
        ),
        "{f}/model.safetensors has 1000 bytes where config.json says ",
    ),
    "foreign": (
        lambda f: shutil.copy(f / "target.spm", f / "source.spm"),
        "{f}/source.spm has ",
    ),
    "same-sized foreign weights": (
        lambda f: (f / "model.safetensors").write_bytes(
            bytes(reversed((f / "model.safetensors").read_bytes()))
        ),
        "{f}/model.safetensors is not the file this model was saved with (sha256 ",
    ),
    "tokenisers swapped, config.json's sums too": (
        lambda f: swap_files(f, "source.spm", "target.spm"),
        "{f}: its files are not those it was trained with: source tokenizer: config.json ",
    ),
    "not json": (
        lambda f: (f / "config.json").write_text("{'model': 1"),
        "{f}/config.json is not valid JSON (line 1, column 2: ",
    ),
    "another library's": (
        with_config(lambda c: c.update(library_name="transformers")),
        "{f}/config.json is not a seqtasks model's (library_name: transformers)",
    ),
    "newer format": (
        with_config(lambda c: c["identity"].update(format=2, seqtasks_version="9.0.0")),
        "{f} was written by seqtasks 9.0.0 in model format 2; this seqtasks (",
    ),
    "newer option": (
        with_config(
            lambda c: (
                c["identity"].update(seqtasks_version="9.0.0")
                or c["model"]["init_args"]["encoder"]["init_args"].update(rotary=True)
            )
        ),
        "{f} was written by seqtasks 9.0.0 (this is {v}) and names what this seqtasks does not "
        "have: encoder.rotary: not a parameter of seqtasks.encoders.RNNEncoder; upgrade",
    ),
    "newer class": (
        with_config(
            lambda c: c["model"]["init_args"]["decoder"].update(
                class_path="seqtasks.decoders.FancyDecoder"
            )
        ),
        "{f} was written by seqtasks {v} and names what this seqtasks does not have: decoder: "
        "class seqtasks.decoders.FancyDecoder, which this seqtasks does not have; upgrade",
    ),
    "a function as a part's class": (
        with_config(lambda c: c["model"]["init_args"]["decoder"].update(class_path="os.system")),
        "{f}: decoder: os.system is not a module, optimiser or scheduler class, which is all a "
        "seqtasks model file may name; not loaded",
    ),
    "a function named": (
        with_config(
            lambda c: c["model"]["init_args"]["decoder"]["init_args"].update(attention="os.system")
        ),
        "{f}: decoder.attention: os.system is not a module, optimiser or scheduler class, which "
        "is all a seqtasks model file may name; not loaded",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_FOLDERS))
def test_a_bad_folder_is_named_in_one_line(case, folders, run_command, tmp_path, monkeypatch):
    change, message = BAD_FOLDERS[case]
    folder = damaged_copy(folders["rnn"], tmp_path, change)
    ran = []
    monkeypatch.setattr("os.system", lambda *a: ran.append(a))
    status, out, err = run_command("translate", "--checkpoint", str(folder), stdin="Ein Hund.\n")
    assert status == 2 and out == "" and not ran
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("error: " + message.format(f=folder, v=seqtasks.__version__)), err


def test_a_newer_model_raises_newer_model_error(folders, tmp_path):
    change = BAD_FOLDERS["newer option"][0]
    with pytest.raises(NewerModelError):
        seqtasks.load(damaged_copy(folders["rnn"], tmp_path, change))
    with pytest.raises(CheckpointError, match="is a folder, not a checkpoint file|no config"):
        seqtasks.load(tmp_path)


def test_the_same_checkpoint_exports_to_the_same_bytes(checkpoints, folders, tmp_path):
    """So a folder's SHA-256 sums, and a Hub revision's, are the model's, not the export's: in
    another process, whose sets and dicts of strings hash otherwise."""
    again = tmp_path / "rnn"
    command = [sys.executable, "-m", "seqtasks", "export", str(checkpoints["rnn"])]
    env = subprocess_env() | {"PYTHONHASHSEED": "12345"}
    done = subprocess.run([*command, "--to", "folder", str(again)], env=env, capture_output=True)
    assert done.returncode == 0, done.stderr
    assert {p.name: p.read_bytes() for p in again.iterdir()} == {
        p.name: p.read_bytes() for p in folders["rnn"].iterdir()
    }
