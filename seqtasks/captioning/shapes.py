"""The shapes world: captioning data generated from a seed, the embedded default.

Each image shows 1–8 coloured shapes, one per cell of a 3×3 layout (jittered inside the
cell). Its reference captions are deterministic paraphrases whose truth depends on *where*
things are: the inventory in reading order, each shape's location ("in the top left
corner"), relations between neighbours in reading order ("left of", "above") and counts per
colour. Scenes record every shape's box, so captions can be checked against the scene and
attention against the shapes (`seqtasks.captioning.judgements`). The hold-out split shows
colour–shape pairs that never occur in the other splits (compositional generalisation).
"""

from __future__ import annotations

import csv
import io
import json
import random
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from seqtasks.io.files import write_atomic
from seqtasks.io.preparation import Preparation

GRID = 3
COLOURS = {
    "red": (230, 50, 50),
    "green": (40, 180, 70),
    "blue": (60, 110, 245),
    "yellow": (240, 220, 40),
    "purple": (175, 80, 225),
}
SHAPES = ("circle", "square", "triangle", "diamond")
SIZES = {"small": 0.24, "large": 0.4}  # radius, as a fraction of a cell's side
LOCATIONS = {
    (0, 0): "in the top left corner",
    (0, 1): "at the top",
    (0, 2): "in the top right corner",
    (1, 0): "on the left",
    (1, 1): "in the middle",
    (1, 2): "on the right",
    (2, 0): "in the bottom left corner",
    (2, 1): "at the bottom",
    (2, 2): "in the bottom right corner",
}
NUMBERS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
BACKGROUND = (24, 24, 24)
SUPERSAMPLE = 4  # shapes are drawn at 4× and box-filtered down, for smooth edges


@dataclass(frozen=True)
class World:
    """The difficulty knobs.

    Attributes:
        min_objects, max_objects: shapes per image (1–8).
        relations: add the caption of relations between neighbours in reading order.
        distractors: every shape shares its colour or its shape with another one.
        sizes: shapes come small and large, and captions say which.
        image_size: side of the square images in pixels; 48, a multiple of 3 × 8, makes every
            cell of the 3×3 layout exactly 2×2 patches of 8 px (`seqtasks.encoders.PatchEncoder`).
        noise: standard deviation of Gaussian pixel noise (0–1 scale).
        holdout: colour–shape pairs kept out of train/val/test; each hold-out image has one.
    """

    min_objects: int = 3
    max_objects: int = 4
    relations: bool = True
    distractors: bool = True
    sizes: bool = False
    image_size: int = 48
    noise: float = 0.0
    holdout: tuple[str, ...] = ("red square", "green circle", "blue triangle", "yellow diamond")


LEVELS = {
    1: World(1, 2, relations=False, distractors=False),
    2: World(2, 3, relations=True, distractors=False),
    3: World(3, 4, relations=True, distractors=True),
    4: World(1, 8, relations=True, distractors=True, sizes=True, noise=0.03),
}


@dataclass
class Thing:
    """One shape in a scene; `box` is (x0, y0, x1, y1) in pixels."""

    shape: str
    colour: str
    size: str
    row: int
    column: int
    box: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)

    @property
    def pair(self) -> str:
        return f"{self.colour} {self.shape}"

    def noun_phrase(self, sizes: bool) -> str:
        return f"a {self.size} {self.pair}" if sizes else f"a {self.pair}"


@dataclass
class Scene:
    """The shapes of one image in reading order (by row, then column)."""

    things: list[Thing]
    image_size: int
    sizes: bool = False
    relations: bool = True

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Scene:
        things = [Thing(**{**t, "box": tuple(t["box"])}) for t in data["things"]]
        return cls(things, data["image_size"], data["sizes"], data["relations"])


