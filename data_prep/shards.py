"""Tokenise a parallel corpus once into binary shards that `ShardedTranslationData` trains from.

    python data_prep/shards.py --source data/multi30k          # -> data/multi30k/shards
    python data_prep/shards.py --source /corpora/wmt14 --models data/wmt14 --langs en de \\
        --out data/wmt14/shards --threads 2

--source is a folder holding the line-aligned `{split}.{lang}` files (plain, or gzipped as
`{split}.{lang}.gz`), one sentence a line; --models a folder holding `spm.{lang}.model` for both
languages (default: --source), as `TranslationData` reads them. The files are streamed in
chunks, so memory holds one shard, never the corpus. Pairs are filtered as `TranslationData`
filters training pairs: stripped lines, and a pair with an empty side or a side over
--max-length subwords is skipped; the counts are printed and kept in the manifest.

Writes to --out (default MODELS/shards, where `ShardedTranslationData` looks): `manifest.json`
and `{k:05d}.{src,tgt,index}.npy` per shard of --shard-size pairs (format in
`seqtasks/data/shards.py`). Every file is written to a temporary name and renamed, and the
manifest goes last, so an interrupted run leaves no folder that looks complete.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from seqtasks.cli.arguments import CommandParser, check_outputs, positive_int
from seqtasks.data.tokenizer import SentencePieceTokenizer
from seqtasks.translation.streaming.write import write_shards


def text_file(folder: Path, name: str) -> Path:
    """`folder/name`, or `folder/name.gz` if only that exists."""
    for candidate in (folder / name, folder / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"neither {folder / name} nor {folder / name}.gz exists")


def main(argv: list[str] | None = None) -> None:
    parser = CommandParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", required=True, type=Path, help="folder of {split}.{lang}")
    parser.add_argument("--split", default="train")
    parser.add_argument("--langs", nargs=2, default=["de", "en"], metavar=("SRC", "TGT"))
    parser.add_argument("--models", type=Path, help="folder of spm.{lang}.model (default: source)")
    parser.add_argument("--out", type=Path, help="shard folder (default: MODELS/shards)")
    parser.add_argument(
        "--shard-size", type=positive_int, default=1_000_000, help="pairs per shard"
    )
    parser.add_argument(
        "--max-length", type=positive_int, default=100, help="subwords per side at most"
    )
    parser.add_argument(
        "--threads", type=positive_int, default=1, help="sentencepiece encoding threads"
    )
    args = parser.parse_args(argv)
    models = args.models or args.source
    out = args.out or models / "shards"
    read = [args.source / f"{args.split}.{lang}{gz}" for lang in args.langs for gz in ("", ".gz")]
    read += [models / f"spm.{lang}.model" for lang in args.langs]
    check_outputs(parser, {"--out": out}, {"an input file": read}, folders={"--out"})

    try:
        paths = [text_file(args.source, f"{args.split}.{lang}") for lang in args.langs]
        tokenizers = [
            SentencePieceTokenizer.from_file(models / f"spm.{lang}.model") for lang in args.langs
        ]
        start = time.perf_counter()
        manifest = write_shards(
            *paths,
            tokenizers=tuple(tokenizers),
            langs=tuple(args.langs),
            out=out,
            shard_size=args.shard_size,
            max_length=args.max_length,
            threads=args.threads,
        )
    except (OSError, ValueError) as error:
        sys.exit(f"error: {error}")
    seconds = time.perf_counter() - start
    print(
        f"{manifest['lines']} lines: {manifest['pairs']} pairs in {len(manifest['shards'])} "
        f"shards; skipped {manifest['skipped_empty']} with an empty side and "
        f"{manifest['skipped_too_long']} over {args.max_length} subwords"
    )
    print(f"wrote {out} in {seconds:.1f} s ({manifest['lines'] / seconds:,.0f} lines/s)")


if __name__ == "__main__":
    main()
