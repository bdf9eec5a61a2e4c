"""Captioned images on disk: the two common layouts, and reading an image as a tensor.

- A folder with `captions.txt` (CSV `image,caption`, one row per caption: the Kaggle Flickr8k
  layout) and the images in `images/` (or beside it). An optional `splits.json` maps split
  names to image names (`data_prep/shapes.py` and `data_prep/captions.py` write one) and an
  optional `scenes.json` the shapes world's scenes.
- A Karpathy split file (`dataset_flickr8k.json`, `dataset_flickr30k.json`, `dataset_coco.json`):
  `images[].filename/filepath/split/sentences[].tokens`, with "restval" counted as train.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import re
import struct
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from PIL import Image
from torch import Tensor

from seqtasks.captioning.shapes import Scene
from seqtasks.data.text import read_lines
from seqtasks.data.words import words

log = logging.getLogger(__name__)
VAL_IMAGES, TEST_IMAGES = 50, 100  # split sizes for a source without splits


@dataclass
class CaptionedImage:
    """One image, its reference captions, its split (None if the source has none) and, in the
    shapes world, its scene."""

    path: Path
    captions: list[str]
    split: str | None = None
    scene: Scene | None = None

    @property
    def name(self) -> str:
        return self.path.name


ImageSource = str | Path | bytes | Image.Image  # a file, an encoded file's bytes, or an image


def load_image(path: ImageSource, size: int, name: str | None = None) -> Tensor:
    """(3, size, size) RGB in [0, 1]: the whole image resized to a square, aspect ignored
    (`decode_image`, then `as_pixels`).
    `path` is a file, the bytes of an encoded image (an upload), or a PIL image.

    Raises:
        OSError: as `decode_image`.
    """
    return as_pixels(decode_image(path, size, name))


def as_pixels(decoded: Tensor) -> Tensor:
    """(3, S, S) RGB in [0, 1] of a (S, S, 3) uint8 image (`decode_image`'s)."""
    return decoded.permute(2, 0, 1).float() / 255.0


def decode_image(path: ImageSource, size: int, name: str | None = None) -> Tensor:
    """(size, size, 3) uint8 RGB: the whole image resized to a square, aspect ignored.
    `path` is a file, the bytes of an encoded image (an upload), or a PIL image.

    Raises:
        OSError: naming the file (or `name`), when it is missing or not an image PIL can read;
            Pillow's decoders raise SyntaxError (a PNG chunk), struct.error, IndexError … on
            damaged files.
    """
    if name is None:
        name = f"({len(path)} bytes)" if isinstance(path, bytes) else str(path)
    try:
        if isinstance(path, Image.Image):
            opened = nullcontext(path)  # the caller's image: not ours to close
        else:
            opened = Image.open(io.BytesIO(path) if isinstance(path, bytes) else path)
        with opened as image:
            rgb = image.convert("RGB").resize((size, size), Image.Resampling.BICUBIC)
    except (
        OSError,
        ValueError,
        SyntaxError,
        struct.error,
        IndexError,
        TypeError,
        EOFError,
        Image.DecompressionBombError,
    ) as error:
        # Pillow names an in-memory file by its repr (<_io.BytesIO object at 0x…>): not useful.
        reason = re.sub(r"\s*<_io\.BytesIO object at 0x[0-9a-f]+>", "", str(error))
        raise OSError(f"cannot read image {name}: {reason}") from None
    return torch.frombuffer(bytearray(rgb.tobytes()), dtype=torch.uint8).view(size, size, 3)


def load_images(
    paths: Sequence[ImageSource], size: int
) -> tuple[list[int], Tensor | None, dict[int, str]]:
    """The images at `paths` that can be read: their positions in `paths`, (B, 3, size, size)
    their pixels (None if none can be read), and for the position of each image that cannot,
    `load_image`'s message naming it. An app captions the rest and reports those."""
    readable, pixels, errors = [], [], {}
    for position, path in enumerate(paths):
        try:
            pixels.append(load_image(path, size))
            readable.append(position)
        except OSError as error:
            errors[position] = str(error)
    return readable, torch.stack(pixels) if pixels else None, errors


def check_image_name(name: str, where: str) -> None:
    """Refuse an image name of a caption source that is not a path inside the image folder.

    Raises:
        ValueError: naming `where` (file and line, or entry) if `name` is absolute or climbs out
            with `..`: a caption source may make its readers read only files inside the folder.
    """
    relative = Path(name)
    if relative.is_absolute() or ".." in relative.parts or not relative.parts:
        raise ValueError(
            f"{where}: image {name!r} is not inside the image folder (only files inside it are "
            "read)"
        )


def _image_folder(root: Path, first: Path) -> Path:
    """`root/images` if the first image is there, else `root`."""
    return root / "images" if (root / "images" / first).exists() else root


def read_json(path: Path) -> Any:
    """The content of a UTF-8 JSON file; errors name the file (and the line, for JSON)."""
    try:
        return json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: invalid UTF-8 at byte {error.start}") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}:{error.lineno}: invalid JSON: {error.msg}") from None


