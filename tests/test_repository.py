"""The repository's own conventions: the suite runs with and without pytest-xdist, and the
measured results in docs/ carry no paths of the machine they were measured on."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import REPO, subprocess_env


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
