"""The shapes world: deterministic generation, captions true of their scenes, the hold-out
split, and the checker that reads captions against scenes."""

from __future__ import annotations

import json
import random
import re

import pytest
import torch

from seqtasks.captioning.data import ShapesData
from seqtasks.captioning.judgements import Judgement, attention_hits, judge, read_caption, summarise
from seqtasks.captioning.shapes import (
    GRID,
    LEVELS,
    LOCATIONS,
    NUMBERS,
    Counts,
    World,
    captions,
    generate,
    listing,
    sample_scene,
    write_world,
)


def test_same_seed_same_world_other_seed_other_world():
    a = generate(LEVELS[3], "train", 30, seed=0)
    b = generate(LEVELS[3], "train", 30, seed=0)
    c = generate(LEVELS[3], "train", 30, seed=1)
    assert [e.image.tobytes() for e in a] == [e.image.tobytes() for e in b]
    assert [e.captions for e in a] == [e.captions for e in b]
    assert [e.scene.to_dict() for e in a] == [e.scene.to_dict() for e in b]
    assert [e.captions for e in a] != [e.captions for e in c]
    # The splits draw from their own streams: more training images leave val unchanged.
    assert (
        generate(LEVELS[3], "val", 5, 0)[0].captions == generate(LEVELS[3], "val", 9, 0)[0].captions
    )


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_scenes_follow_their_knobs(level):
    world = LEVELS[level]
    for example in generate(world, "train", 60, seed=level):
        things = example.scene.things
        assert world.min_objects <= len(things) <= world.max_objects
        assert [(t.row, t.column) for t in things] == sorted({(t.row, t.column) for t in things})
        assert len({(t.size, t.colour, t.shape) for t in things}) == len(things)
        assert not {t.pair for t in things} & set(world.holdout)
        for t in things:
            x0, y0, x1, y1 = t.box
            side = world.image_size / 3
            assert t.column * side <= x0 < x1 <= (t.column + 1) * side
            assert t.row * side <= y0 < y1 <= (t.row + 1) * side
        if world.distractors and len(things) > 1:
            for t in things:
                others = [o for o in things if o is not t]
                assert any(o.colour == t.colour or o.shape == t.shape for o in others)
        if not world.sizes:
            assert {t.size for t in things} == {"large"}
        assert example.image.size == (world.image_size, world.image_size)


@pytest.mark.parametrize("level", [3, 4])
def test_every_shape_stays_inside_its_cell_of_whole_patches(level):
    """A 48 px image has 16 px cells, 2×2 patches of 8 px each: a shape drawn inside its cell
    never reaches a patch of another cell, so no `PatchEncoder` patch shows two shapes."""
    world = LEVELS[level]
    cell = world.image_size / GRID
    assert world.image_size == 48 and cell % 8 == 0
    for example in generate(world, "train", 50, seed=1):
        for thing in example.scene.things:
            x0, y0, x1, y1 = thing.box
            assert thing.column * cell <= x0 < x1 <= (thing.column + 1) * cell
            assert thing.row * cell <= y0 < y1 <= (thing.row + 1) * cell


def test_every_reference_is_true_of_its_scene_and_mentions_its_shapes():
    for level in sorted(LEVELS):
        for example in generate(LEVELS[level], "train", 40, seed=5):
            kinds = 5 if LEVELS[level].relations and len(example.scene.things) > 1 else 4
            assert len(example.captions) == kinds
            for caption in example.captions:
                assert read_caption(caption.split(), example.scene).truthful, caption
            inventory = read_caption(example.captions[0].split(), example.scene)
            assert [k for _, k in inventory.mentions] == list(range(len(example.scene.things)))


def test_captions_say_where_things_are():
    world = World(min_objects=3, max_objects=3, distractors=False)
    scene = sample_scene(world, random.Random(3), holdout=False)
    scene.things[0].row, scene.things[0].column = 0, 0
    scene.things[1].row, scene.things[1].column = 0, 2
    scene.things[2].row, scene.things[2].column = 2, 1
    a, b, c = (t.noun_phrase(False) for t in scene.things)
    refs = captions(scene)
    assert refs[0] == f"{a} {b} and {c}"
    assert (
        refs[1] == f"{a} in the top left corner {b} in the top right corner and {c} at the bottom"
    )
    assert (
        refs[2] == f"in the top left corner {a} in the top right corner {b} and at the bottom {c}"
    )
    assert refs[3] == f"{a} left of {b} and {b} above {c}"
    assert refs[4].startswith("three shapes ")


