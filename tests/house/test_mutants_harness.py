"""tests/mutants.py finds each mutant's site and tests by name, not by path, so that code and
tests may move between files and folders (no mutant is run here: a few seconds)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import mutants
import pytest
from mutants import MUTANTS, REPO, Mutant, Stale, locate


def test_every_mutant_finds_its_site_and_tests_in_this_tree():
    problems = []
    files = mutants.project_files(REPO)
    for n, mutant in enumerate(MUTANTS, 1):
        try:
            path, start, end = locate(REPO, mutant, files)
            assert path.read_text(encoding="utf-8")[start:end] == mutant.old
            for test in mutant.tests:
                mutants.find_test(REPO, test, files)
        except Stale as stale:
            problems.append(f"{n}. {stale}")
    assert not problems, "\n".join(problems)


def copy_into(root: Path, source: Path, relative: str) -> Path:
    target = root / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, target)
    return target


def test_a_site_and_a_test_are_found_after_their_files_move(tmp_path):
    """A function (here the length penalty), a file (the page) and a test file, each copied
    from this tree into a small one, then moved to another folder and name."""
    penalty = next(mutant for mutant in MUTANTS if mutant.site == "length_penalty")
    page = next(mutant for mutant in MUTANTS if mutant.site == "sections.js")
    test = "test_search.py::test_wide_beam_finds_the_best_normalised_output_by_enumeration[0.8]"
    moves = {penalty: "seqtasks/decoding/beam_search.py", page: "seqtasks/web/sections.js"}
    for mutant, moved in moves.items():
        source, start, end = locate(REPO, mutant)
        relative = source.relative_to(REPO).as_posix()
        copy_into(tmp_path, source, relative)
        assert locate(tmp_path, mutant) == (tmp_path / relative, start, end)
        (tmp_path / moved).parent.mkdir(parents=True)
        (tmp_path / relative).rename(tmp_path / moved)
        assert locate(tmp_path, mutant) == (tmp_path / moved, start, end)
    tests = REPO / mutants.find_test(REPO, test).split("::")[0]
    copy_into(tmp_path, tests, "tests/test_search.py")
    assert mutants.find_test(tmp_path, test) == "tests/test_search.py::" + test.split("::")[1]
    (tmp_path / "tests/test_search.py").rename(tmp_path / "tests/test_beams.py")
    (tmp_path / "tests/search").mkdir()
    (tmp_path / "tests/test_beams.py").rename(tmp_path / "tests/search/test_beams.py")
    assert mutants.find_test(tmp_path, test) == "tests/search/test_beams.py::" + test.split("::")[1]


def write(root: Path, relative: str, text: str) -> None:
    (root / relative).parent.mkdir(parents=True, exist_ok=True)
    (root / relative).write_text(text, encoding="utf-8")


PENALTY = "def length_penalty(length, alpha):\n    return ((5.0 + length) / 6.0) ** alpha\n"


def refusal(root: Path, site: str, old: str) -> str:
    with pytest.raises(Stale) as stale:
        locate(root, Mutant("a breakage", site, old, "", ("test_x.py::test_y",)))
    assert "\n" not in str(stale.value)
    return str(stale.value)


def test_a_missing_or_ambiguous_site_is_refused_in_one_line(tmp_path):
    write(tmp_path, "seqtasks/search/beam.py", PENALTY + "\n\nclass Beam:\n    WIDTH = 5.0\n")
    write(tmp_path, "bench/penalties.py", PENALTY)
    write(tmp_path, "apps/other.py", "def length_penalty():\n    return 1\n")
    write(tmp_path, "seqtasks/static/page.js", "const a = 1;\n")
    write(tmp_path, "apps/static/page.js", "const a = 2;\n")
    assert refusal(tmp_path, "nowhere", "5.0") == "site nowhere not found"
    assert refusal(tmp_path, "length_penalty", "** alpha") == (
        "site length_penalty found in 2 files: seqtasks/search/beam.py, bench/penalties.py"
    )
    assert refusal(tmp_path, "length_penalty", "** 2") == "site length_penalty holds its text 0×"
    assert refusal(tmp_path, "Beam", "lpha") == "site Beam holds its text 0×"
    assert refusal(tmp_path, "page.js", "const") == (
        "site page.js found in 2 files: apps/static/page.js, seqtasks/static/page.js"
    )
    assert refusal(tmp_path, "index.js", "const") == "site index.js not found"
    assert refusal(tmp_path, "static/page.js", "const") == (
        "site static/page.js found in 2 files: apps/static/page.js, seqtasks/static/page.js"
    )
    write(tmp_path, "bench/penalties.py", PENALTY.replace("alpha", "beta"))
    assert refusal(tmp_path, "length_penalty", "alpha") == "site length_penalty holds its text 2×"
    path, start, end = locate(tmp_path, Mutant("", "length_penalty", "** alpha", "", ()))
    assert (path, path.read_text()[start:end]) == (tmp_path / "seqtasks/search/beam.py", "** alpha")
    assert locate(tmp_path, Mutant("", "Beam", "5.0", "", ()))[0].name == "beam.py"
    path, start, _ = locate(tmp_path, Mutant("", "seqtasks/static/page.js", "1", "", ()))
    assert (path.parent.parent.name, start) == ("seqtasks", 10)


def test_a_test_named_in_several_files_is_taken_from_the_file_so_named(tmp_path):
    test = "def test_y():\n    pass\n"
    write(tmp_path, "tests/a/test_one.py", test)
    write(tmp_path, "tests/b/test_two.py", test)
    with pytest.raises(Stale, match=r"^test test_x.py::test_y found in 2 files: tests/a/test_one"):
        mutants.find_test(tmp_path, "test_x.py::test_y")
    with pytest.raises(Stale, match=r"^test test_x.py::test_z not found$"):
        mutants.find_test(tmp_path, "test_x.py::test_z")
    assert mutants.find_test(tmp_path, "test_two.py::test_y[1]") == "tests/b/test_two.py::test_y[1]"
    write(tmp_path, "tests/test_x.py", test)
    assert mutants.find_test(tmp_path, "test_x.py::test_y") == "tests/test_x.py::test_y"
    assert mutants.find_test(tmp_path, "test_one.py") == "tests/a/test_one.py"


def test_what_pip_install_leaves_in_the_checkout_changes_no_site_and_no_test(tmp_path):
    """`pip install .` leaves build/lib/seqtasks/ (a copy of every module and of the page's
    files: `sections.js` was then found in 2 files) and seqtasks.egg-info/ beside the sources.
    Sites and tests are looked for only among `project_files`, and those stay the same: here in
    a copy of this tree, without git (as `python tests/mutants.py` copies it) and with it (as in
    a checkout); the page's mutants are found in the sources."""
    root = mutants.copy_tree(tmp_path)
    sources = mutants.project_files(root)
    shutil.copytree(root / "seqtasks", root / "build/lib/seqtasks")
    write(root, "seqtasks.egg-info/SOURCES.txt", "seqtasks/serving/static/sections.js\n")
    assert (root / "build/lib/seqtasks/serving/static/sections.js").is_file()
    pages = [mutant for mutant in MUTANTS if mutants.is_file_site(mutant.site)]
    assert any(mutant.site == "sections.js" for mutant in pages)
    for git in (False, True):
        if git:
            subprocess.run(["git", "init", "-q"], cwd=root, check=True)  # every file untracked
        assert mutants.project_files(root) == sources
        for mutant in pages:
            path = locate(root, mutant, sources)[0]
            assert path.relative_to(root).parts[0] == "seqtasks", mutant.site


