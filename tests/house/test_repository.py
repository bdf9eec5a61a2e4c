"""The repository's own conventions: the suite runs with and without pytest-xdist, the
measured results in docs/ carry no paths of the machine they were measured on, the README's and
docs' links to files of the checkout (screenshots too) lead to files, components never import
Lightning, and every module stays under 300 lines."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys

from conftest import REPO, fresh_python, subprocess_env


def test_the_suite_collects_without_xdist():
    """Besides `pytest -n auto` (the README's command), the suite runs in one process with
    pytest-xdist off (`pytest -p no:xdist`, e.g. under a debugger), which an `-n` among
    pyproject.toml's addopts used to break."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:xdist", "--collect-only", "-q", "tests"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]


def test_results_in_docs_hold_no_local_absolute_paths():
    """Result files name checkpoints and data relative to the checkout (`runs/…`, `data/…`)."""
    local = re.compile(r"(?<![\w.])/(?:work|tmp|home|root|Users|mnt|scratch)/")
    found = [
        f"{path.relative_to(REPO)}:{number}"
        for path in sorted((REPO / "docs" / "results").iterdir())
        if path.suffix in {".txt", ".json"}
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if local.search(line)
    ]
    assert not found, f"absolute local paths in {found}"


def test_links_of_the_readme_and_docs_lead_to_files_of_the_checkout():
    """Every relative link and image of README.md and docs/*.md, e.g. docs/images/*.png."""
    link = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
    broken = [
        f"{doc.relative_to(REPO)}: {target}"
        for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
        for target in link.findall(doc.read_text(encoding="utf-8"))
        if "://" not in target and not (doc.parent / target).exists()
    ]
    assert not broken, f"links to nothing: {broken}"


COMPONENTS = ("attention", "layers", "encoders", "decoders", "search", "metrics", "io")
# what a task's package holds beside its Lightning parts: its own plain components
TASK_COMPONENTS = tuple(
    f"seqtasks.parsing.{name}"
    for name in ("trees", "linearisation", "vocabulary", "constraint", "ptb_text", "parseval")
)


def test_components_never_import_lightning():
    """Encoders, attention, decoders, search and the other components are plain modules: a
    program can use any of them without Lightning (only tasks, data modules, callbacks and the
    CLI import it)."""
    script = (
        "import importlib, pkgutil, sys\n"
        f"for name in {COMPONENTS!r}:\n"
        "    package = importlib.import_module('seqtasks.' + name)\n"
        "    for info in pkgutil.walk_packages(package.__path__, package.__name__ + '.'):\n"
        "        importlib.import_module(info.name)\n"
        f"for name in {TASK_COMPONENTS!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'lightning'))\n"
    )
    result = fresh_python(script)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "[]"


def test_no_module_is_over_300_lines():
    long = {
        str(path.relative_to(REPO)): n
        for folder in ("seqtasks", "apps", "data_prep", "bench")
        for path in (REPO / folder).rglob("*.py")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > 300
    }
    assert not long, f"split these by concept: {long}"


def test_ci_lints_as_make_lint_does_with_the_pinned_ruff():
    """`make lint` (ruff check and ruff format --check) is what .ci/run runs, with the ruff the
    dev extra pins exactly: `ruff>=0.6` had let a newer ruff in, which formats what this tree
    was not formatted for (three Markdown code blocks), and CI ran `ruff check .` alone."""
    makefile = (REPO / "Makefile").read_text()
    lint = re.search(r"^lint:.*\n((?:\t.*\n)+)", makefile, re.M).group(1).split("\n\t")
    assert [line.strip() for line in lint] == [
        ".venv/bin/ruff check .",
        ".venv/bin/ruff format --check .",
    ]
    ci = (REPO / ".ci/run").read_text().splitlines()
    assert "make lint" in ci and not any("ruff" in line for line in ci if line[:1] != "#")
    (pin,) = re.findall(r'"ruff==([\d.]+)"', (REPO / "pyproject.toml").read_text())
    assert importlib.metadata.version("ruff") == pin, "this environment's ruff is not the pin"
