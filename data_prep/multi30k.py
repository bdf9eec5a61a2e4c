"""Get Multi30k task 1 (raw, cased, untokenised) and train its sentencepiece models.

    python data_prep/multi30k.py                                  # from the public repository
    python data_prep/multi30k.py --source ../shared/data/multi30k # from a local copy

Writes to --out (default data/multi30k): `{train,val,test_2016_flickr}.{lang}` as plain UTF-8
text, one sentence a line, and `spm.{lang}.model` for each language, what `TranslationData`
reads. Nothing is written before every file has been read and checked (UTF-8, the same line
count in every language), and every file is written to a temporary name and renamed, so a bad
source or an interrupted run never leaves a truncated file or a mix of old and new ones.
"""

from __future__ import annotations

import argparse
import gzip
import sys
import urllib.request
from pathlib import Path

from seqtasks.data.text import decode_lines
from seqtasks.data.tokenizer import train_sentencepiece
from seqtasks.files import write_atomic

DEFAULT_SOURCE = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw"
SPLITS = ("train", "val", "test_2016_flickr")


def fetch(source: str, name: str) -> bytes:
    """The bytes of `name` (or `name`.gz, decompressed) from a URL prefix or a folder."""
    if source.startswith(("http://", "https://")):
        with urllib.request.urlopen(f"{source.rstrip('/')}/{name}.gz", timeout=60) as response:
            return gzip.decompress(response.read())
    folder = Path(source)
    for candidate, unzip in ((folder / f"{name}.gz", True), (folder / name, False)):
        if candidate.is_file():
            data = candidate.read_bytes()
            return gzip.decompress(data) if unzip else data
    raise FileNotFoundError(f"neither {folder / name}.gz nor {folder / name} exists")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", default=DEFAULT_SOURCE, help="URL prefix or local folder")
    parser.add_argument("--out", default="data/multi30k", type=Path)
    parser.add_argument("--langs", nargs="+", default=["de", "en"])
    parser.add_argument("--vocab-size", type=int, default=6000, help="per language, or joint")
    parser.add_argument("--model-type", choices=["unigram", "bpe"], default="unigram")
    parser.add_argument("--joint", action="store_true", help="one model shared by all languages")
    args = parser.parse_args(argv)

    corpus: dict[str, dict[str, list[str]]] = {}  # split -> lang -> lines
    for split in SPLITS:
        for lang in args.langs:
            name = f"{split}.{lang}"
            try:
                data = fetch(args.source, name)
            except (OSError, ValueError) as error:
                sys.exit(f"error: cannot read {name} from {args.source}: {error}")
            try:
                lines = decode_lines(data, f"{args.source.rstrip('/')}/{name}")
            except ValueError as error:
                sys.exit(f"error: {error}")
            sides = corpus.setdefault(split, {})
            for other, other_lines in sides.items():
                if len(other_lines) != len(lines):
                    sys.exit(
                        f"error: misaligned parallel files: {split}.{other} has "
                        f"{len(other_lines)} lines but {name} has {len(lines)}"
                    )
            sides[lang] = lines
    # Everything was read and checked: only now are files replaced, so a bad source never
    # leaves a folder of mixed old and new files.
    for split, sides in corpus.items():
        for lang, lines in sides.items():
            write_atomic(args.out / f"{split}.{lang}", "".join(line + "\n" for line in lines))
        print(f"{split}: {len(next(iter(sides.values())))} sentence pairs")
    train_lines = corpus["train"]

    if args.joint:
        joint = [line for lang in args.langs for line in train_lines[lang]]
        models = dict.fromkeys(
            args.langs, train_sentencepiece(joint, args.vocab_size, args.model_type)
        )
    else:
        models = {
            lang: train_sentencepiece(train_lines[lang], args.vocab_size, args.model_type)
            for lang in args.langs
        }
    for lang, tokenizer in models.items():
        write_atomic(args.out / f"spm.{lang}.model", tokenizer.proto)
        print(f"spm.{lang}.model: {args.model_type}, {tokenizer.vocab_size} pieces")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
