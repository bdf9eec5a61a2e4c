"""Screenshots of the page's layer × head picker over a trained translation model, into
docs/images/serve_picker_*.png (docs/serving.md, "Every layer and head"):

    python bench/page_screenshots.py CKPT [--chromium /usr/bin/chromium] [--port 8765]

It serves CKPT with one worker, opens the page in the system Chromium (Playwright, never asked
to download a browser), translates one sentence and shoots the result twice: the top
cross-attention's mean of heads, then the encoder's layer 0, head 1.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
SENTENCE = "Ein kleines Mädchen klettert in ein Spielhaus aus Holz ."
SHOTS = (("cross", "-1", "mean", "picker_cross"), ("encoder", "0", "1", "picker_encoder"))


def wait_until_healthy(url: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            urllib.request.urlopen(url + "/health")
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    command = ["seqtasks", "serve", args.checkpoint, "--port", str(args.port)]
    command += ["--workers-per-device", "1"]
    env = {k: v for k, v in os.environ.items() if k != "LIT_SERVER_API_KEY"}
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{args.port}"
    try:
        wait_until_healthy(url)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=args.chromium, args=["--no-sandbox"]
            )
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            page.goto(url + "/")
            page.wait_for_selector("#translation:not([hidden])")
            page.fill("#translation-text", SENTENCE)
            page.click("#translation-form button")
            page.wait_for_selector("#translation-picker:not([hidden])")
            for kind, layer, head, name in SHOTS:
                page.select_option("#translation-kind", kind)
                layers = page.locator("#translation-layer option").count()
                page.select_option("#translation-layer", str(int(layer) % layers))
                page.select_option("#translation-head", head)
                page.hover("#translation-heatmap .tgt >> nth=2")
                path = ROOT / "docs/images" / f"serve_{name}.png"
                page.locator("#translation-result").screenshot(path=str(path))
                print(f"wrote {path}")
            browser.close()
    finally:
        server.terminate()
        server.wait(30)


if __name__ == "__main__":
    main()
