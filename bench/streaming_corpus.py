"""A synthetic parallel corpus that looks like Multi30k, of any size: the input of the streaming
benches (bench/streaming_prepare.py, streaming_memory.py).

    python bench/streaming_corpus.py --out /tmp/stream2m [--data data/multi30k]
        [--pairs 2000000] [--seed 0] [--json]

Each pair copies the word counts of a random Multi30k training pair (so lengths and their
source–target correlation are real) and fills both sides with words drawn by their Multi30k
frequency; deterministic from --seed. Beside train.{de,en} it copies the sentencepiece models and
the val/test files of --data, so OUT is a `TranslationData` folder. Prints the pairs, the seconds
it took and the MiB of each side.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from collections import Counter
from pathlib import Path

import numpy as np

LANGS = ("de", "en")


def generate(data: Path, out: Path, pairs: int, seed: int) -> dict:
    from seqtasks.data.text import read_lines

    out.mkdir(parents=True, exist_ok=True)
    sides = {lang: [line.split() for line in read_lines(data / f"train.{lang}")] for lang in LANGS}
    counts = {lang: np.array([len(words) for words in sides[lang]]) for lang in LANGS}
    vocab, probs = {}, {}
    for lang in LANGS:
        frequency = Counter(word for words in sides[lang] for word in words)
        vocab[lang] = np.array(list(frequency), dtype=object)
        probs[lang] = np.array(list(frequency.values()), dtype=np.float64)
        probs[lang] /= probs[lang].sum()
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    files = {lang: open(out / f"train.{lang}", "w", encoding="utf-8") for lang in LANGS}
    with files["de"], files["en"]:
        for first in range(0, pairs, 100_000):
            templates = rng.integers(0, len(sides["de"]), min(100_000, pairs - first))
            for lang in LANGS:
                n = counts[lang][templates]  # (chunk,) words per sentence
                words = vocab[lang][rng.choice(len(vocab[lang]), int(n.sum()), p=probs[lang])]
                ends = np.cumsum(n)
                lines = (" ".join(words[e - k : e]) for e, k in zip(ends.tolist(), n.tolist()))
                files[lang].write("".join(f"{line[:1].upper()}{line[1:]}\n" for line in lines))
    for name in [f"spm.{lang}.model" for lang in LANGS] + [
        f"{split}.{lang}" for split in ("val", "test_2016_flickr") for lang in LANGS
    ]:
        shutil.copyfile(data / name, out / name)
    sizes = {lang: (out / f"train.{lang}").stat().st_size / 2**20 for lang in LANGS}
    return {"pairs": pairs, "seconds": time.perf_counter() - start, "mib": sizes}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--data", default="data/multi30k", help="Multi30k, as data_prep wrote it")
    p.add_argument("--pairs", type=int, default=2_000_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="one JSON line")
    args = p.parse_args(argv)
    result = generate(Path(args.data), Path(args.out), args.pairs, args.seed)
    print(json.dumps(result) if args.json else json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
