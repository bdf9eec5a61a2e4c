"""Write Multi30k De→En as sentencepiece pieces, one sentence a line, for OpenNMT-py.

    python bench/opennmt/encode.py [--data data/multi30k] --out ONMT_DIR

Uses the project's own sentencepiece models (spm.de.model, spm.en.model in --data), so
OpenNMT-py trains on exactly our subwords; writes ONMT_DIR/data/SPLIT.{de,en}.sp for each
--splits (train, val, test_2016_flickr).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import sentencepiece as spm


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("data/multi30k"))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--splits", nargs="+", default=["train", "val", "test_2016_flickr"])
    args = parser.parse_args(argv)
    (args.out / "data").mkdir(parents=True, exist_ok=True)
    for lang in ("de", "en"):
        model = spm.SentencePieceProcessor(model_file=str(args.data / f"spm.{lang}.model"))
        for split in args.splits:
            lines = (args.data / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()
            pieces = [" ".join(model.encode(line, out_type=str)) for line in lines]
            target = args.out / "data" / f"{split}.{lang}.sp"
            target.write_text("".join(p + "\n" for p in pieces), encoding="utf-8")
            print(f"{target}: {len(pieces)} lines")


if __name__ == "__main__":
    main()
