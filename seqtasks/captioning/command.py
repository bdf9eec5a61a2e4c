"""Caption images with a trained checkpoint: one JSON record per image.

    seqtasks caption photo.jpg more_photos/ --checkpoint best.ckpt
    seqtasks caption photos/ --checkpoint best.ckpt --beam 3 --out captions.jsonl \\
        --attention-maps maps/
    seqtasks caption photos/ --checkpoint a.ckpt b.ckpt     # an ensemble

The model is loaded once and the images captioned in batches, at the size it was trained on.
A folder stands for the image files in it (by extension, sorted). Each image gives a record
{"image", "caption", "score"}, in input order; an image that cannot be read gives
{"image", "error"}, is reported on stderr and makes the exit status 1, and the other images are
still captioned. --out is written whole or not at all (to a temporary name, renamed when
complete). With --attention-maps, one PNG per image with a panel per word: the word's attention
map upsampled and laid over the image.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from seqtasks.cli.arguments import (
    CommandParser,
    add_device_option,
    add_model_option,
    add_search_options,
    check_outputs,
    given,
    positive_int,
)
from seqtasks.cli.loading import CommandError, load_model
from seqtasks.cli.streams import require_stdout, write_stdout
from seqtasks.io.files import write_atomic

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff"}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = CommandParser(prog="seqtasks caption", description=__doc__.split("\n\n")[0])
    parser.add_argument("inputs", nargs="+", type=Path, help="image files or folders of them")
    add_model_option(parser)
    add_search_options(parser)
    parser.add_argument(
        "--out", "--output", type=Path, help="write the JSON lines here (default: stdout)"
    )
    parser.add_argument("--attention-maps", type=Path, help="folder for one PNG per image")
    parser.add_argument("--batch-size", type=positive_int, default=16, help="images per batch")
    add_device_option(parser)
    args = parser.parse_args(argv)
    args.images = expand(args.inputs)
    maps = [] if args.attention_maps is None else map_names(args.images, args.attention_maps)
    check_outputs(
        parser,
        {"--out": args.out, "--attention-maps": args.attention_maps},
        {"an input image": args.images, "--checkpoint": args.checkpoint},
        folders={"--attention-maps"},
    )
    inputs = {path.resolve(): path for path in args.images}
    for path in maps:
        if path.resolve() in inputs:
            parser.error(
                f"argument --attention-maps: the map of {inputs[path.resolve()]} would be written "
                f"over that image ({path}): choose another folder"
            )
    args.maps = maps
    return args


def expand(inputs: list[Path]) -> list[Path]:
    """Files as given; folders as the image files in them, sorted."""
    paths = []
    for path in inputs:
        if path.is_dir():
            paths += sorted(p for p in path.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        else:
            paths.append(path)
    return paths


def map_names(paths: list[Path], folder: Path) -> list[Path]:
    """A distinct PNG in `folder` per image: its stem, numbered when stems repeat."""
    names, seen = [], {}
    for path in paths:
        seen[path.stem] = seen.get(path.stem, 0) + 1
        suffix = "" if seen[path.stem] == 1 else f"-{seen[path.stem]}"
        names.append(folder / f"{path.stem}{suffix}.png")
    return names


def main(argv: list[str] | None = None) -> int:
    """Caption the images; 0, 1 if some could not be read, 2 for a checkpoint or setting that
    will not do."""
    args = parse_args(argv)
    if args.out is None:
        require_stdout("--out FILE")
    from seqtasks.captioning.captions import load_images  # torch, PIL: after the arguments

    search = given(beam=args.beam, stop=args.stop)
    figures = "--attention-maps" if args.attention_maps else None
    try:
        model, settings = load_model(args.checkpoint, args.device, "captioning", search, figures)
    except CommandError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    beam = settings.beam
    if args.attention_maps:
        from seqtasks.io.plots import plot_caption_attention  # matplotlib: only for maps

    paths = args.images
    records: list[dict] = []
    errors: dict[int, str] = {}
    start = time.perf_counter()
    for first in range(0, len(paths), args.batch_size):
        chunk = range(first, min(first + args.batch_size, len(paths)))
        readable, pixels, failed = load_images([paths[i] for i in chunk], model.image_size)
        for j, error in failed.items():
            errors[first + j] = error
            print(f"error: {error}", file=sys.stderr)
        captions = []
        if pixels is not None:
            captions = model.caption(pixels, attention=args.attention_maps is not None, **search)
        by_index = {first + j: (pixels[k], c) for k, (j, c) in enumerate(zip(readable, captions))}
        for i in chunk:
            if i in errors:
                records.append({"image": str(paths[i]), "error": errors[i]})
                continue
            image, caption = by_index[i]
            records.append(
                {"image": str(paths[i]), "caption": caption.text, "score": caption.score}
            )
            if args.attention_maps and caption.attention is not None:
                plot_caption_attention(
                    image,
                    caption.words,
                    caption.attention,
                    caption.grid,
                    args.maps[i],
                )
    seconds = time.perf_counter() - start
    captioned = len(paths) - len(errors)
    text = "".join(json.dumps(record) + "\n" for record in records)
    if args.out:
        write_atomic(args.out, text)
    else:
        write_stdout(text)
    print(
        f"captioned {captioned} images in {seconds:.1f}s ({captioned / max(seconds, 1e-9):.2f}/s, "
        f"beam {beam}); {len(errors)} could not be read",
        file=sys.stderr,
    )
    return 1 if errors else 0
