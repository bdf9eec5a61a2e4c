"""Models by name: `hf://ORG/NAME[@REVISION]` through the real `huggingface_hub` download code,
against a server on 127.0.0.1 that answers as the Hub's file API does (`hub_server.LocalHub`),
and from a cache filled in the Hub's own layout with HF_HUB_OFFLINE=1 (`hub_server.fill_cache`):
the model loads with the checkpoint's outputs, is kept in the Hub's cache and read from there
next time (offline too), and every failure is one line naming what and where. A name is checked
as the Hub allows it before anything is opened, and a crafted cache (refs or links leading out of
it) is refused, never loaded."""

from __future__ import annotations

import shutil
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
from seqtasks.model_files.hub import HubName, download, parse_name
from seqtasks.serving.served import group_by_task

REVISION = "is not a branch, tag or commit the Hub allows"
REPO = "is not one the Hub allows"


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
    """A Hub serving the translation folder as org/de-en (also as tag v1, branch release/1.0 and
    pull request refs/pr/3) and each family's folder as org/NAME, with an empty cache of its own."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "cache"))
    repos = {"org/de-en": families[1]["rnn"]} | {f"org/{n}": f for n, f in families[1].items()}
    tags = {"org/de-en": ["v1", "release/1.0", "refs/pr/3"]}
    with LocalHub(repos, tags=tags) as local:
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


REFUSED_REVISIONS = {  # revision: what is wrong with it
    "../../../elsewhere/ref": "it holds '..'",
    "main/../x": "it holds '..'",
    "..": "it holds '..'",
    "/etc/x": "it starts with '/'",
    "%2e%2e%2fx": "it holds '%'",
    "\uff0e\uff0e\uff0fx": "it holds '\uff0e'",  # fullwidth '.' and '/'
    "": "it is empty",
    "@": "it is '@'",
    "a b": "it holds ' '",
    **{f"a{c}b": f"it holds '{c}'" for c in "~^:?*["},
    "main.lock": "a part of it ends with '.lock'",
    "a/.b": "a part of it starts with '.'",
    "a//b": "it holds '//'",
    "a/": "it ends with '/'",
    "a.": "it ends with '.'",
    "a@{1}": "it holds '@{'",
    "-x": "it starts with '-'",
    "refs/pr/abc": "of refs/ the Hub serves only pull requests, refs/pr/N",
    "refs/heads/main": "of refs/ the Hub serves only pull requests, refs/pr/N",
}
REFUSED_REPOS = {  # ORG/NAME: what is wrong with it
    "a/b..c": "it holds '..'",
    "a--b/c": "it holds '--'",
    "org/.x": "a part of it starts or ends with '-' or '.'",
    "org/x-": "a part of it starts or ends with '-' or '.'",
    "org/x.git": "it ends with '.git'",
    "org/" + "x" * 97: "a part of it is longer than 96 characters",
    "org/na me": "it holds ' '; the Hub allows letters, digits, '-', '_' and '.'",
}


def refusal(name: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The message `download(name)` raises, with huggingface_hub made impossible to import."""
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    with pytest.raises(CheckpointError) as error:
        download(name)
    return str(error.value)


@pytest.mark.parametrize(("revision", "fault"), REFUSED_REVISIONS.items())
def test_a_revision_the_hub_does_not_allow_is_refused_before_anything_is_read(
    revision, fault, monkeypatch
):
    name = f"hf://org/name@{revision}"
    assert refusal(name, monkeypatch) == f"{name}: the revision {revision!r} {REVISION} ({fault})"