def sample_scene(world: World, rng: random.Random, holdout: bool) -> Scene:
    """A random scene; with `holdout` its first shape has a held-out colour–shape pair, else
    no shape has one. No two shapes have the same description."""
    count = rng.randint(world.min_objects, world.max_objects)
    allowed = {f"{c} {s}" for c in COLOURS for s in SHAPES}
    if not holdout:
        allowed -= set(world.holdout)
    sizes = list(SIZES) if world.sizes else ["large"]
    chosen: list[tuple[str, str, str]] = []  # (size, colour, shape)
    while len(chosen) < count:
        size = rng.choice(sizes)
        if not chosen and holdout:
            colour, shape = rng.choice(sorted(world.holdout)).split()
        elif chosen and world.distractors:  # share colour or shape with an earlier shape
            _, colour, shape = rng.choice(chosen)
            if rng.random() < 0.5:
                shape = rng.choice(SHAPES)
            else:
                colour = rng.choice(sorted(COLOURS))
        else:
            colour, shape = rng.choice(sorted(allowed)).split()
        if f"{colour} {shape}" in allowed and (size, colour, shape) not in chosen:
            chosen.append((size, colour, shape))
    cells = sorted(rng.sample(range(GRID * GRID), count))
    things = [
        Thing(shape, colour, size, cell // GRID, cell % GRID)
        for (size, colour, shape), cell in zip(chosen, cells)
    ]
    return Scene(things, world.image_size, world.sizes, world.relations)


def _outline(shape: str, cx: float, cy: float, r: float) -> list[tuple[float, float]]:
    """The corners of a polygon shape (or a circle's bounding box), centred on (cx, cy)."""
    if shape == "circle":
        return [(cx - r, cy - r), (cx + r, cy + r)]
    if shape == "square":
        s = 0.85 * r
        return [(cx - s, cy - s), (cx + s, cy - s), (cx + s, cy + s), (cx - s, cy + s)]
    if shape == "triangle":
        return [(cx, cy - r), (cx + r, cy + 0.8 * r), (cx - r, cy + 0.8 * r)]
    return [(cx, cy - r), (cx + r, cy), (cx, cy + r), (cx - r, cy)]  # diamond


def render(scene: Scene, world: World, rng: random.Random) -> Image.Image:
    """Draw the scene (each shape jittered inside its cell) and record every shape's box."""
    side, cell = world.image_size, world.image_size / GRID
    canvas = Image.new("RGB", (side * SUPERSAMPLE, side * SUPERSAMPLE), BACKGROUND)
    draw = ImageDraw.Draw(canvas)
    for thing in scene.things:
        r = SIZES[thing.size] * cell
        slack = max(cell / 2 - r - 1, 0.0)
        cx = (thing.column + 0.5) * cell + rng.uniform(-slack, slack)
        cy = (thing.row + 0.5) * cell + rng.uniform(-slack, slack)
        points = _outline(thing.shape, cx, cy, r)
        xs, ys = [x for x, _ in points], [y for _, y in points]
        thing.box = (min(xs), min(ys), max(xs), max(ys))
        scaled = [(x * SUPERSAMPLE, y * SUPERSAMPLE) for x, y in points]
        if thing.shape == "circle":
            draw.ellipse(scaled, fill=COLOURS[thing.colour])
        else:
            draw.polygon(scaled, fill=COLOURS[thing.colour])
    image = canvas.reduce(SUPERSAMPLE)
    if world.noise:
        pixels = np.asarray(image, dtype=np.float32) / 255.0
        noisy = pixels + np.random.default_rng(rng.getrandbits(32)).normal(
            0.0, world.noise, pixels.shape
        )
        image = Image.fromarray((np.clip(noisy, 0, 1) * 255).round().astype(np.uint8))
    return image


def listing(items: list[str]) -> str:
    """ "a", "a and b", "a b and c": captions carry no punctuation."""
    return items[0] if len(items) == 1 else " ".join(items[:-1]) + " and " + items[-1]


def relation(first: Thing, second: Thing) -> str:
    """How a shape stands to the next one in reading order."""
    return "left of" if first.row == second.row else "above"


def captions(scene: Scene) -> list[str]:
    """The reference captions: inventory, locations (two word orders), relations between
    neighbours (when the world has them and there are two shapes or more), and counts."""
    things = scene.things
    nouns = [t.noun_phrase(scene.sizes) for t in things]
    places = [LOCATIONS[t.row, t.column] for t in things]
    references = [
        listing(nouns),
        listing([f"{n} {p}" for n, p in zip(nouns, places)]),
        listing([f"{p} {n}" for n, p in zip(nouns, places)]),
    ]
    if scene.relations and len(things) > 1:
        pairs = zip(zip(things, nouns), zip(things[1:], nouns[1:]))
        references.append(" and ".join(f"{na} {relation(a, b)} {nb}" for (a, na), (b, nb) in pairs))
    colours = list(dict.fromkeys(t.colour for t in things))  # in order of first appearance
    per_colour = [f"{NUMBERS[sum(t.colour == c for t in things)]} {c}" for c in colours]
    noun = "shape" if len(things) == 1 else "shapes"
    references.append(f"{NUMBERS[len(things)]} {noun} {listing(per_colour)}")
    return references


@dataclass
class Example:
    """One generated image with its scene and references."""

    name: str
    split: str
    image: Image.Image
    scene: Scene
    captions: list[str] = field(default_factory=list)


def examples(world: World, split: str, count: int, seed: int) -> Iterator[Example]:
    """`count` examples of `split`, one at a time, the same for the same (world, split, count,
    seed)."""
    rng = random.Random(f"shapes-{seed}-{split}")
    for i in range(count):
        scene = sample_scene(world, rng, holdout=split == "holdout")
        image = render(scene, world, rng)
        yield Example(f"{split}_{i:05d}.png", split, image, scene, captions(scene))


def generate(world: World, split: str, count: int, seed: int) -> list[Example]:
    """`examples` as a list."""
    return list(examples(world, split, count, seed))


@dataclass(frozen=True)
class Counts:
    """Images per split of a shapes world: train, val, test and the compositional hold-out (in
    YAML a mapping, `{train: 64}`, the splits not named keeping these defaults). A count that is
    not a non-negative integer is a ValueError naming its split."""

    train: int = 10000
    val: int = 500
    test: int = 500
    holdout: int = 500

    def __post_init__(self) -> None:
        for split, count in asdict(self).items():
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise ValueError(f"counts.{split} must be a non-negative integer, got {count!r}")


DEFAULT_COUNTS = Counts()  # `ShapesData`'s and data_prep/shapes.py's


def write_world(out: Path, world: World, counts: dict[str, int], seed: int) -> None:
    """Write `images/*.png`, `captions.txt` (CSV image,caption), `splits.json`, `scenes.json`
    and `world.json` into `out`, the layout `CaptionData` reads; `world.json` comes last, so a
    folder that has it is complete. Says on stderr how far it has got (`Preparation`)."""
    (out / "images").mkdir(parents=True, exist_ok=True)
    rows, splits, scenes = io.StringIO(), {}, {}
    writer = csv.writer(rows, lineterminator="\n")
    writer.writerow(["image", "caption"])
    total = sum(counts.values())
    each = ", ".join(f"{count:,} {split}" for split, count in counts.items())
    start = f"generating {total:,} images ({each}) into {out}"
    with Preparation("shapes world", start, total, "images") as preparation:
        for split, count in counts.items():
            splits[split] = []
            for example in examples(world, split, count, seed):
                buffer = io.BytesIO()
                example.image.save(buffer, format="PNG")
                write_atomic(out / "images" / example.name, buffer.getvalue())
                writer.writerows([example.name, c] for c in example.captions)
                scenes[example.name] = example.scene.to_dict()
                splits[split].append(example.name)
                preparation.advance()
        write_atomic(out / "captions.txt", rows.getvalue())
        write_atomic(out / "splits.json", json.dumps(splits))
        write_atomic(out / "scenes.json", json.dumps(scenes))
        description = {"world": asdict(world), "counts": counts, "seed": seed}
        write_atomic(out / "world.json", json.dumps(description, indent=1))
