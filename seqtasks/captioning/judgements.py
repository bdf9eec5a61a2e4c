"""Scoring captions of the shapes world against the scene, whatever their wording.

A caption is read with the grammar the references are written in (`seqtasks.captioning.shapes`):

    list       ITEM … and ITEM,  ITEM = NP | NP LOCATION | LOCATION NP
    relations  NP REL NP (and NP REL NP)…,  REL = left of | right of | above | below
    counts     NUMBER shape(s) NUMBER COLOUR … and NUMBER COLOUR
    NP         a [SIZE] COLOUR SHAPE

It is *truthful* when what it says holds: a list names every shape once, in reading order (each
at its stated location); each relation holds between the shapes named; the counts are exact.
Every noun phrase that describes a shape of the scene is a *mention* of it, and an attention
map *hits* a mention when the peak of the attention behind its shape word lies inside the
shape's box. A caption is an *exact match* when its words are those of one of the references.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from torch import Tensor

from seqtasks.captioning.shapes import COLOURS, LOCATIONS, NUMBERS, SHAPES, SIZES, Scene, Thing
from seqtasks.data.words import words

RELATIONS = {
    ("left", "of"): lambda a, b: a.column < b.column,
    ("right", "of"): lambda a, b: a.column > b.column,
    ("above",): lambda a, b: a.row < b.row,
    ("below",): lambda a, b: a.row > b.row,
}
PLACES = {tuple(phrase.split()): cell for cell, phrase in LOCATIONS.items()}


@dataclass
class Reading:
    """What a caption says about a scene.

    Attributes:
        truthful: the caption parses and all it says holds.
        mentions: (word position, index of the shape) for each noun phrase that describes a
            shape of the scene, the position being that of its shape word.
    """

    truthful: bool
    mentions: list[tuple[int, int]]


@dataclass
class _Phrase:
    size: str | None
    colour: str
    shape: str
    position: int  # of the shape word

    def describes(self, thing: Thing) -> bool:
        same = (thing.colour, thing.shape) == (self.colour, self.shape)
        return same and self.size in (None, thing.size)


def _noun_phrase(words: Sequence[str], i: int) -> tuple[_Phrase, int] | None:
    if i >= len(words) or words[i] != "a":
        return None
    i += 1
    size = words[i] if i < len(words) and words[i] in SIZES else None
    i += size is not None
    if i + 1 < len(words) and words[i] in COLOURS and words[i + 1] in SHAPES:
        return _Phrase(size, words[i], words[i + 1], i + 1), i + 2
    return None


def _match(table: dict, words: Sequence[str], i: int):
    """(value, next position) of the phrase of `table` at position i, or None."""
    for phrase, value in table.items():
        if tuple(words[i : i + len(phrase)]) == phrase:
            return value, i + len(phrase)
    return None


def _item(words: Sequence[str], i: int) -> tuple[_Phrase, tuple[int, int] | None, int] | None:
    """NP, NP LOCATION or LOCATION NP at position i: (phrase, cell or None, next position)."""
    place = _match(PLACES, words, i)
    if place is not None:
        found = _noun_phrase(words, place[1])
        return None if found is None else (found[0], place[0], found[1])
    found = _noun_phrase(words, i)
    if found is None:
        return None
    place = _match(PLACES, words, found[1])
    return (found[0], None, found[1]) if place is None else (found[0], place[0], place[1])


def _sequence(words: Sequence[str], parse) -> list | None:
    """Items read by `parse(words, i) -> (…, next)`, back to back, with "and" before the last
    and only there."""
    items, i = [], 0
    while True:
        found = parse(words, i)
        if found is None:
            return None
        items.append(found[:-1])
        i = found[-1]
        if i == len(words):
            return items
        if words[i] == "and":
            found = parse(words, i + 1)
            if found is None or found[-1] != len(words):
                return None
            return [*items, found[:-1]]


def _mentions(phrases: list[_Phrase], scene: Scene) -> list[tuple[int, int]]:
    return [(p.position, k) for p in phrases for k, t in enumerate(scene.things) if p.describes(t)]


def _read_list(words: Sequence[str], scene: Scene) -> Reading | None:
    items = _sequence(words, _item)
    if items is None:
        return None
    phrases = [p for p, _ in items]
    truthful = len(items) == len(scene.things) and all(
        p.describes(t) and cell in (None, (t.row, t.column))
        for (p, cell), t in zip(items, scene.things)
    )
    return Reading(truthful, _mentions(phrases, scene))


def _read_relations(words: Sequence[str], scene: Scene) -> Reading | None:
    claims, i = [], 0
    while True:
        first = _noun_phrase(words, i)
        relation = None if first is None else _match(RELATIONS, words, first[1])
        second = None if relation is None else _noun_phrase(words, relation[1])
        if second is None:
            return None
        claims.append((first[0], relation[0], second[0]))
        i = second[1]
        if i == len(words):
            break
        if words[i] != "and":
            return None
        i += 1
    things = scene.things
    truthful = all(
        any(a.describes(x) and b.describes(y) and holds(x, y) for x in things for y in things)
        for a, holds, b in claims
    )
    return Reading(truthful, _mentions([p for a, _, b in claims for p in (a, b)], scene))


def _count(words: Sequence[str], i: int) -> tuple[int, str, int] | None:
    if i + 1 < len(words) and words[i] in NUMBERS and words[i + 1] in COLOURS:
        return NUMBERS.index(words[i]), words[i + 1], i + 2
    return None


def _read_counts(words: Sequence[str], scene: Scene) -> Reading | None:
    if len(words) < 2 or words[0] not in NUMBERS or words[1] not in ("shape", "shapes"):
        return None
    counts = _sequence(words[2:], _count)
    if counts is None:
        return None
    actual = Counter(t.colour for t in scene.things)
    stated = Counter({colour: n for n, colour in counts})
    truthful = (
        NUMBERS.index(words[0]) == len(scene.things)
        and len({c for _, c in counts}) == len(counts)
        and stated == actual
    )
    return Reading(truthful, [])


def read_caption(words: Sequence[str], scene: Scene) -> Reading:
    """Read a caption, given as its words, against `scene`."""
    for read in (_read_list, _read_relations, _read_counts):
        reading = read(words, scene)
        if reading is not None:
            return reading
    return Reading(False, [])


def attention_hits(
    reading: Reading, attention: Tensor, grid: tuple[int, int], scene: Scene
) -> tuple[int, int]:
    """(hits, mentions): for each mention, whether the centre of the grid cell where the
    attention behind its shape word (a row of `attention`, (T, L)) peaks lies in the shape's box."""
    height, width = grid
    hits = 0
    for position, k in reading.mentions:
        row, column = divmod(int(attention[position].argmax()), width)
        x = (column + 0.5) * scene.image_size / width
        y = (row + 0.5) * scene.image_size / height
        x0, y0, x1, y1 = scene.things[k].box
        hits += x0 <= x <= x1 and y0 <= y <= y1
    return hits, len(reading.mentions)