def test_false_captions_are_caught():
    example = generate(LEVELS[3], "train", 1, seed=11)[0]
    scene, refs = example.scene, example.captions
    first, second = scene.things[0], scene.things[1]
    here = LOCATIONS[first.row, first.column]
    elsewhere = next(phrase for phrase in LOCATIONS.values() if phrase != here)
    nouns = [t.noun_phrase(False) for t in scene.things]
    backwards = "right of" if first.row == second.row else "below"
    wrong = [
        listing(nouns[:-1]),  # a shape left out of the inventory
        listing(nouns[::-1]),  # not in reading order
        refs[1].replace(here, elsewhere, 1),  # a wrong location
        f"{nouns[0]} {backwards} {nouns[1]}",  # a wrong relation
        f"{NUMBERS[len(nouns) + 1]} shapes " + refs[-1].split(" ", 2)[2],  # a wrong count
        f"{nouns[0]} and {nouns[1]} and {nouns[2]}",  # not in the grammar
        "",
    ]
    for caption in wrong:
        assert not read_caption(caption.split(), scene).truthful, caption
    # The same relation read the other way round is true.
    assert read_caption(f"{nouns[1]} {backwards} {nouns[0]}".split(), scene).truthful


def test_hold_out_split_has_unseen_pairs():
    world = LEVELS[3]
    held = set(world.holdout)
    for example in generate(world, "holdout", 30, seed=0):
        assert example.scene.things[0].pair in held or any(
            t.pair in held for t in example.scene.things
        )
    seen = {t.pair for e in generate(world, "train", 200, seed=0) for t in e.scene.things}
    assert not seen & held and len(seen) == 20 - len(held)


def test_attention_hits_and_judgement():
    example = generate(LEVELS[3], "train", 1, seed=2)[0]
    scene, said = example.scene, example.captions[0].split()
    reading = read_caption(said, scene)
    grid, side = (8, 8), scene.image_size / 8
    attention = torch.full((len(said), 64), 1e-3)
    for position, k in reading.mentions:  # peak on the cell under the shape's centre
        x0, y0, x1, y1 = scene.things[k].box
        attention[position, int((y0 + y1) / 2 // side) * 8 + int((x0 + x1) / 2 // side)] = 1.0
    assert attention_hits(reading, attention, grid, scene) == (len(scene.things),) * 2
    assert attention_hits(reading, attention.flip(-1), grid, scene)[0] < len(scene.things)
    good = judge(said, example.captions, scene, attention, grid)
    assert good == Judgement(True, True, len(scene.things), len(scene.things))
    bad = judge(["a", "red"], example.captions, scene, None, None)
    assert summarise([good, bad]) == {
        "exact_match": 50.0,
        "truthful": 50.0,
        "attention_hits": 100.0,
    }


def test_shapes_data_writes_once_and_refuses_another_world(tmp_path):
    counts = Counts(train=12, val=3, test=3, holdout=3)
    data = ShapesData(str(tmp_path / "w"), level=2, counts=counts)
    assert {k: len(v) for k, v in data.images.items()} == {
        "train": 12,
        "val": 3,
        "test": 3,
        "holdout": 3,
    }
    assert all(image.scene is not None and len(image.captions) >= 4 for image in data.images["val"])
    assert json.loads((tmp_path / "w" / "world.json").read_text())["counts"]["train"] == 12
    again = ShapesData(str(tmp_path / "w"), level=2, counts=counts)
    assert again.tokenizer.vocabulary == data.tokenizer.vocabulary
    with pytest.raises(ValueError, match="another shapes world"):
        ShapesData(str(tmp_path / "w"), level=3, counts=counts)


def test_write_world_layout_reads_back(tmp_path):
    write_world(tmp_path, LEVELS[1], {"train": 4, "val": 2}, seed=3)
    from seqtasks.captioning.captions import read_captions

    splits = read_captions(tmp_path)
    assert [image.name for image in splits["val"]] == ["val_00000.png", "val_00001.png"]
    assert splits["train"][0].captions == generate(LEVELS[1], "train", 1, 3)[0].captions


def test_counts_keep_the_defaults_of_the_splits_not_given_and_name_what_they_refuse():
    assert Counts(train=12, holdout=0) == Counts(12, 500, 500, 0)
    for bad in (-1, 2.5, True):
        refused = f"counts.val must be a non-negative integer, got {bad}"
        with pytest.raises(ValueError, match=re.escape(refused)):
            Counts(val=bad)


def test_shapes_data_reads_its_counts_from_yaml_by_split_and_refuses_an_unknown_one(tmp_path):
    """In a config the counts are a mapping by split (jsonargparse builds `Counts`): a split
    not named keeps its default, and a split a shapes world lacks is refused by name."""
    from jsonargparse import ArgumentParser

    parser = ArgumentParser(exit_on_error=False)
    parser.add_class_arguments(ShapesData, "data")
    given = ["--data.data_dir", str(tmp_path / "w"), "--data.level", "1"]
    config = parser.parse_args([*given, "--data.counts", "{train: 6, val: 2, test: 2}"])
    data = parser.instantiate_classes(config).data
    assert {split: len(images) for split, images in data.images.items()} == {
        "train": 6, "val": 2, "test": 2, "holdout": 500,
    }  # fmt: skip
    with pytest.raises(Exception, match="dev"):
        parser.parse_args([*given, "--data.counts", "{train: 6, dev: 2}"])
