"""Get Multi30k task 1 (raw, cased, untokenised) and train its sentencepiece models.

    python data_prep/multi30k.py                                  # from the public repository
    python data_prep/multi30k.py --source ../shared/data/multi30k # from a local copy

The default source is the multi30k/dataset repository at a fixed commit, and every file of it
this script can fetch (train, val, test_2016_flickr in cs, de, en, fr) has a pinned sha256: a
download that differs is refused. Downloads are https only and kept in OUT/.download.

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
import zlib
from pathlib import Path

from seqtasks.cli.arguments import CommandParser, check_outputs, positive_int
from seqtasks.data.text import decode_lines
from seqtasks.data.tokenizer import SentencePieceTokenizer, train_sentencepiece
from seqtasks.io.downloads import download
from seqtasks.io.files import write_atomic
from seqtasks.io.preparation import Preparation

DEFAULT_SOURCE = (
    "https://raw.githubusercontent.com/multi30k/dataset/"
    "a3d2e0d26b56f3846f66a952536ffed4e401d05a/data/task1/raw"
)
SPLITS = ("train", "val", "test_2016_flickr")
# `sha256sum` of the git blobs of multi30k/dataset at that commit; de, en and fr are byte for
# byte the copies in ../shared/data/multi30k.
SHA256 = {
    f"{DEFAULT_SOURCE}/{name}": digest
    for digest, name in map(
        str.split,
        """
a65adb8b32e3bc664f21ecba7a6e7f6950fd1f405e135f7c312faabdb6255077  train.cs.gz
726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6  train.de.gz
d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f  train.en.gz
622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c  train.fr.gz
b63226e05c4bd5dd6a42897d74b86a1b9d2c31498252c572b1ea7f7996927fcc  val.cs.gz
f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a  val.de.gz
14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28  val.en.gz
ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9  val.fr.gz
200a4a74cc9560f051924abb9803be008d1908d77f747e9141aeb86dfd2797f1  test_2016_flickr.cs.gz
9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8  test_2016_flickr.de.gz
611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9  test_2016_flickr.en.gz
6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90  test_2016_flickr.fr.gz
""".strip().splitlines(),
    )
}


def fetch(source: str, name: str, cache: Path) -> bytes:
    """The bytes of `name` (or `name`.gz, decompressed) from a URL prefix (downloaded into
    `cache`) or a folder."""
    if "://" in source:
        url = f"{source.rstrip('/')}/{name}.gz"
        return gzip.decompress(download(url, cache, SHA256.get(url)).read_bytes())
    folder = Path(source)
    for candidate, unzip in ((folder / f"{name}.gz", True), (folder / name, False)):
        if candidate.is_file():
            data = candidate.read_bytes()
            return gzip.decompress(data) if unzip else data
    raise FileNotFoundError(f"neither {folder / name}.gz nor {folder / name} exists")


def trained(lines: list[str], name: str, args: argparse.Namespace) -> SentencePieceTokenizer:
    """A sentencepiece model of `lines`, saying on stderr while it is trained (a minute or more
    for a large corpus)."""
    start = f"training the {name} model ({args.model_type}, {args.vocab_size:,} pieces) on "
    with Preparation("sentencepiece", f"{start}{len(lines):,} lines", ticking=True):
        return train_sentencepiece(lines, args.vocab_size, args.model_type)


def main(argv: list[str] | None = None) -> None:
    parser = CommandParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", default=DEFAULT_SOURCE, help="URL prefix or local folder")
    parser.add_argument("--out", default="data/multi30k", type=Path)
    parser.add_argument("--langs", nargs="+", default=["de", "en"])
    parser.add_argument(
        "--vocab-size", type=positive_int, default=6000, help="per language, or joint"
    )
    parser.add_argument("--model-type", choices=["unigram", "bpe"], default="unigram")
    parser.add_argument("--joint", action="store_true", help="one model shared by all languages")
    args = parser.parse_args(argv)
    names = [f"{split}.{lang}" for split in SPLITS for lang in args.langs]
    names += [f"spm.{lang}.model" for lang in args.langs]
    local = [] if "://" in args.source else [Path(args.source)]
    read = [f"{name}{gz}" for name in names for gz in ("", ".gz")]
    read = [folder / name for folder in local for name in read if (folder / name).exists()]
    check_outputs(parser, {"--out": args.out}, {}, folders={"--out"})
    check_outputs(parser, {"--out": [args.out / name for name in names]}, {"a --source file": read})

    corpus: dict[str, dict[str, list[str]]] = {}  # split -> lang -> lines
    for split in SPLITS:
        for lang in args.langs:
            name = f"{split}.{lang}"
            try:
                data = fetch(args.source, name, args.out / ".download")
            except (OSError, ValueError, EOFError, zlib.error) as error:
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
        models = dict.fromkeys(args.langs, trained(joint, "+".join(args.langs), args))
    else:
        models = {lang: trained(train_lines[lang], lang, args) for lang in args.langs}
    for lang, tokenizer in models.items():
        write_atomic(args.out / f"spm.{lang}.model", tokenizer.proto)
        print(f"spm.{lang}.model: {args.model_type}, {tokenizer.vocab_size} pieces")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
