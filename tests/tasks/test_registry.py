"""How tasks are found (`seqtasks.registry`): each package's own declaration, built-in or named
by an entry point, and the 0.1 class paths that checkpoints and configs still hold."""

from __future__ import annotations

import sys

import pytest

from seqtasks import registry
from seqtasks.registry import TaskEntry, TaskError, declared, declared_class, task_of, tasks


@pytest.fixture
def packages(tmp_path, monkeypatch):
    """A folder on sys.path where a test writes task packages (forgotten afterwards)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith("toy_")]:
        del sys.modules[name]


def write(folder, name: str, declaration: str) -> None:
    (folder / name).mkdir()
    (folder / name / "__init__.py").write_text(declaration)


def test_every_built_in_task_is_found_by_its_own_declaration():
    found = tasks()
    assert list(found) == ["translation", "parsing", "captioning"]
    for name, entry in found.items():
        assert entry.package == f"seqtasks.{name}"
        assert entry.task_class().entry is entry  # the class names the same declaration
        assert entry.model_class().__module__.startswith(entry.package)


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


def test_two_tasks_of_one_name_are_refused_naming_both(packages, monkeypatch):
    write(packages, "toy_twin", "from seqtasks.registry import TaskEntry\n"
          "TASK = TaskEntry(__name__, 'translation', '.t.T', '.m.M', (), '')\n")  # fmt: skip
    monkeypatch.setattr(registry, "BUILT_IN", (*registry.BUILT_IN, "toy_twin"))
    tasks.cache_clear()
    try:
        with pytest.raises(TaskError, match="two tasks are named 'translation': "
                           "seqtasks.translation and toy_twin"):  # fmt: skip
            tasks()
    finally:
        tasks.cache_clear()


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
    import seqtasks.data
    import seqtasks.tasks
    from seqtasks.translation.dates import DatesData
    from seqtasks.translation.task import TranslationTask

    assert seqtasks.tasks.TranslationTask is TranslationTask
    assert seqtasks.data.DatesData is DatesData
    assert declared_class("ParsingData", "data").__name__ == "ParsingData"
    with pytest.raises(AttributeError, match="has no attribute 'Nothing'"):
        seqtasks.tasks.Nothing  # noqa: B018
    with pytest.raises(AttributeError):
        declared_class("TranslationTask", "data")  # a task class is no DataModule


def test_a_model_file_naming_a_class_that_is_no_task_is_refused():
    """A model file's specification is read for the task class it names, which must be one the
    registry knows: a module class that is no task is not built from it."""
    from seqtasks.model_files.spec import ParsedSpec, SpecError

    spec = {"class_path": "torch.nn.Linear", "init_args": {"in_features": 2, "out_features": 2}}
    with pytest.raises(SpecError, match="the task: 'torch.nn.Linear' is no task of this seqtasks"):
        ParsedSpec(spec)
