"""How tasks are found (`seqtasks.registry`): each package's own declaration, built-in or named
by an entry point, and the 0.1 class paths that checkpoints and configs still hold."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest
from conftest import subprocess_env

from seqtasks import registry
from seqtasks.registry import TaskEntry, TaskError, declared, task_of, tasks


@pytest.fixture
def packages(tmp_path, monkeypatch):
    """A folder on sys.path where a test writes task packages (forgotten afterwards)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith("toy_")]:
        del sys.modules[name]
    importlib.invalidate_caches()


def write(folder, name: str, declaration: str) -> None:
    (folder / name).mkdir()
    (folder / name / "__init__.py").write_text(declaration)


def test_every_built_in_task_is_found_by_its_own_declaration():
    found = tasks()
    assert list(found) == ["translation", "parsing", "captioning", "pretraining"]
    for name, entry in found.items():
        assert entry.package == f"seqtasks.{name}"
        assert entry.task_class().entry is entry  # the class names the same declaration
        assert entry.model_class().__module__.startswith(entry.package)
        model_module = sys.modules[entry.model_class().__module__]
        assert sorted(entry.api) == sorted(model_module.__all__)  # seqtasks.NAME, unimported


def test_a_package_without_a_declaration_or_with_another_package_is_refused(packages):
    write(packages, "toy_none", "x = 1\n")
    with pytest.raises(TaskError, match="toy_none declares no task"):
        declared("toy_none")
    write(packages, "toy_text", "TASK = 'translation'\n")  # a name, not a declaration
    with pytest.raises(TaskError, match="toy_text declares no task"):
        declared("toy_text")
    write(packages, "toy_other", "from seqtasks.registry import TaskEntry\n"
          "TASK = TaskEntry('somewhere', 'toy', '.t.T', '.m.M', (), '')\n")  # fmt: skip
    with pytest.raises(TaskError, match="toy_other's TASK names its package 'somewhere'"):
        declared("toy_other")


def install(folder, name: str, point: str, package: str) -> None:
    """A dist-info in `folder` (on sys.path) declaring the entry point `point = package` of
    seqtasks.tasks, as `pip install` of a task package leaves it (`name` with underscores, as
    pip writes it: importlib.metadata reads a dist's name up to the first "-")."""
    info = folder / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[seqtasks.tasks]\n{point} = {package}\n")


@pytest.fixture
def fresh_registry():
    """The registry read anew in the test (its cache cleared before and after)."""
    for cached in (registry._found, registry.tasks):
        cached.cache_clear()
    yield registry
    for cached in (registry._found, registry.tasks):
        cached.cache_clear()


TWIN = "from seqtasks.registry import TaskEntry\nTASK = TaskEntry(__name__, {name!r}, '.T', '.M')\n"
OUTSIDE = {  # package -> (entry point, its __init__.py or None: not installed, why it is left out)
    "toy_raises": ("raiser", "raise RuntimeError('boom at import')\n",
                   "importing it raised RuntimeError: boom at import"),
    "toy_exits": ("exiter", "raise SystemExit(3)\n", "importing it raised SystemExit: 3"),
    "toy_missing": ("missing", None, "toy_missing is not installed (No module named 'toy_mis"),
    "toy_none": ("none", "x = 1\n", "toy_none declares no task: its __init__.py has no TASK"),
    "toy_twin": ("translation", TWIN.format(name="translation"),
                 "it declares the task 'translation', which seqtasks.translation declares"),
    "toy_a": ("a", TWIN.format(name="toy"), "toy_a and toy_b both declare the task 'toy'"),
    "toy_b": ("b", TWIN.format(name="toy"), "toy_a and toy_b both declare the task 'toy'"),
    "toy_fine": ("fine", TWIN.format(name="fine"), None),
}  # fmt: skip


def test_an_outside_package_that_fails_is_left_out_alone_with_one_warning_each(
    packages, fresh_registry
):
    """A package that raises (even SystemExit) on import, is not installed, declares nothing,
    or declares a name another package declares, is left out with one warning naming its
    package and entry point; the built-in tasks and a sound outside one are there, and asking
    for a left-out task says why."""
    for package, (point, init, _) in OUTSIDE.items():
        install(packages, package, point, package)
        if init is not None:
            write(packages, package, init)
    with pytest.warns(registry.TaskPackageWarning) as warned:
        found = fresh_registry.tasks()
    assert list(found) == ["translation", "parsing", "captioning", "pretraining", "fine"]
    assert found["translation"].package == "seqtasks.translation"
    said = sorted(str(w.message) for w in warned)
    expected = sorted(
        f"task package {package} (entry point {point!r} of seqtasks.tasks) left out: {why}"
        for package, (point, _, why) in OUTSIDE.items()
        if why is not None
    )
    assert len(said) == len(expected) and all(s.startswith(e) for s, e in zip(said, expected))
    assert all("\n" not in line for line in said)
    fresh_registry.tasks()  # cached: no second warning (pytest.warns would fail on none here)
    with pytest.raises(TaskError, match="the 'raiser' task cannot be used: task package toy_r"):
        fresh_registry.task_entry("raiser")
    with pytest.raises(TaskError, match="the 'toy' task cannot be used: task package toy_a"):
        fresh_registry.task_entry("toy")
    with pytest.raises(TaskError, match="no task 'nothing' is installed .seqtasks knows trans"):
        fresh_registry.task_entry("nothing")
    assert fresh_registry.task_entry("fine").package == "toy_fine"


