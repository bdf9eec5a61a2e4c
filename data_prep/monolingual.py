"""Write unlabelled text, a sentence a line, for pre-training an encoder (docs/pretraining.md).

    python data_prep/monolingual.py                        # Brown + CoNLL-2000 from NLTK's data
    python data_prep/monolingual.py --source ../shared/data/monolingual      # the same zips, here
    python data_prep/monolingual.py --corpora --text data/multi30k/train.de \\
        --tokenizer data/multi30k/spm.de.model --out data/monolingual_de     # a corpus' source side

The corpora (`--corpora`, default both) are NLTK's data packages: `brown` (the Brown corpus, 500
samples of 1961 American English, 1.16M words) and `conll2000` (CoNLL-2000's WSJ text, sections
15–18 and 20, 259k words: none of them in the treebank sample that the parser trains and is
evaluated on, sections 00–01). --source is the https URL prefix they are downloaded from (the
default: nltk/nltk_data at a fixed commit, each zip with a pinned sha256; downloads are kept in
OUT/.download) or a folder holding `brown.zip` and `conll2000.zip`. `--text FILE` adds any text
file, a sentence a line (an empty line ends a document): the source side of a parallel corpus,
or your own. Their tokens are written as the corpora have them, space-separated (Brown's and
CoNLL's words without their tags; a text file's lines as they are).

No line of a held-out split reaches the output. A --text file named as a held-out split
(`val.*`, `valid.*`, `dev.*`, `test*`, `holdout*`) is refused; and every sentence equal to a line
of a held-out file is dropped, counted, and said: the files given by `--held-out`, and those of
the prepared data under `--task-data` (default `data`: `data/multi30k/test_2016_flickr.en`,
`data/ptb/dev.txt`, …). Lines are compared by their letters and digits, lower-cased, so the
same sentence tokenised two ways (`don't .` and `don't.`) is the same line.

Writes to --out (default data/monolingual): `train.txt` and `val.txt` (every 50th block of up to
100 sentences of a document, 2 %, or the last block of a smaller corpus: for the pre-training's
validation), sentences a line with an
empty line between documents (BERT's layout; next-sentence prediction pairs sentences within
one), `spm.model` (a sentencepiece model trained on train.txt, or a copy of --tokenizer: the
tokeniser goes with the text), and `sources.json` (what went in, the counts, the held-out files
checked). Everything is read and checked before anything is written, and each file is written
to a temporary name and renamed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from seqtasks.cli.arguments import CommandParser, check_outputs, positive_int
from seqtasks.data.text import decode_lines, read_lines
from seqtasks.data.tokenizer import SentencePieceTokenizer, train_sentencepiece
from seqtasks.io.downloads import download
from seqtasks.io.files import write_atomic
from seqtasks.io.preparation import Preparation

DEFAULT_SOURCE = (
    "https://raw.githubusercontent.com/nltk/nltk_data/"
    "5db857e6f7df11eabb5e5665836db9ec8df07e28/packages/corpora"
)
CORPORA = ("brown", "conll2000")
# `sha256sum` of ../shared/data/monolingual/{brown,conll2000}.zip, which its README says are the
# zips exactly as NLTK distributes them (this machine cannot download them to compare).
SHA256 = {
    f"{DEFAULT_SOURCE}/brown.zip": (
        "9b275f9b3b95d7bd66ccfb7cd259f445a13bbe5d1f4107aba09fd3e8364bafa6"
    ),
    f"{DEFAULT_SOURCE}/conll2000.zip": (
        "01e65164f268366e7caa0db92332a1955d081908c87016e2c7640c3c5279b7cd"
    ),
}
HELD_OUT_NAME = re.compile(r"^(val|valid|dev|test|holdout)([._]|$)", re.IGNORECASE)
BROWN_FILE = re.compile(r"brown/c[a-r]\d\d$")
BLOCK, VAL_EVERY = 100, 50  # sentences a block; every 50th block is validation

Document = list[str]  # its sentences, tokens space-separated


def brown(archive: zipfile.ZipFile) -> Iterator[Document]:
    """The Brown corpus' 500 samples, a document each: `word/tag` tokens, tags dropped."""
    for name in sorted(n for n in archive.namelist() if BROWN_FILE.search(n)):
        lines = decode_lines(archive.read(name), name)
        sentences = [" ".join(t.rsplit("/", 1)[0] for t in line.split()) for line in lines]
        yield [s for s in sentences if s]


