"""Get Penn Treebank WSJ trees, clean them and write the standard splits.

    python data_prep/ptb.py                                     # NLTK's public WSJ sample
    python data_prep/ptb.py --source ../shared/data/ptb_sample  # a local copy of the sample
    python data_prep/ptb.py --source /corpora/LDC99T42/parsed/mrg/wsj   # the full treebank

--source is an https URL or path of a zip file, or a folder searched recursively for
`wsj_*.mrg`. The default, NLTK's treebank.zip at a fixed commit of nltk/nltk_data, has a pinned
sha256 (a download that differs is refused); downloads are kept in OUT/.download. The
full treebank (sections 00–24, wsj_SSNN.mrg) gets the standard split: sections 02–21 train,
22 dev, 23 test. The NLTK sample (wsj_0001–wsj_0199, sections 00–01 only) gets wsj_0001–0159
train, wsj_0160–0179 dev, wsj_0180–0199 test (the shared copy stops at wsj_0179: no test).

Trees are cleaned the standard way (see `seqtasks.parsing.trees.clean_tree`: no `-NONE-`, no
function
tags or indices, rooted in `TOP`). Writes to --out (default data/ptb) `{split}.mrg`, one tree
per line, which `ParsingData` reads and `seqtasks evaluate parsing --gold` scores against, and
`{split}.txt`, the sentences as space-separated tokens (input for `seqtasks parse
--pretokenized`). Each file is written to a temporary name and renamed when complete.
"""

from __future__ import annotations

import re
import sys
import zipfile
from pathlib import Path

from seqtasks.cli.arguments import CommandParser, check_outputs
from seqtasks.io.downloads import download
from seqtasks.io.files import write_atomic
from seqtasks.io.preparation import Preparation
from seqtasks.parsing.trees import TreebankError, clean_tree, decode_trees, to_line

DEFAULT_SOURCE = (
    "https://raw.githubusercontent.com/nltk/nltk_data/"
    "5db857e6f7df11eabb5e5665836db9ec8df07e28/packages/corpora/treebank.zip"
)
# `sha256sum` of the git blob at that commit; its treebank/combined/wsj_0001-0179.mrg are byte
# for byte the files in ../shared/data/ptb_sample.
SHA256 = {DEFAULT_SOURCE: "9da92d76c3666cfb6cddeaed0f7e86b344cce0f0928a286d439e555f19c37399"}
FILE_NAME = re.compile(r"wsj_(\d{2})(\d{2})\.mrg$")
STANDARD = {"train": range(2, 22), "dev": range(22, 23), "test": range(23, 24)}  # sections
SAMPLE = {"train": range(1, 160), "dev": range(160, 180), "test": range(180, 200)}  # files


def fetch(source: str, cache: Path) -> dict[str, bytes]:
    """The `wsj_*.mrg` files under a zip URL (downloaded into `cache`), a zip file or a folder:
    {path: bytes}."""
    if "://" in source:
        with zipfile.ZipFile(download(source, cache, SHA256.get(source))) as archive:
            return _from_zip(archive)
    path = Path(source)
    if path.is_file() and zipfile.is_zipfile(path):
        return _from_zip(zipfile.ZipFile(path))
    if not path.is_dir():
        raise FileNotFoundError(f"no such folder or zip file: {path}")
    return {str(p): p.read_bytes() for p in sorted(path.rglob("wsj_*.mrg"))}


def _from_zip(archive: zipfile.ZipFile) -> dict[str, bytes]:
    return {n: archive.read(n) for n in sorted(archive.namelist()) if FILE_NAME.search(n)}


def split_of(name: str, sample: bool) -> str | None:
    """The split a file belongs to, or None (sections 00, 01 and 24 of the full treebank)."""
    match = FILE_NAME.search(name)
    section, number = int(match.group(1)), int(match.group(1) + match.group(2))
    for split, chosen in (SAMPLE if sample else STANDARD).items():
        if (number if sample else section) in chosen:
            return split
    return None


def main(argv: list[str] | None = None) -> None:
    parser = CommandParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", default=DEFAULT_SOURCE, help="zip URL, zip file or folder")
    parser.add_argument("--out", default="data/ptb", type=Path)
    args = parser.parse_args(argv)
    local = [] if "://" in args.source else [Path(args.source)]
    check_outputs(parser, {"--out": args.out}, {"--source": local}, folders={"--out"})

    try:
        files = fetch(args.source, args.out / ".download")
    except (OSError, ValueError, zipfile.BadZipFile) as error:
        sys.exit(f"error: cannot read {args.source}: {error}")
    if not files:
        sys.exit(f"error: no wsj_*.mrg files in {args.source}")
    sample = all(int(FILE_NAME.search(name).group(1)) <= 1 for name in files)
    trees: dict[str, list[str]] = {split: [] for split in STANDARD}
    start = f"reading and cleaning the trees of {len(files):,} files from {args.source}"
    with Preparation("treebank", start, len(files), "files") as preparation:
        for name, data in files.items():
            preparation.advance()
            split = split_of(name, sample)
            if split is None:
                continue
            try:
                parsed = decode_trees(data, name)
            except TreebankError as error:
                sys.exit(f"error: {error}")
            for number, tree in enumerate(parsed, start=1):
                cleaned = clean_tree(tree)
                if cleaned is None:
                    print(f"warning: {name}: tree {number} is empty after cleaning; skipped")
                    continue
                trees[split].append(cleaned)

    layout = "NLTK sample split" if sample else "standard split (02-21 / 22 / 23)"
    print(f"{len(files)} files from {args.source}: {layout}")
    for split, chosen in trees.items():
        if not chosen:
            print(f"{split}: no trees")
            continue
        write_atomic(args.out / f"{split}.mrg", "".join(to_line(t) + "\n" for t in chosen))
        write_atomic(
            args.out / f"{split}.txt", "".join(" ".join(t.leaves()) + "\n" for t in chosen)
        )
        print(f"{split}: {len(chosen)} trees, {sum(len(t.leaves()) for t in chosen)} words")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
