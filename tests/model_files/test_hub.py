"""Models by name: `hf://ORG/NAME[@REVISION]` through the real `huggingface_hub` download code,
against a server on 127.0.0.1 that answers as the Hub's file API does (`hub_server.LocalHub`),
and from a cache filled in the Hub's own layout with HF_HUB_OFFLINE=1 (`hub_server.fill_cache`):
the model loads with the checkpoint's outputs, is kept in the Hub's cache and read from there
next time (offline too), and every failure is one line naming what and where."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import huggingface_hub
import pytest
from conftest import subprocess_env
from hub_server import LocalHub, fill_cache, repo_commit
from test_model_folders import SENTENCES, exported, family_checkpoints, outputs, some_images

import seqtasks
from seqtasks.io.checkpoint_files import CheckpointError
from seqtasks.serving.served import group_by_task


@pytest.fixture(scope="module")
def families(toy_tokenizers, tmp_path_factory) -> tuple[dict[str, Path], dict[str, Path]]:
    """(a checkpoint of each task and decoder family, its model folder), by family."""
    checkpoints = family_checkpoints(tmp_path_factory.mktemp("checkpoints"), toy_tokenizers)
    return checkpoints, exported(checkpoints, tmp_path_factory.mktemp("folders"))


@pytest.fixture(scope="module")
def model(families) -> tuple[Path, Path]:
    """(a translation checkpoint, its model folder)."""
    return families[0]["rnn"], families[1]["rnn"]


@pytest.fixture
def hub(families, tmp_path, monkeypatch):
    """A Hub serving the translation folder as org/de-en (also as tag v1) and each family's
    folder as org/NAME, with an empty cache of its own."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "cache"))
    repos = {"org/de-en": families[1]["rnn"]} | {f"org/{n}": f for n, f in families[1].items()}
    with LocalHub(repos, tags={"org/de-en": ["v1"]}) as local:
        monkeypatch.setenv("HF_ENDPOINT", local.url)
        yield local


@pytest.mark.parametrize("name", ["rnn", "transformer", "parsing", "soft", "hard"])
def test_each_task_loads_by_name_as_its_checkpoint_online_then_offline(
    name, families, hub, monkeypatch
):
    images = some_images()
    expected = outputs(seqtasks.load(families[0][name]), images)
    assert outputs(seqtasks.load(f"hf://org/{name}"), images) == expected
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    assert outputs(seqtasks.load(f"hf://org/{name}"), images) == expected


def test_a_hub_model_is_the_checkpoint_and_is_read_from_the_cache_next_time(
    model, hub, tmp_path, monkeypatch
):
    expected = outputs(seqtasks.load(model[0]), [])
    loaded = seqtasks.load("hf://org/de-en")
    assert outputs(loaded, []) == expected
    commit = repo_commit(model[1])
    snapshot = tmp_path / "cache/models--org--de-en/snapshots" / commit
    assert sorted(p.name for p in snapshot.iterdir()) == sorted(p.name for p in model[1].iterdir())
    assert loaded.checkpoints == [f"hf://org/de-en@{commit[:12]}"]
    served = len(hub.downloads())
    for name in ("hf://org/de-en", f"hf://org/de-en@{commit}", "hf://org/de-en@v1"):
        assert outputs(seqtasks.load(name), []) == expected
    assert len(hub.downloads()) == served, "a cached model is downloaded again"
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    requests = len(hub.requests)
    assert outputs(seqtasks.load("hf://org/de-en"), []) == expected
    assert len(hub.requests) == requests, "offline, the Hub was asked"


def test_commands_and_serve_take_a_hub_name(model, hub, run_command, tmp_path):
    text = "\n".join(SENTENCES) + "\n"
    expected = run_command("translate", "--checkpoint", str(model[0]), "--beam", "2", stdin=text)
    got = run_command("translate", "--checkpoint", "hf://org/de-en", "--beam", "2", stdin=text)
    assert got == expected and expected[0] == 0
    groups = group_by_task(["hf://org/de-en"])
    (path,) = groups["translation"].paths
    assert Path(path).parent.parent.name == "models--org--de-en"  # the cached copy
    (name,) = groups["translation"].names  # as the page and /models name it
    assert name.startswith("hf://org/de-en@"), name
    assert run_command("export", "hf://org/de-en", "--to", "folder", str(tmp_path / "o"))[0] == 0
    copied = {p.name: p.read_bytes() for p in (tmp_path / "o").iterdir() if p.name != "README.md"}
    assert copied == {p.name: p.read_bytes() for p in model[1].iterdir() if p.name != "README.md"}


def test_a_cache_in_the_hubs_layout_is_read_offline_by_a_new_process(model, tmp_path):
    cache = tmp_path / "cache"
    fill_cache(cache, "org/cached", model[1])
    env = subprocess_env() | {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache)}
    env["HF_ENDPOINT"] = "http://127.0.0.1:9"  # nothing listens: a request would fail
    command = [sys.executable, "-m", "seqtasks", "translate", "--checkpoint", "hf://org/cached"]
    text = "\n".join(SENTENCES) + "\n"
    done = subprocess.run(command, input=text, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    expected = seqtasks.load(model[0]).translate(SENTENCES)
    assert done.stdout.splitlines() == [t.text for t in expected]


def test_hub_failures_are_one_line_naming_what_and_where(model, hub, tmp_path, run_command):
    cache = tmp_path / "cache"
    cases = {
        "hf://org/nope": f"error: hf://org/nope: no model org/nope on {hub.url} (or it is "
        "private or gated: log in with `hf auth login`)\n",
        "hf://org/de-en@v2": f"error: hf://org/de-en@v2: org/de-en on {hub.url} has no "
        "revision 'v2'\n",
        "hf://org": "error: 'hf://org' is not a Hub model name: write hf://ORG/NAME or "
        "hf://ORG/NAME@REVISION\n",
    }
    for name, message in cases.items():
        assert run_command("translate", "--checkpoint", name, stdin="a\n") == (2, "", message)
    commit = repo_commit(model[1])
    status, _, err = run_command("parse", "--checkpoint", "hf://org/de-en", stdin="a b\n")
    assert (status, err) == (
        2,
        f"error: hf://org/de-en@{commit[:12]} is a translation model folder, not a parsing one\n",
    )
    blob = (cache / "models--org--de-en/snapshots" / commit / "target.spm").resolve()
    blob.write_bytes(blob.read_bytes()[:100])  # a damaged copy in the cache
    status, _, err = run_command("translate", "--checkpoint", "hf://org/de-en", stdin="a\n")
    assert status == 2 and err.startswith(f"error: {cache.resolve()}/models--org--de-en/")
    assert "target.spm has 100 bytes where config.json says" in err


def test_offline_without_a_cached_copy(model, tmp_path, monkeypatch):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(CheckpointError) as error:
        seqtasks.load("hf://org/de-en")
    assert str(error.value) == (
        f"hf://org/de-en: not in the Hub cache ({tmp_path / 'empty'}), and downloads are off "
        "(HF_HUB_OFFLINE=1): load it once online first"
    )
