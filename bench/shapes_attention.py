"""When does a shapes-world captioner look at a shape? The attention hit rate (the peak of α
lies on the named shape) at the shape word, as `apps/evaluate.py` scores it, and at the words
before it: the colour word (−1) and the article (−2).

    python bench/shapes_attention.py --checkpoint CKPT [--source data/shapes] [--split test]
        [--images 200] [--beam B] [--threads 1] [--json]

`--beam`: the checkpoint's `test_beam` unless given.

A decoder can fetch a shape's annotation while it writes "a" or the colour and carry it in its
state to the shape word; the hit rate at the shape word alone then understates how well it
looks.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
from dataclasses import replace  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

import seqtasks  # noqa: E402
from seqtasks.captioning.captions import load_image  # noqa: E402
from seqtasks.captioning.judgements import attention_hits, read_caption  # noqa: E402
from seqtasks.captioning.shapes import Scene  # noqa: E402

SHIFTS = {"shape word": 0, "colour word (-1)": -1, "article (-2)": -2}


def main(argv: list[str] | None = None) -> dict[str, float]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--source", default="data/shapes", type=Path)
    p.add_argument("--split", default="test")
    p.add_argument("--images", type=int, default=200)
    p.add_argument("--beam", type=int)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    model = seqtasks.load(args.checkpoint, device="cpu", task="captioning")
    scenes = json.loads((args.source / "scenes.json").read_text())
    names = json.loads((args.source / "splits.json").read_text())[args.split][: args.images]
    counts = {name: [0, 0] for name in SHIFTS}  # hits, mentions
    for start in range(0, len(names), 50):
        chunk = names[start : start + 50]
        paths = [args.source / "images" / name for name in chunk]
        images = torch.stack([load_image(path, model.image_size) for path in paths])
        captions = model.caption(images, beam=args.beam, attention=True, batch_size=len(images))
        for name, caption in zip(chunk, captions):
            scene = Scene.from_dict(scenes[name])
            reading = read_caption(caption.words, scene)
            for label, shift in SHIFTS.items():
                moved = [(i + shift, k) for i, k in reading.mentions if i + shift >= 0]
                hits, mentions = attention_hits(
                    replace(reading, mentions=moved), caption.attention, caption.grid, scene
                )
                counts[label][0] += hits
                counts[label][1] += mentions
    rates = {label: 100.0 * hits / max(mentions, 1) for label, (hits, mentions) in counts.items()}
    for label, rate in rates.items():
        print(f"attention hits at the {label}: {rate:.1f} %")
    if args.json:
        print(json.dumps({"images": len(names), **rates}))
    return rates


if __name__ == "__main__":
    main()
