"""A real browser for the tests of `seqtasks serve`'s page: the system's Chromium (Debian's
`chromium` package) driven by Playwright, which is never asked to download a browser. Without
either, the browser tests are skipped, but under CI=true they fail, saying what is missing.
Each test's screenshot is kept in test-artefacts/browser/ (or $TEST_ARTEFACTS/browser/)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

ARTEFACTS = Path(os.environ.get("TEST_ARTEFACTS", Path(__file__).parents[2] / "test-artefacts"))


def chromium() -> str:
    """The system Chromium's path; skip (fail under CI) when it or Playwright is missing."""
    installing = os.environ.get("CHROMIUM_INSTALLING")  # .ci/run installs it beside pip
    if installing:
        wait_for_install(Path(installing))
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


def wait_for_install(status: Path, timeout: float = 900, poll: float = 1.0) -> None:
    """Wait until `status` (written whole, by a rename, when the background install ends)
    exists; fail with apt's log beside it if the install failed or never ended."""
    deadline = time.monotonic() + timeout
    while not status.exists():
        if time.monotonic() > deadline:
            pytest.fail(f"Chromium's install did not end in {timeout:.0f} s; see {status.parent}")
        time.sleep(poll)
    code = status.read_text().strip()
    if code != "0":
        log = status.with_name("log")
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        pytest.fail(f"apt-get install chromium failed (status {code}):\n{tail}")


def screenshot(page, name: str) -> Path:
    """A full-page screenshot of `page` as test-artefacts/browser/NAME.png."""
    path = ARTEFACTS / "browser" / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)
    return path


# Every control, focusable element and image the page shows, without a name a screen reader
# could say: no label, aria-label(ledby), text or alt (alt="" marks a decorative image).
UNNAMED = """() => [...document.querySelectorAll(
    'input, textarea, select, button, [tabindex], [role], img, canvas:not([aria-hidden=true])')]
  .filter((n) => n.getClientRects().length)  // shown
  .filter((n) => {
    const by = (n.getAttribute('aria-labelledby') || '').split(' ')
      .map((id) => document.getElementById(id));
    const names = [n.getAttribute('aria-label'), ...by.map((m) => m && m.textContent),
      ...[...(n.labels || [])].map((l) => l.textContent),
      n.getAttribute('alt') !== null ? 'alt' : '',
      n.tagName === 'INPUT' || n.tagName === 'TEXTAREA' ? '' : n.textContent];
    return !names.some((name) => name && name.trim());
  })
  .map((n) => n.outerHTML.slice(0, 120))"""


def unnamed(page) -> list[str]:
    """The shown controls and images of `page` that have no accessible name."""
    return page.evaluate(UNNAMED)


def tab_to(page, selector: str, presses: int = 80) -> None:
    """Press Tab until the focused element matches `selector`, as a keyboard user would."""
    for _ in range(presses):
        page.keyboard.press("Tab")
        if page.evaluate("(s) => document.activeElement.matches(s)", selector):
            return
    raise AssertionError(f"{selector} is not reached by Tab in {presses} presses")


def main(argv: list[str] | None = None) -> None:
    """The documentation's screenshots: each section of a running server's page after one
    interaction, saved as OUT/serve_TASK.png (for the tasks the server holds).

        seqtasks serve MT.ckpt PARSER.ckpt CAPTIONER.ckpt --port 8000 &
        python tests/serving/browser.py http://127.0.0.1:8000 docs/images --image photo.png
    """
    import argparse

    from playwright.sync_api import sync_playwright

    p = argparse.ArgumentParser(description=main.__doc__.splitlines()[0])
    p.add_argument("url")
    p.add_argument("out", type=Path)
    p.add_argument("--sentence", default="Zwei junge Männer spielen Fußball auf einer Wiese.")
    p.add_argument("--image", type=Path, help="the image to caption")
    p.add_argument("--parse", default="The old man saw a dog in the park .")
    p.add_argument("--piece", type=int, default=2, help="the piece (and caption word) to light")
    p.add_argument("--key", help="the server's API key, when it was started with one")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1000, "height": 800})
        page.goto(args.url.rstrip("/") + "/")
        if args.key:
            page.fill("#api-key", args.key)
        page.wait_for_selector("section:not([hidden])")  # once /models has answered
        if page.locator("#translation:not([hidden])").count():
            page.fill("#translation-text", args.sentence)
            page.click("#translation-form button")
            page.wait_for_selector("#translation-result:not([hidden])")
            page.mouse.move(0, 0)  # a pointer left over the table would light another piece
            page.focus(f"#translation-heatmap .tgt[data-row='{args.piece}']")
            page.locator("#translation").screenshot(path=str(args.out / "serve_translation.png"))
        if page.locator("#captioning:not([hidden])").count() and args.image:
            page.set_input_files("#captioning-file", str(args.image))
            page.click("#captioning-form button")
            page.wait_for_selector("#captioning-result:not([hidden])")
            page.mouse.move(0, 0)
            page.focus(f"#captioning-words button:nth-child({args.piece + 1})")
            page.locator("#captioning").screenshot(path=str(args.out / "serve_captioning.png"))
        if page.locator("#parsing:not([hidden])").count():
            page.fill("#parsing-text", args.parse)
            page.click("#parsing-form button")
            page.wait_for_selector("#parsing-result:not([hidden])")
            page.locator("#parsing").screenshot(path=str(args.out / "serve_parsing.png"))
        browser.close()


if __name__ == "__main__":
    main()
