"""Shared fixtures. Tests run on one thread: CI machines are small and may be shared."""

from __future__ import annotations

import importlib.util
import io
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

torch.set_num_threads(1)

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"
# tests/ and the folder of each room of the package (tests/<room>/), fixtures/ aside
TEST_FOLDERS = [TESTS] + sorted(
    folder
    for folder in TESTS.iterdir()
    if folder.is_dir() and folder.name not in {"fixtures", "__pycache__"} and folder.name[0] != "."
)
# Tests import helpers and other tests by bare name, but pytest adds only a test's own folder.
sys.path[:0] = [str(folder) for folder in TEST_FOLDERS if str(folder) not in sys.path]


# Modules whose module fixtures are costly (trained checkpoints, a running server): under
# `pytest -n auto` each runs on one worker, so that they are made once, not once per worker.
ONE_WORKER = {"test_serve.py", "test_export.py", "test_fit_checks.py"}
# The longest test (minutes, alone in its module): collected first, so that under `-n auto` a
# worker starts it at once and the others share the rest, rather than all wait on it at the end.
FIRST = "test_readme.py"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.path.name != FIRST)  # stable: the rest keep their order


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """pytest-xdist's `load` distribution (that of `-n auto`), but with the tests of each
    module of ONE_WORKER sent to one worker as one unit (a `LoadScopeScheduling` whose scope is
    that module, and each other test on its own). Its own `loadgroup` cannot do this under
    pytest 9, which no longer lets it rename the tests of a group."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModulesOnOneWorker(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::")[0]
            return module if Path(module).name in ONE_WORKER else nodeid

    return ModulesOnOneWorker(config, log)


def load_script(path: str) -> ModuleType:
    """A script of the repository (`apps/<name>.py`, `bench/<name>.py`, `data_prep/<name>.py`;
    those folders are not packages) loaded as a module, without running its main."""
    name = "script_" + path.replace("/", "_").removesuffix(".py")
    spec = importlib.util.spec_from_file_location(name, REPO / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ../shared/data next to the repository, or where SEQTASKS_SHARED_DATA says (a lent GPU machine,
# where the checkout is copied without its neighbours: bench/gpu_session.sh)
SHARED_DATA = Path(
    os.environ.get("SEQTASKS_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared/data"
)


def _require(path: Path, what: str) -> Path:
    """`path` if it exists; otherwise fail in CI (data must be there) and skip elsewhere."""
    if path.exists():
        return path
    message = f"{what} not found at {path}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message}: CI must provide the shared data", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared data folder (`SHARED_DATA`)."""
    return _require(SHARED_DATA, "shared data")


@pytest.fixture(scope="session")
def multi30k_lines(shared_data: Path) -> dict[str, list[str]]:
    """The first 400 training lines of Multi30k per language (de, en)."""
    from seqtasks.data.text import read_lines

    folder = _require(shared_data / "multi30k", "Multi30k")
    return {lang: read_lines(folder / f"train.{lang}.gz")[:400] for lang in ("de", "en")}