def test_only_the_projects_own_files_are_searched_with_git_or_without(tmp_path):
    """With git: its tracked files and the untracked ones it does not ignore; without: every
    file. Either way never build/, dist/, *.egg-info or a hidden folder, even where git does
    not ignore them."""
    write(tmp_path, "seqtasks/static/page.js", "const a = 1;\n")
    write(tmp_path, "seqtasks/search/beam.py", PENALTY)
    for top in ("build/lib/", "dist/", "seqtasks.egg-info/", ".venv/lib/", "seqtasks/.cache/"):
        write(tmp_path, top + "seqtasks/static/page.js", "const a = 1;\n")
        write(tmp_path, top + "seqtasks/search/beam.py", PENALTY)
    write(tmp_path, ".gitignore", "/runs/\n")
    sources = [tmp_path / ".gitignore", tmp_path / "seqtasks/search/beam.py"]
    sources.append(tmp_path / "seqtasks/static/page.js")
    page = Mutant("", "static/page.js", "1", "", ())
    module = Mutant("", "search/beam.py", "** alpha", "", ())  # a module named as a file
    penalty = Mutant("", "length_penalty", "** alpha", "", ())
    for git in (False, True):
        if git:
            subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
            write(tmp_path, "runs/seqtasks/static/page.js", "const a = 2;\n")  # git ignores it
        assert mutants.project_files(tmp_path) == sources
        for mutant, relative in [(page, "static/page.js"), (module, "search/beam.py")]:
            assert locate(tmp_path, mutant)[0] == tmp_path / "seqtasks" / relative
        assert locate(tmp_path, penalty)[0] == tmp_path / "seqtasks/search/beam.py"
    write(tmp_path, "tests/test_page.js", "")  # untracked, not ignored: the project's
    assert tmp_path / "tests/test_page.js" in mutants.project_files(tmp_path)
