"""A real browser for the tests of `seqtasks serve`'s page: the system's Chromium (Debian's
`chromium` package) driven by Playwright, which is never asked to download a browser. Without
either, the browser tests are skipped, but under CI=true they fail, saying what is missing.
Each test's screenshot is kept in test-artefacts/browser/ (or $TEST_ARTEFACTS/browser/)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ARTEFACTS = Path(os.environ.get("TEST_ARTEFACTS", Path(__file__).parents[1] / "test-artefacts"))


def chromium() -> str:
    """The system Chromium's path; skip (fail under CI) when it or Playwright is missing."""
    path = (
        os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    )
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        path, missing = None, "the playwright package (pip install playwright)"
    else:
        missing = "Chromium (apt-get install -y chromium)"
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the browser tests need {missing}; .ci/run installs it")
        pytest.skip(f"no {missing}")
    return path


def screenshot(page, name: str) -> Path:
    """A full-page screenshot of `page` as test-artefacts/browser/NAME.png."""
    path = ARTEFACTS / "browser" / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)
    return path