def read_caption_folder(folder: Path, image_dir: Path | None = None) -> list[CaptionedImage]:
    """Images of a `captions.txt` folder, in order of first appearance; they are looked for
    in `image_dir` (default: the folder's `images/`, or the folder itself). Blank lines are
    skipped with a warning that counts them."""
    table = folder / "captions.txt"
    if not table.is_file():
        raise FileNotFoundError(f"{table} not found: a caption folder needs captions.txt")
    by_image: dict[str, list[str]] = {}
    reader = csv.reader(read_lines(table))
    header = next(reader, None)
    if header is None or [h.strip() for h in header[:2]] != ["image", "caption"]:
        raise ValueError(f"{table}: the first row must be the header 'image,caption'")
    blank = 0
    for row in reader:
        if not any(cell.strip() for cell in row):
            blank += 1
        elif len(row) != 2:
            raise ValueError(f"{table}:{reader.line_num}: expected 'image,caption', got {row!r}")
        else:
            check_image_name(row[0].strip(), f"{table}:{reader.line_num}")
            by_image.setdefault(row[0].strip(), []).append(row[1].strip())
    if blank:
        log.warning("%s: skipped %d blank lines", table, blank)
    if not by_image:
        raise ValueError(f"{table} has no captions")
    splits: dict[str, str] = {}
    if (folder / "splits.json").is_file():
        listed = read_json(folder / "splits.json")
        splits = {name: split for split, names in listed.items() for name in names}
    scenes = {}
    if (folder / "scenes.json").is_file():
        scenes = read_json(folder / "scenes.json")
    images = image_dir or _image_folder(folder, Path(next(iter(by_image))))
    return [
        CaptionedImage(
            images / name,
            captions,
            splits.get(name),
            Scene.from_dict(scenes[name]) if name in scenes else None,
        )
        for name, captions in by_image.items()
    ]


def read_karpathy(path: Path, image_dir: Path | None = None) -> list[CaptionedImage]:
    """Images of a Karpathy split file; they are looked for under `image_dir` (default: the
    file's folder, or its `images/`), in `filepath/filename` when a filepath is given."""
    if not path.is_file():
        raise FileNotFoundError(f"no such Karpathy split file: {path}")
    content = read_json(path)
    entries = content.get("images") if isinstance(content, dict) else None
    if not entries:
        raise ValueError(f"{path} lists no images (it needs a non-empty 'images' list)")
    images, root = [], image_dir
    for number, entry in enumerate(entries):
        try:
            relative = Path(entry.get("filepath", "")) / entry["filename"]
            check_image_name(str(relative), f"{path}: images[{number}]")
            captions = [" ".join(sentence["tokens"]) for sentence in entry["sentences"]]
            split = "train" if entry["split"] == "restval" else entry["split"]
        except (KeyError, TypeError, AttributeError) as error:
            raise ValueError(
                f"{path}: images[{number}] needs filename, split and sentences[].tokens "
                f"({type(error).__name__}: {error})"
            ) from None
        root = root or _image_folder(path.parent, relative)
        images.append(CaptionedImage(root / relative, captions, split))
    return images


def without_empty_captions(images: list[CaptionedImage], source: Path) -> list[CaptionedImage]:
    """The images with their captions that have a word (see `words`), and a warning that
    counts the captions and images left out."""
    kept, empty = [], 0
    for image in images:
        captions = [c for c in image.captions if words(c)]
        empty += len(image.captions) - len(captions)
        if captions:
            kept.append(CaptionedImage(image.path, captions, image.split, image.scene))
    if empty or len(kept) < len(images):
        log.warning(
            "%s: left out %d captions without a word, and %d images left with no caption",
            source,
            empty,
            len(images) - len(kept),
        )
    return kept


def assign_splits(images: list[CaptionedImage], val_images: int, test_images: int) -> None:
    """Give a source without splits some, in order: the last `test_images` images are "test",
    the `val_images` before them "val", the rest "train". A source with splits keeps them."""
    if any(image.split is not None for image in images):
        return
    if val_images + test_images >= len(images):
        raise ValueError(
            f"{len(images)} images cannot give {val_images} validation and {test_images} test "
            "images and still leave some for training"
        )
    val_from, test_from = len(images) - val_images - test_images, len(images) - test_images
    for position, image in enumerate(images):
        if position >= test_from:
            image.split = "test"
        elif position >= val_from:
            image.split = "val"
        else:
            image.split = "train"


def read_captions(
    source: str | Path,
    image_dir: str | Path | None = None,
    val_images: int = VAL_IMAGES,
    test_images: int = TEST_IMAGES,
) -> dict[str, list[CaptionedImage]]:
    """The captioned images of `source`, a `captions.txt` folder or a Karpathy `.json` file
    (with the images in `image_dir` when given), by split (see `assign_splits`). Images of a
    folder with a `splits.json` that it does not list are left out, with a warning; so are
    captions without a word, and images left without a caption."""
    source, image_dir = Path(source), Path(image_dir) if image_dir else None
    if source.suffix == ".json":
        images = read_karpathy(source, image_dir)
    elif source.is_dir():
        images = read_caption_folder(source, image_dir)
    else:
        raise FileNotFoundError(f"no such caption folder or Karpathy file: {source}")
    images = without_empty_captions(images, source)
    assign_splits(images, val_images, test_images)
    splits: dict[str, list[CaptionedImage]] = {}
    for image in images:
        if image.split is not None:
            splits.setdefault(image.split, []).append(image)
    left_out = sum(image.split is None for image in images)
    if left_out:
        log.warning("%s: %d images belong to no split and are left out", source, left_out)
    return splits