@dataclass
class Judgement:
    """How one generated caption fares against its scene and references."""

    exact: bool  # equal to one of the references (as words)
    truthful: bool
    hits: int  # mentions whose attention peak lies in the shape's box
    mentions: int


def judge(
    said: Sequence[str],
    references: Sequence[str],
    scene: Scene,
    attention: Tensor | None,
    grid: tuple[int, int] | None,
) -> Judgement:
    """Judge a caption, given as its words, with the attention behind them ((T, L) or None)."""
    reading = read_caption(said, scene)
    hits, mentions = (0, 0)
    if attention is not None and grid is not None:
        hits, mentions = attention_hits(reading, attention, grid, scene)
    exact = list(said) in [words(r) for r in references]
    return Judgement(exact, reading.truthful, hits, mentions)


def summarise(judgements: Sequence[Judgement]) -> dict[str, float]:
    """Percentages: exact_match and truthful over captions, attention_hits over mentions (left
    out when there were none: no attention, or no shape named)."""
    count = len(judgements)
    summary = {
        "exact_match": 100.0 * sum(j.exact for j in judgements) / count,
        "truthful": 100.0 * sum(j.truthful for j in judgements) / count,
    }
    mentions = sum(j.mentions for j in judgements)
    if mentions:
        summary["attention_hits"] = 100.0 * sum(j.hits for j in judgements) / mentions
    return summary
