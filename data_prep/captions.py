"""Gather captioned images into the layout `seqtasks.captioning.data.CaptionData` reads.

    python data_prep/captions.py                                  # Flickr8k from its public copy
    python data_prep/captions.py --source ../shared/data/flickr8k_subset --out data/flickr8k
    python data_prep/captions.py --source dataset_flickr8k.json --images Flicker8k_Dataset \\
        --out data/flickr8k_karpathy

--source takes local paths or https URLs (downloads are kept in OUT/.download, zip archives
are unpacked there): a folder with `captions.txt` (CSV image,caption: the Kaggle Flickr8k
layout), a folder with `Flickr8k.token.txt` and the `Flickr_8k.{train,dev,test}Images.txt`
split lists (the original Flickr8k text release), or a Karpathy split file
(`dataset_flickr8k.json` …: images[].filename/filepath/split/sentences[].tokens). The images
are found in --images, or beside the captions; an image named outside that folder (an absolute
path, or one with `..`) is refused. The default Flickr8k zips have no pinned sha256 yet: their
download prints the sha256 found.

Writes into --out: `images/` (copies), `captions.txt` and, when the source has splits,
`splits.json`. Every file is written to a temporary name and renamed when complete.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import sys
import zipfile
from pathlib import Path

from seqtasks.captioning.captions import (
    CaptionedImage,
    check_image_name,
    read_caption_folder,
    read_karpathy,
)
from seqtasks.cli.arguments import CommandParser, check_outputs
from seqtasks.data.text import read_lines
from seqtasks.io.downloads import download
from seqtasks.io.files import open_atomic, temporary_path, write_atomic
from seqtasks.io.preparation import Preparation

DEFAULT_SOURCE = [
    "https://github.com/jbrownlee/Datasets/releases/download/Flickr8k/Flickr8k_Dataset.zip",
    "https://github.com/jbrownlee/Datasets/releases/download/Flickr8k/Flickr8k_text.zip",
]
FLICKR8K_SPLITS = {"train": "trainImages", "val": "devImages", "test": "testImages"}
# Pinned checksums of known sources, by URL. None yet for the Flickr8k release zips above: no
# copy of them was at hand to hash, and a checksum is pinned only from the file itself.
SHA256: dict[str, str] = {}


def fetch(source: str, downloads: Path) -> Path:
    """A local path as it is; a URL downloaded into `downloads` (and unpacked if a zip)."""
    if "://" not in source:
        path = Path(source)
        if not path.exists():
            raise FileNotFoundError(f"no such source: {path}")
        return path
    target = download(source, downloads, SHA256.get(source))
    if target.suffix != ".zip":
        return target
    unpacked = target.with_suffix("")
    if not unpacked.exists():  # unpacked beside it and renamed, so it is never half there
        partial = temporary_path(unpacked)
        try:
            with zipfile.ZipFile(target) as archive:
                members = archive.infolist()
                start = f"unpacking {len(members):,} files of {target.name}"
                with Preparation("download", start, len(members), "files") as preparation:
                    for member in members:
                        archive.extract(member, partial)
                        preparation.advance()
            partial.replace(unpacked)
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    return unpacked


def find(roots: list[Path], name: str) -> Path | None:
    """The first file or folder called `name` in or under `roots`."""
    for root in roots:
        if root.name == name:
            return root
        if root.is_dir():
            found = next(root.rglob(name), None)
            if found is not None:
                return found
    return None


def read_flickr8k_text(token_file: Path, images: Path) -> list[CaptionedImage]:
    """The original Flickr8k text release: `image#n<TAB>caption` lines and split lists."""
    captions: dict[str, list[str]] = {}
    for number, line in enumerate(read_lines(token_file), start=1):
        if not line.strip():
            continue
        if "\t" not in line:
            raise ValueError(f"{token_file}:{number}: expected 'image#n<TAB>caption', got {line!r}")
        key, caption = line.split("\t", 1)
        check_image_name(key.split("#")[0], f"{token_file}:{number}")
        captions.setdefault(key.split("#")[0], []).append(caption.strip())
    splits = {}
    for split, stem in FLICKR8K_SPLITS.items():
        listing = token_file.parent / f"Flickr_8k.{stem}.txt"
        if listing.is_file():
            splits |= {name: split for line in read_lines(listing) for name in line.split()}
    return [CaptionedImage(images / name, c, splits.get(name)) for name, c in captions.items()]


def gather(roots: list[Path], images: Path | None) -> list[CaptionedImage]:
    """The captioned images of the fetched sources, in the first layout found."""
    karpathy = next((r for r in roots if r.suffix == ".json"), None)
    if karpathy is not None:
        return read_karpathy(karpathy, images)
    table = find(roots, "captions.txt")
    if table is not None:
        return read_caption_folder(table.parent, images)
    tokens = find(roots, "Flickr8k.token.txt")
    if tokens is not None:
        folder = images or find(roots, "Flicker8k_Dataset") or find(roots, "Flickr8k_Dataset")
        if folder is None:
            raise FileNotFoundError("Flickr8k.token.txt found but no image folder: use --images")
        return read_flickr8k_text(tokens, folder)
    raise FileNotFoundError(f"no captions.txt, Flickr8k.token.txt or .json in {roots}")


def check_distinct_names(captioned: list[CaptionedImage]) -> None:
    """Refuse sources in which two different images have one file name (in two subfolders of a
    Karpathy file): copied into one `images/` folder, one would take the other's captions."""
    seen: dict[str, Path] = {}
    for image in captioned:
        first = seen.setdefault(image.name, image.path)
        if first != image.path:
            raise ValueError(
                f"two images would both be written as images/{image.name}: {first} and "
                f"{image.path}; rename one of them"
            )


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", nargs="+", default=DEFAULT_SOURCE, help="paths or URLs")
    parser.add_argument("--images", type=Path, help="the image folder, if not beside the captions")
    parser.add_argument("--out", type=Path, default=Path("data/flickr8k"))
    args = parser.parse_args(argv)
    local = [Path(source) for source in args.source if "://" not in source]
    check_outputs(parser, {"--out": args.out}, {"--source": local}, folders={"--out"})
    try:
        roots = [fetch(source, args.out / ".download") for source in args.source]
        captioned = gather(roots, args.images)
        missing = [image.path for image in captioned if not image.path.is_file()]
        if missing:
            raise FileNotFoundError(f"{len(missing)} images are missing, e.g. {missing[0]}")
        check_distinct_names(captioned)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    sources = [p for root in roots for p in (root.iterdir() if root.is_dir() else [root])]
    tables = [args.out / "captions.txt", args.out / "splits.json"]
    check_outputs(parser, {"--out": tables}, {"a --source file": sources})

    (args.out / "images").mkdir(parents=True, exist_ok=True)
    rows = io.StringIO()
    writer = csv.writer(rows, lineterminator="\n")
    writer.writerow(["image", "caption"])
    splits: dict[str, list[str]] = {}
    start = f"copying {len(captioned):,} images into {args.out / 'images'}"
    with Preparation("captions", start, len(captioned), "images") as preparation:
        for image in captioned:
            # Copied even when the name is there already: it may be another source's image.
            copy = open_atomic(args.out / "images" / image.name)
            with open(image.path, "rb") as original, copy as f:
                shutil.copyfileobj(original, f)
            writer.writerows([image.name, caption] for caption in image.captions)
            if image.split is not None:
                splits.setdefault(image.split, []).append(image.name)
            preparation.advance()
    write_atomic(args.out / "captions.txt", rows.getvalue())
    if splits:
        write_atomic(args.out / "splits.json", json.dumps(splits))
    counts = {split: len(names) for split, names in splits.items()} or "none"
    print(f"wrote {len(captioned)} images to {args.out} (splits: {counts})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