@pytest.mark.parametrize(("repo", "fault"), REFUSED_REPOS.items())
def test_a_repo_id_the_hub_does_not_allow_is_refused_before_anything_is_read(
    repo, fault, monkeypatch
):
    assert (
        refusal(f"hf://{repo}", monkeypatch)
        == f"hf://{repo}: the repo id {repo!r} {REPO} ({fault})"
    )


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "hf://org/name@a\\..\\x",
            f"hf://org/name@a\\..\\x: the revision 'a\\\\..\\\\x' {REVISION} (it holds '\\\\')",
        ),
        (
            "hf://org/name@x\x00y",
            f"hf://org/name@x\\x00y: the revision 'x\\x00y' {REVISION} (it holds '\\x00')",
        ),
        (
            "hf://org/name@x\ny",
            f"hf://org/name@x\\ny: the revision 'x\\ny' {REVISION} (it holds '\\n')",
        ),
        (
            "hf://org/na\u2028me",
            f"hf://org/na\\u2028me: the repo id 'org/na\\u2028me' {REPO} (it holds '\\u2028'; "
            "the Hub allows letters, digits, '-', '_' and '.')",
        ),
        (
            "hf:///name",
            "'hf:///name' is not a Hub model name: write hf://ORG/NAME or hf://ORG/NAME@REVISION",
        ),
        (
            "hf://org/name/x",
            "'hf://org/name/x' is not a Hub model name: write hf://ORG/NAME or hf://ORG/NAME@REVISION",
        ),
    ],
)
def test_a_refused_name_is_shown_in_one_line_with_backslashes_and_controls_escaped(
    name, message, monkeypatch
):
    assert refusal(name, monkeypatch) == message


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("hf://org/name", HubName("org/name")),
        ("hf://Org_1/na.me-2", HubName("Org_1/na.me-2")),
        ("hf://org/" + "x" * 96, HubName("org/" + "x" * 96)),
        ("hf://org/name@main", HubName("org/name", "main")),
        ("hf://org/name@v1.0", HubName("org/name", "v1.0")),
        ("hf://org/name@release/1.0-rc_2", HubName("org/name", "release/1.0-rc_2")),
        (
            "hf://org/name@" + "0123456789abcdef" * 2 + "01234567",
            HubName("org/name", "0123456789abcdef" * 2 + "01234567"),
        ),
        ("hf://org/name@abc1234", HubName("org/name", "abc1234")),
        ("hf://org/name@refs/pr/3", HubName("org/name", "refs/pr/3")),
    ],
)
def test_names_the_hub_allows_are_taken(name, parsed):
    assert parse_name(name) == parsed


@pytest.mark.parametrize("revision", ["release/1.0", "refs/pr/3"])
def test_a_branch_with_a_slash_and_a_pull_request_load_online_then_offline(
    revision, model, hub, monkeypatch
):
    expected = outputs(seqtasks.load(model[0]), [])
    assert outputs(seqtasks.load(f"hf://org/de-en@{revision}"), []) == expected
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    assert outputs(seqtasks.load(f"hf://org/de-en@{revision}"), []) == expected


@pytest.fixture
def crafted(model, tmp_path, monkeypatch) -> tuple[Path, Path, str]:
    """(the folder of org/de-en in a Hub cache holding the translation folder, a copy of that
    folder outside the cache for crafted refs and links to lead to, the commit); the cache is
    huggingface_hub's, offline unless a test serves the Hub."""
    cache = tmp_path / "cache"
    commit = fill_cache(cache, "org/de-en", model[1])
    elsewhere = shutil.copytree(model[1], tmp_path / "elsewhere")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    return cache.resolve() / "models--org--de-en", elsewhere, commit


def offline_folder(revision: str = "main") -> Path:
    """The folder huggingface_hub itself gives for org/de-en from the cache."""
    return Path(huggingface_hub.snapshot_download("org/de-en", revision=revision)).resolve()


def test_offline_a_refs_file_leading_out_of_the_cache_is_refused(crafted):
    storage, elsewhere, commit = crafted
    (storage / "refs/main").write_text("../../../elsewhere")
    assert offline_folder() == elsewhere  # what huggingface_hub would load
    with pytest.raises(CheckpointError) as error:
        seqtasks.load("hf://org/de-en")
    assert str(error.value) == (
        f"hf://org/de-en: {storage}/refs/main holds '../../../elsewhere', not a commit: not read"
    )
    (storage / "refs/main").unlink()
    (elsewhere / "main").write_text(commit)
    (storage / "refs/main").symlink_to(elsewhere / "main")
    with pytest.raises(CheckpointError) as error:
        seqtasks.load("hf://org/de-en")
    assert str(error.value) == (
        f"hf://org/de-en: {storage}/refs/main leads to {elsewhere}/main, outside {storage}: "
        "not read"
    )


