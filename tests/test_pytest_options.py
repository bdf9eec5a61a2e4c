"""The suite's own options: besides `pytest -n auto` (the README's command, which this run
may well be), it runs in one process with pytest-xdist off (`pytest -p no:xdist`, e.g. under a
debugger), which an `-n` among pyproject.toml's addopts used to break."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO, subprocess_env


def test_the_suite_collects_without_xdist():
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:xdist", "--collect-only", "-q", "tests"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
