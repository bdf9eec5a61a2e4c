"""How fast one process hands out captioning training examples, decoding each image as it is
read (today's default) or from the images decoded once (`image_cache`), in the same run:

    python bench/caption_loading.py [--flickr ../shared/data/flickr8k_subset] [--shapes DIR]
        [--items 2000] [--rounds 3] [--json]

For each source (the shapes world of `shapes_soft.yaml`, level 3 at its own image size,
generated into --shapes if missing; Flickr8k JPEGs at 224 px) it fills the cache first (the
fill's time is printed), then times `dataset[n]` over the first --items training examples,
--rounds times each way, interleaved, and prints images/s (min/median/max) and the ratio of the
medians. One core's rate: a DataLoader with W workers has up to W of them.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

from seqtasks.captioning.data import CaptionData, ShapesData  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def rate(dataset, items: int) -> float:
    """Examples per second of reading the first `items` examples of `dataset`."""
    start = time.perf_counter()
    for n in range(items):
        dataset[n]
    return items / (time.perf_counter() - start)


def measure(name: str, make, items: int, rounds: int, cache: Path) -> dict:
    plain, cached = make(None), make(str(cache))
    start = time.perf_counter()
    cached.setup("fit")  # fills the cache
    fill = time.perf_counter() - start
    plain.setup("fit")
    items = min(items, len(plain.datasets["fit"]))
    rates: dict[str, list[float]] = {"decoded": [], "cached": []}
    for _ in range(rounds):
        rates["decoded"].append(rate(plain.datasets["fit"], items))
        rates["cached"].append(rate(cached.datasets["fit"], items))
    medians = {way: statistics.median(r) for way, r in rates.items()}
    print(f"{name}: {items:,} examples at {plain.image_size} px; cache filled in {fill:.1f} s")
    for way, r in rates.items():
        print(f"  {way:8} {min(r):10,.0f} {medians[way]:10,.0f} {max(r):10,.0f} images/s")
    print(f"  cached / decoded: {medians['cached'] / medians['decoded']:.1f}x", flush=True)
    return {"source": name, "items": items, "image_size": plain.image_size, "fill_s": fill,
            "images_per_s": rates, "ratio": medians["cached"] / medians["decoded"]}  # fmt: skip


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--flickr", type=Path, default=REPO.parent / "shared/data/flickr8k_subset")
    p.add_argument("--shapes", type=Path, default=Path("data/shapes"))
    p.add_argument("--items", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    results = []
    with tempfile.TemporaryDirectory() as folder:
        caches = Path(folder)
        results.append(measure(
            "shapes level 3", lambda c: ShapesData(str(args.shapes), image_cache=c),
            args.items, args.rounds, caches / "shapes"))  # fmt: skip
        if args.flickr.is_dir():
            results.append(measure(
                "flickr8k subset", lambda c: CaptionData(str(args.flickr), image_size=224,
                                                         feature_cache=None, image_cache=c),
                args.items, args.rounds, caches / "flickr"))  # fmt: skip
    if args.json:
        print(json.dumps({"torch": torch.__version__, "results": results}))
    return {"results": results}


if __name__ == "__main__":
    main()
