"""Generate the shapes world (`seqtasks.captioning.shapes`): images, captions, scenes and splits.

    python data_prep/shapes.py                          # level 3 into data/shapes
    python data_prep/shapes.py --out data/shapes1 --level 1 --seed 7
    python data_prep/shapes.py --out data/shapes8 --level 4 --max-objects 8 --noise 0.05

Writes `images/*.png`, `captions.txt` (CSV image,caption), `splits.json` (train, val, test,
holdout), `scenes.json` (every shape's kind, colour, size, cell and box) and `world.json` (the
knobs and the seed) into --out: the layout `seqtasks.captioning.data.CaptionData` reads, and the one
`ShapesData` writes on first use. The same arguments always give the same files.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict, replace
from pathlib import Path

from seqtasks.captioning.shapes import DEFAULT_COUNTS, LEVELS, write_world
from seqtasks.cli.arguments import CommandParser, check_outputs, non_negative_int, positive_int


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("data/shapes"))
    parser.add_argument("--level", type=int, choices=sorted(LEVELS), default=3)
    parser.add_argument("--seed", type=int, default=0)
    sizes = parser.add_argument_group("images per split (as ShapesData's counts)")
    for split, count in asdict(DEFAULT_COUNTS).items():
        sizes.add_argument(f"--{split}", type=non_negative_int, default=count)
    knobs = parser.add_argument_group("knobs (override the level's)")
    knobs.add_argument("--min-objects", type=positive_int)
    knobs.add_argument("--max-objects", type=positive_int)
    knobs.add_argument("--relations", action=argparse.BooleanOptionalAction)
    knobs.add_argument("--distractors", action=argparse.BooleanOptionalAction)
    knobs.add_argument("--sizes", action=argparse.BooleanOptionalAction)
    knobs.add_argument("--image-size", type=positive_int)
    knobs.add_argument("--noise", type=float)
    knobs.add_argument("--holdout-pairs", nargs="*", help='colour–shape pairs, e.g. "red square"')
    args = parser.parse_args(argv)
    check_outputs(parser, {"--out": args.out}, {}, folders={"--out"})

    overrides = {
        name: value
        for name, value in [
            ("min_objects", args.min_objects),
            ("max_objects", args.max_objects),
            ("relations", args.relations),
            ("distractors", args.distractors),
            ("sizes", args.sizes),
            ("image_size", args.image_size),
            ("noise", args.noise),
            ("holdout", None if args.holdout_pairs is None else tuple(args.holdout_pairs)),
        ]
        if value is not None
    }
    world = replace(LEVELS[args.level], **overrides)
    if not 1 <= world.min_objects <= world.max_objects <= 8:
        parser.error("need 1 <= --min-objects <= --max-objects <= 8")
    counts = {split: getattr(args, split) for split in asdict(DEFAULT_COUNTS)}
    write_world(args.out, world, counts, args.seed)
    print(f"wrote {sum(counts.values())} images ({counts}) to {args.out}: {world}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