def test_a_built_in_task_is_found_without_reading_any_other_package(packages, fresh_registry):
    """`task_entry` of a built-in task imports that task's package alone: no outside package
    (a broken one is not even read) and no other task."""
    install(packages, "toy_raises", "raiser", "toy_raises")
    write(packages, "toy_raises", "raise RuntimeError('read')\n")
    script = (
        "import sys, seqtasks.registry as r\n"
        "assert r.task_entry('parsing').name == 'parsing'\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith(('seqtasks.', 'toy_')))))\n"
    )
    env = subprocess_env() | {"PYTHONPATH": f"{packages}:{subprocess_env().get('PYTHONPATH', '')}"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.split() == ["seqtasks.old_names", "seqtasks.parsing", "seqtasks.registry"]


def test_paths_starting_with_a_dot_are_read_inside_the_package():
    entry = TaskEntry("pkg", "x", ".task.X", "other.module.M", (), "")
    assert entry.path(entry.task) == "pkg.task.X"
    assert entry.path(entry.model) == "other.module.M"


def test_a_task_built_on_another_tasks_class_is_itself(packages, monkeypatch):
    """`task_of` picks the nearest declared class: a subclass of TranslationTask that another
    package declares is that task, not translation."""
    write(packages, "toy_near", "")
    (packages / "toy_near" / "task.py").write_text(
        "from seqtasks.translation.task import TranslationTask\n"
        "class ToyTask(TranslationTask):\n    pass\n"
    )
    own = TaskEntry("toy_near", "toy", ".task.ToyTask", ".M", (), "")
    found = {**tasks(), "toy": own}
    monkeypatch.setattr(registry, "tasks", lambda: found)
    translation = found["translation"].task_class()
    assert task_of(own.task_class()) == "toy"
    assert task_of(translation) == "translation"
    assert task_of(int) is None


def test_the_class_paths_of_0_1_resolve_to_the_declared_classes():
    import seqtasks.callbacks

    import seqtasks.data
    import seqtasks.tasks
    from seqtasks.tasks.base import EncoderDecoderTask
    from seqtasks.training.callbacks import FitSummary
    from seqtasks.translation.dates import DatesData
    from seqtasks.translation.task import TranslationTask

    assert seqtasks.tasks.TranslationTask is TranslationTask
    assert seqtasks.tasks.EncoderDecoderTask is EncoderDecoderTask
    assert seqtasks.data.DatesData is DatesData
    assert seqtasks.data.ParsingData.__name__ == "ParsingData"
    assert seqtasks.callbacks.FitSummary is FitSummary  # a module that moved
    with pytest.raises(AttributeError, match="'seqtasks.tasks' has no attribute 'Nothing'"):
        seqtasks.tasks.Nothing  # noqa: B018
    with pytest.raises(AttributeError, match="'seqtasks.data' has no attribute 'Trans"):
        seqtasks.data.TranslationTask  # noqa: B018 (a task class is no DataModule)


def test_a_model_file_naming_a_class_that_is_no_task_is_refused():
    """A model file's specification is read for the task class it names, which must be one the
    registry knows: a module class that is no task is not built from it."""
    from seqtasks.model_files.spec import ParsedSpec, SpecError

    spec = {"class_path": "torch.nn.Linear", "init_args": {"in_features": 2, "out_features": 2}}
    with pytest.raises(SpecError, match="the task: 'torch.nn.Linear' is no task of this seqtasks"):
        ParsedSpec(spec)


@pytest.mark.slow
def test_broken_outside_packages_take_no_command_down(packages, toy_tokenizers, tmp_path):
    """With packages that fail installed beside the built-in tasks: `--help`, a command's help,
    translating and `seqtasks.load` of a translation checkpoint answer as before, each package
    said once in one `warning:` line (and not at all where no command needs every task), and
    the evaluation of a left-out task says why in one line."""
    from test_model_folders import RNN, translator

    for package, point, init in (
        ("toy_raises", "raiser", "raise RuntimeError('boom')\n"),
        ("toy_missing", "missing", None),
        ("toy_twin", "translation", TWIN.format(name="translation")),
    ):
        install(packages, package, point, package)
        if init is not None:
            write(packages, package, init)
    decoder = {"class_path": "seqtasks.decoders.BahdanauDecoder", "init_args": RNN["init_args"]}
    checkpoint = translator(tmp_path / "rnn.ckpt", toy_tokenizers, encoder=RNN, decoder=decoder)
    env = subprocess_env() | {"PYTHONPATH": f"{packages}:{subprocess_env().get('PYTHONPATH', '')}"}

    def seqtasks(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "seqtasks", *args]
        return subprocess.run(command, input=stdin, capture_output=True, text=True, env=env)

    warnings = [
        "warning: task package toy_raises (entry point 'raiser' of seqtasks.tasks) left out: "
        "importing it raised RuntimeError: boom",
        "warning: task package toy_missing (entry point 'missing' of seqtasks.tasks) left out: "
        "toy_missing is not installed (No module named 'toy_missing')",
        "warning: task package toy_twin (entry point 'translation' of seqtasks.tasks) left out: "
        "it declares the task 'translation', which seqtasks.translation declares",
    ]
    for args in (["--help"], ["translate", "--help"]):
        done = seqtasks(*args)
        assert done.returncode == 0 and "usage: seqtasks" in done.stdout
        assert sorted(done.stderr.splitlines()) == sorted(warnings), done.stderr
    done = seqtasks("translate", "--checkpoint", str(checkpoint), stdin="Ein Hund.\n")
    assert done.returncode == 0 and done.stdout.count("\n") == 1, done.stderr
    assert sorted(done.stderr.splitlines()) == sorted(warnings)
    load = "import seqtasks, sys; print(type(seqtasks.load(sys.argv[1], 'cpu')).__name__)"
    done = subprocess.run(
        [sys.executable, "-c", load, str(checkpoint)], capture_output=True, text=True, env=env
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "Translator\n", "")
    done = seqtasks("evaluate", "raiser", "--help")
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        "seqtasks evaluate: error: the 'raiser' task cannot be used: task package toy_raises "
        "(entry point 'raiser' of seqtasks.tasks) left out: importing it raised RuntimeError: boom"
    )