@pytest.fixture(scope="session")
def multi30k_dir(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Multi30k prepared by data_prep/multi30k.py with small (1000-piece) vocabularies."""
    source = _require(shared_data / "multi30k", "Multi30k")
    out = tmp_path_factory.mktemp("multi30k")
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "data_prep" / "multi30k.py"),
            "--source",
            str(source),
            "--out",
            str(out),
            "--vocab-size",
            "1000",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for name in ("spm.de.model", "spm.en.model", "train.de", "val.en", "test_2016_flickr.de"):
        assert (out / name).is_file(), f"data_prep/multi30k.py did not write {name}"
    return out


@pytest.fixture(scope="session")
def child_env() -> dict[str, str]:
    """The environment for `python -m seqtasks …` subprocesses."""
    return subprocess_env()


def with_test_folders(env: dict[str, str]) -> dict[str, str]:
    """`env` with tests/ and its rooms' folders (`TEST_FOLDERS`) on PYTHONPATH, for child
    processes that import test helpers (`faults`, `batch_log`) or test modules by bare name."""
    paths = [*map(str, TEST_FOLDERS), *filter(None, [env.get("PYTHONPATH")])]
    return {**env, "PYTHONPATH": os.pathsep.join(paths)}


def subprocess_env() -> dict[str, str]:
    """The environment for child processes: one thread each."""
    env = dict(os.environ)
    env.update(
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        OMP_WAIT_POLICY="PASSIVE",
        TOKENIZERS_PARALLELISM="false",
    )
    return env


def fresh_python(script: str) -> subprocess.CompletedProcess:
    """`script` run by a new Python in the repository (`subprocess_env`), its output captured:
    for what a test must see from a clean interpreter, such as which modules an import loads."""
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=subprocess_env(),
        timeout=120,
    )


@pytest.fixture(scope="session")
def toy_tokenizers(multi30k_lines):
    """(German, English) sentencepiece models of 250 pieces, trained on 300 Multi30k lines."""
    from seqtasks.data.tokenizer import train_sentencepiece

    return tuple(train_sentencepiece(multi30k_lines[lang][:300], 250) for lang in ("de", "en"))


def write_toy_corpus(folder: Path, tokenizers, splits: dict[str, tuple[list[str], list[str]]]):
    """`spm.{de,en}.model` and `{split}.{de,en}` files in `folder`, as TranslationData reads."""
    folder.mkdir(parents=True, exist_ok=True)
    for lang, tokenizer in zip(("de", "en"), tokenizers):
        (folder / f"spm.{lang}.model").write_bytes(tokenizer.proto)
    for split, sides in splits.items():
        for lang, lines in zip(("de", "en"), sides):
            (folder / f"{split}.{lang}").write_text(
                "".join(f"{line}\n" for line in lines), encoding="utf-8"
            )
    return folder


def write_monolingual(folder: Path, train: list[str], val: list[str], spm: bytes | None = None):
    """`train.txt` and `val.txt` (a sentence a line) in `folder`, and `spm.model` when given,
    as MonolingualData reads them."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, lines in (("train", train), ("val", val)):
        (folder / f"{split}.txt").write_text("".join(f"{line}\n" for line in lines))
    if spm is not None:
        (folder / "spm.model").write_bytes(spm)
    return folder


@pytest.fixture(scope="session")
def toy_data_dir(multi30k_lines, toy_tokenizers, tmp_path_factory) -> Path:
    """A small clean De→En corpus: 200 training, 20 validation and 20 test pairs."""
    de, en = multi30k_lines["de"], multi30k_lines["en"]
    splits = {
        "train": (de[:200], en[:200]),
        "val": (de[300:320], en[300:320]),
        "test_2016_flickr": (de[320:340], en[320:340]),
    }
    return write_toy_corpus(tmp_path_factory.mktemp("toy"), toy_tokenizers, splits)


def prepare_ptb(out: Path) -> Path:
    """The shared PTB sample prepared into `out` by data_prep/ptb.py (once per folder): train
    wsj_0001–0159 (3,396 trees), dev wsj_0160–0179 (273 trees)."""
    if not (out / "dev.mrg").is_file():
        source = _require(SHARED_DATA / "ptb_sample", "PTB")
        result = subprocess.run(
            [sys.executable, str(REPO / "data_prep" / "ptb.py"), "--source", str(source)]
            + ["--out", str(out)],
            capture_output=True,
            text=True,
            env=subprocess_env(),
            timeout=120,
        )
        assert result.returncode == 0, result.stderr[-3000:]
    return out


@pytest.fixture(scope="session")
def ptb_dir(tmp_path_factory) -> Path:
    """The PTB sample as `ParsingData` reads it: {train,dev}.mrg and .txt."""
    return prepare_ptb(tmp_path_factory.mktemp("ptb"))


def flickr8k_subset() -> Path:
    """The shared Flickr8k subset: 900 photos in images/ and captions.txt (5 captions each)."""
    return _require(SHARED_DATA / "flickr8k_subset", "Flickr8k")


def validate_counting_encodings(model, datamodule, monkeypatch) -> tuple[dict[str, float], int]:
    """`Trainer.validate` of `model` in this process, and how many times its encoder ran."""
    import lightning as L

    calls = []
    encode = model.encoder.forward
    monkeypatch.setattr(model.encoder, "forward", lambda *a: calls.append(1) or encode(*a))
    trainer = L.Trainer(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False)
    (metrics,) = trainer.validate(model, datamodule=datamodule, verbose=False)
    monkeypatch.undo()
    return metrics, len(calls)


def relabel(checkpoint: dict, task: str) -> dict:
    """`checkpoint` (as `torch.load` read it) labelled as a `task` checkpoint would be: its
    stored entries' task and its identity record's (a foreign checkpoint, not an altered one)."""
    checkpoint["seqtasks"] = {**checkpoint["seqtasks"], "task": task}
    if "seqtasks_identity" in checkpoint:
        checkpoint["seqtasks_identity"] = {**checkpoint["seqtasks_identity"], "task": task}
    return checkpoint


def save_checkpoint(task_class: type, hparams: dict, prepare, path: Path) -> Path:
    """An untrained `task_class` model built from CLI-style `hparams`, given its vocabulary by
    `prepare(model)`, saved with what `load_from_checkpoint` needs."""
    import lightning as L
    from lightning.pytorch.cli import instantiate_module

    model = instantiate_module(task_class, hparams)
    prepare(model)
    checkpoint = {
        "state_dict": model.state_dict(),
        "hyper_parameters": {
            **hparams,
            "_instantiator": "lightning.pytorch.cli.instantiate_module",
        },
        "pytorch-lightning_version": L.__version__,
    }
    model.on_save_checkpoint(checkpoint)
    torch.save(checkpoint, path)
    return path


def two_step_trainer(root: Path) -> dict:
    """The `trainer` section of a config that trains 2 steps on the CPU, validates one batch,
    and keeps only its checkpoint (under `root`): enough to build, train, save and reload."""
    return {
        "max_steps": 2,
        "accelerator": "cpu",
        "logger": False,
        "callbacks": [],
        "enable_checkpointing": True,
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "limit_val_batches": 1,
        "num_sanity_val_steps": 0,
        "default_root_dir": str(root),
    }


@pytest.fixture
def run_command(monkeypatch, capsys):
    """run_command(*argv, stdin="") -> (exit status, stdout, stderr) of `seqtasks ARGV`, run in
    this process (a subprocess spends seconds importing torch); stdin is decoded by the command,
    as from a pipe."""
    from seqtasks.cli.commands import main

    def run(*argv: str, stdin: str = "") -> tuple[int, str, str]:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
        capsys.readouterr()
        status = main(list(argv))
        out, err = capsys.readouterr()
        return status, out, err

    return run


def fit_in_process(*argv: str) -> None:
    """`seqtasks fit ARGV` in this process (for a module fixture: no `monkeypatch` there)."""
    from seqtasks.cli.commands import main

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "argv", ["seqtasks"])  # what jsonargparse names the program
        assert main(["fit", *argv]) == 0
