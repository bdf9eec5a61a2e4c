"""Caption images with a trained checkpoint: one JSON record per image.

    python apps/caption.py photo.jpg more_photos/ --checkpoint best.ckpt
    python apps/caption.py photos/ --checkpoint best.ckpt --beam 3 --out captions.jsonl \\
        --attention-maps maps/
    python apps/caption.py photos/ --checkpoint a.ckpt b.ckpt     # an ensemble

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

import seqtasks
from seqtasks.cli.arguments import add_stop_option, check_outputs, device_name, positive_int
from seqtasks.data.captions import load_images
from seqtasks.io.checkpoint_files import CheckpointError
from seqtasks.io.files import write_atomic
from seqtasks.io.plots import plot_caption_attention

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff"}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("inputs", nargs="+", type=Path, help="image files or folders of them")
    parser.add_argument(
        "--checkpoint", required=True, type=Path, nargs="+", help="one, or several: an ensemble"
    )
    parser.add_argument("--beam", type=positive_int, default=3, help="beam size; 1 = greedy")
    add_stop_option(parser)
    parser.add_argument("--out", type=Path, help="write the JSON lines here (default: stdout)")
    parser.add_argument("--attention-maps", type=Path, help="folder for one PNG per image")
    parser.add_argument("--batch-size", type=positive_int, default=16, help="images per batch")
    parser.add_argument(
        "--device", type=device_name, default="auto", help="cpu, cuda, cuda:1 … or auto"
    )
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
    args = parse_args(argv)
    try:
        model = seqtasks.load(args.checkpoint, args.device, task="captioning")
    except (CheckpointError, FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.attention_maps and not model.gives_attention:
        name = type(model.task.decoder).__name__
        print(
            f"error: --attention-maps: {args.checkpoint[0]}'s {name} has no attention",
            file=sys.stderr,
        )
        return 2

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
            captions = model.caption(
                pixels, args.beam, attention=args.attention_maps is not None, stop=args.stop
            )
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
        sys.stdout.write(text)
    print(
        f"captioned {captioned} images in {seconds:.1f}s ({captioned / max(seconds, 1e-9):.2f}/s, "
        f"beam {args.beam}); {len(errors)} could not be read",
        file=sys.stderr,
    )
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