@pytest.mark.parametrize("offline", [True, False], ids=["offline", "online"])
def test_a_cached_snapshot_leading_out_of_the_cache_is_refused(
    offline, crafted, request, monkeypatch
):
    storage, elsewhere, commit = crafted
    if not offline:
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
        hub = request.getfixturevalue("hub")  # the same cache, with the Hub to ask
    snapshot = storage / "snapshots" / commit
    (snapshot / "config.json").unlink()
    (snapshot / "config.json").symlink_to(elsewhere / "config.json")
    with pytest.raises(CheckpointError) as error:
        seqtasks.load("hf://org/de-en")
    assert str(error.value) == (
        f"hf://org/de-en: {snapshot}/config.json leads to {elsewhere}/config.json, outside "
        f"{storage}: not read"
    )
    shutil.rmtree(snapshot)
    snapshot.symlink_to(elsewhere)
    with pytest.raises(CheckpointError) as error:
        seqtasks.load("hf://org/de-en")
    assert str(error.value) == (
        f"hf://org/de-en: huggingface_hub gives {snapshot}, which leads to {elsewhere}, not to a "
        f"commit's folder in {storage}/snapshots: not read"
    )
    assert offline or hub.requests, "the Hub was not asked"


def test_a_snapshot_named_by_no_commit_or_with_a_loop_of_links_is_refused(crafted, monkeypatch):
    storage, elsewhere, commit = crafted
    snapshot = storage / "snapshots" / commit
    (snapshot / "loop").symlink_to("loop")
    with pytest.raises(CheckpointError) as error:
        seqtasks.load("hf://org/de-en")
    assert str(error.value).startswith("hf://org/de-en: its copy in the Hub cache cannot be read: ")
    assert f"{snapshot}/loop" in str(error.value)
    (snapshot / "loop").unlink()
    copy = shutil.copytree(snapshot, storage / "snapshots/main-copy", symlinks=True)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda *a, **k: str(copy))
    with pytest.raises(CheckpointError) as error:
        seqtasks.load("hf://org/de-en")
    assert str(error.value) == (
        f"hf://org/de-en: huggingface_hub gives {copy}, which leads to {copy}, not to a commit's "
        f"folder in {storage}/snapshots: not read"
    )


def test_huggingface_hubs_own_refusal_of_a_name_is_one_line(monkeypatch):
    def refuse(*args: object, **kwargs: object) -> str:
        raise huggingface_hub.errors.HFValidationError("Repo id must be 'x'.\nSee the docs.")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", refuse)
    with pytest.raises(CheckpointError) as error:
        seqtasks.load("hf://org/de-en")
    assert str(error.value) == "hf://org/de-en: huggingface_hub refuses it: Repo id must be 'x'."


def test_the_command_refuses_a_revision_climbing_out_of_the_cache_in_one_line(model, tmp_path):
    cache = tmp_path / "cache"
    fill_cache(cache, "org/name", model[1])
    shutil.copytree(model[1], tmp_path / "elsewhere")
    (cache / "x").write_text(
        "../../../elsewhere"
    )  # refs/../../x, naming snapshots/../../../elsewhere
    name = "hf://org/name@../../x"
    followed = huggingface_hub.snapshot_download(
        "org/name", revision="../../x", cache_dir=cache, local_files_only=True
    )
    assert Path(followed).resolve() == (tmp_path / "elsewhere").resolve()  # without the check
    env = subprocess_env() | {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache)}
    command = [sys.executable, "-m", "seqtasks", "translate", "--checkpoint", name]
    done = subprocess.run(command, input="a\n", capture_output=True, text=True, env=env)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines() == [
        f"error: {name}: the revision '../../x' {REVISION} (it holds '..')"
    ]