def test_an_outside_task_takes_no_command_and_its_broken_parts_fail_alone(
    packages, fresh_registry, run_command, capsys
):
    """An outside task whose command is named as seqtasks' own or a built-in task's is not
    offered that name (one warning); one whose evaluation or command module fails to import
    leaves `seqtasks evaluate` of the other tasks, and the other commands, as they were; its
    own command fails in one line; a declaration of the wrong kinds is left out by name."""
    declaration = (
        "from seqtasks.registry import Command, TaskEntry\n"
        "TASK = TaskEntry(__name__, {name!r}, '.T', '.M', command=Command({command!r}, 'x'),\n"
        "                 evaluation='.evaluation')\n"
    )
    for package, name, command in (
        ("toy_serve", "toy_serve", "serve"),
        ("toy_translate", "toy_translate", "translate"),
        ("toy_broken", "toy_broken", "breaks"),
    ):
        install(packages, package, name, package)
        write(packages, package, declaration.format(name=name, command=command))
        (packages / package / "evaluation.py").write_text("raise ImportError('no evaluation')\n")
        (packages / package / "command.py").write_text("raise ImportError('no command')\n")
    install(packages, "toy_kinds", "kinds", "toy_kinds")
    write(packages, "toy_kinds", "from seqtasks.registry import TaskEntry\n"
          "TASK = TaskEntry(__name__, 'kinds', '.T', '.M', command='kinds')\n")  # fmt: skip

    status, out, err = run_command("--help")
    assert status == 0 and "breaks     x" in out and out.count("\n  serve ") == 1
    warned = sorted(line for line in err.splitlines())
    assert warned == [
        "warning: task package toy_kinds (entry point 'kinds' of seqtasks.tasks) left out: "
        "toy_kinds's TASK has a command of the wrong kind: " + warned[0].split("kind: ", 1)[1],
        "warning: task package toy_serve: its command 'serve' left out: seqtasks serve is "
        "seqtasks' own",
        "warning: task package toy_translate: its command 'translate' left out: seqtasks "
        "translate is the translation task's",
    ], err
    assert run_command("breaks")[2].splitlines()[-1] == (
        "error: seqtasks breaks cannot be loaded (toy_broken.command): ImportError: no command"
    )
    with pytest.raises(SystemExit) as done:
        run_command("evaluate", "translation", "--help")
    out, err = capsys.readouterr()
    assert done.value.code == 0 and "usage: seqtasks evaluate translation" in out
    assert (
        "warning: task package toy_broken: its evaluation .evaluation left out: importing it "
        "raised ImportError: no evaluation"
    ) in err.splitlines()