def conll2000(archive: zipfile.ZipFile) -> Iterator[Document]:
    """CoNLL-2000's train.txt and test.txt, a document each (the data marks no articles): one
    `word POS chunk` line a token, an empty line after each sentence."""
    for name in ("conll2000/train.txt", "conll2000/test.txt"):
        sentences, words = [], []
        for line in decode_lines(archive.read(name), name) + [""]:
            if line.strip():
                words.append(line.split()[0])
            elif words:
                sentences.append(" ".join(words))
                words = []
        yield sentences


def text_file(path: Path) -> Iterator[Document]:
    """A text file's lines, an empty line ending a document."""
    document: Document = []
    for line in read_lines(path) + [""]:
        if line.strip():
            document.append(" ".join(line.split()))
        elif document:
            yield document
            document = []


def corpus_zip(source: str, corpus: str, cache: Path) -> zipfile.ZipFile:
    """`corpus`.zip from a URL prefix (downloaded into `cache`, its sha256 checked) or a folder."""
    if "://" in source:
        url = f"{source.rstrip('/')}/{corpus}.zip"
        return zipfile.ZipFile(download(url, cache, SHA256.get(url)))
    path = Path(source) / f"{corpus}.zip"
    if not path.is_file():
        raise FileNotFoundError(f"no {path}")
    return zipfile.ZipFile(path)


def line_key(line: str) -> str:
    """What two lines must share to be the same sentence: their letters and digits,
    lower-cased (the treebank's bracket tokens `-LRB-` … and tokenisation aside)."""
    line = re.sub(r"-[LR][RCS]B-", " ", line)
    return re.sub(r"[\W_]+", "", line.lower())


NOT_TEXT = {".mrg", ".model", ".json", ".jpg", ".png", ".gz", ".zip"}


def held_out_files(task_data: Path, given: Iterable[Path], out: Path) -> list[Path]:
    """The files given, and the held-out splits' text files of the prepared data under
    `task_data` (named as `HELD_OUT_NAME` says; trees, models and JSON left out), but those
    of `out`: this script's own validation split, which a second run would otherwise drop."""
    own = out.resolve()
    found = []
    for path in sorted(task_data.rglob("*")) if task_data.is_dir() else []:
        if not path.is_file() or not HELD_OUT_NAME.match(path.name) or path.suffix in NOT_TEXT:
            continue
        if ".download" not in path.parts and not path.resolve().is_relative_to(own):
            found.append(path)
    return list(dict.fromkeys([*given, *found]))


def blocks(documents: Iterable[Document]) -> list[tuple[bool, Document]]:
    """Each document cut into blocks of at most `BLOCK` sentences, as (is validation, block):
    every `VAL_EVERY`-th block over the whole corpus is validation, or the last one of a
    corpus of fewer blocks."""
    cut = [d[start : start + BLOCK] for d in documents for start in range(0, len(d), BLOCK)]
    if len(cut) < 2:
        raise ValueError(
            f"too little text: {sum(map(len, cut))} sentences, but validation "
            f"takes a block of {BLOCK} and training needs the rest"
        )
    chosen = set(range(VAL_EVERY - 1, len(cut), VAL_EVERY)) or {len(cut) - 1}
    return [(number in chosen, block) for number, block in enumerate(cut)]


def as_text(documents: list[Document]) -> str:
    return "\n".join("".join(s + "\n" for s in document) for document in documents)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = CommandParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", default=DEFAULT_SOURCE, help="URL prefix or local folder")
    parser.add_argument("--corpora", nargs="*", choices=CORPORA, default=list(CORPORA))
    parser.add_argument("--text", nargs="+", type=Path, default=[], help="text files to add")
    parser.add_argument(
        "--held-out", nargs="+", type=Path, default=[], help="files whose lines must not be written"
    )
    parser.add_argument(
        "--task-data",
        type=Path,
        default=Path("data"),
        help="prepared task data whose held-out splits are checked",
    )
    parser.add_argument("--tokenizer", type=Path, help="a sentencepiece model to use, not train")
    parser.add_argument("--vocab-size", type=positive_int, default=8000)
    parser.add_argument(
        "--model-type",
        choices=("unigram", "bpe", "word"),
        default="unigram",
        help="the trained tokeniser's kind: subwords (unigram, bpe) or whole words (word: one "
        "piece a word, the rest unknown; for a parser that reads words)",
    )
    parser.add_argument("--out", default=Path("data/monolingual"), type=Path)
    args = parser.parse_args(argv)
    if not args.corpora and not args.text:
        parser.error("nothing to write: name --corpora, or --text files")
    for path in args.text:
        if HELD_OUT_NAME.match(path.name):
            parser.error(
                f"argument --text: {path} is named as a held-out split; its lines "
                "must not be pre-trained on (use a training split)"
            )
        if not path.is_file():
            parser.error(f"argument --text: no such file: {path}")
    local = [] if "://" in args.source or not args.corpora else [Path(args.source)]
    inputs = {"--source": local, "--text": args.text, "--tokenizer": args.tokenizer}
    check_outputs(
        parser, {"--out": args.out}, {k: v for k, v in inputs.items() if v}, folders={"--out"}
    )
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    documents: list[Document] = []
    counts: dict[str, int] = {}
    try:
        tokenizer = (
            None if args.tokenizer is None else SentencePieceTokenizer.from_file(args.tokenizer)
        )
        for corpus in args.corpora:
            read = {"brown": brown, "conll2000": conll2000}[corpus]
            found = list(read(corpus_zip(args.source, corpus, args.out / ".download")))
            counts[corpus] = sum(map(len, found))
            documents += found
        for path in args.text:
            found = list(text_file(path))
            counts[str(path)] = sum(map(len, found))
            documents += found
        checked = held_out_files(args.task_data, args.held_out, args.out)
        held_out = {line_key(line) for path in checked for line in read_lines(path)}
    except (OSError, ValueError, zipfile.BadZipFile) as error:
        sys.exit(f"error: {error}")
    held_out.discard("")

    kept, dropped = [], 0
    for document in documents:
        sentences = [s for s in document if line_key(s) not in held_out]
        dropped += len(document) - len(sentences)
        if sentences:
            kept.append(sentences)
    if not kept:
        sys.exit("error: no sentence is left to write")
    train, val = [], []
    try:
        for is_val, block in blocks(kept):
            (val if is_val else train).append(block)
    except ValueError as error:
        sys.exit(f"error: {error}")
    train_lines = [s for block in train for s in block]
    if tokenizer is None:
        start = (
            f"training a {args.model_type} model of {args.vocab_size:,} pieces on "
            f"{len(train_lines):,} lines"
        )
        with Preparation("sentencepiece", start, ticking=True):
            tokenizer = train_sentencepiece(train_lines, args.vocab_size, args.model_type)

    write_atomic(args.out / "train.txt", as_text(train))
    write_atomic(args.out / "val.txt", as_text(val))
    write_atomic(args.out / "spm.model", tokenizer.proto)
    sources = {
        "sentences": counts,
        "train": len(train_lines),
        "val": sum(map(len, val)),
        "held_out_files": [str(p) for p in checked],
        "dropped_as_held_out": dropped,
        "tokenizer": f"trained, {args.model_type}, {tokenizer.vocab_size} pieces"
        if args.tokenizer is None
        else str(args.tokenizer),
    }
    write_atomic(args.out / "sources.json", json.dumps(sources, indent=1) + "\n")
    for name, count in counts.items():
        print(f"{name}: {count:,} sentences")
    print(f"checked against {len(checked)} held-out files: {dropped:,} sentences dropped")
    print(f"train.txt: {len(train_lines):,} sentences; val.txt: {sources['val']:,}")
    print(f"spm.model: {sources['tokenizer']}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
