"""The embedded default: dates written out in many formats -> ISO 8601 (YYYY-MM-DD).

A translation task small enough to learn in minutes on a CPU, on which attention is plainly at
work: to write the month the decoder must look at the month name, wherever the format put it.
The data is generated from a seed, so nothing is downloaded.
"""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

from seqtasks.data.tokenizer import train_sentencepiece
from seqtasks.io.files import write_atomic
from seqtasks.io.preparation import Preparation
from seqtasks.translation.data import TranslationData

MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
ONES = ["", "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth"]
TEENS = [
    "tenth",
    "eleventh",
    "twelfth",
    "thirteenth",
    "fourteenth",
    "fifteenth",
    "sixteenth",
    "seventeenth",
    "eighteenth",
    "nineteenth",
]


def ordinal_words(day: int) -> str:
    """1 -> 'first', 21 -> 'twenty-first', 30 -> 'thirtieth'."""
    if day < 10:
        return ONES[day]
    if day < 20:
        return TEENS[day - 10]
    tens = {2: "twenty", 3: "thirty"}[day // 10]
    return f"{tens}-{ONES[day % 10]}" if day % 10 else tens[:-1] + "ieth"


def ordinal_suffix(day: int) -> str:
    """1 -> '1st', 12 -> '12th', 23 -> '23rd'."""
    suffix = "th" if 10 <= day % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def spell(date: dt.date, rng: random.Random) -> str:
    """One of many human spellings of `date`."""
    d, m, y = date.day, MONTHS[date.month - 1], date.year
    mon = m[:3]
    weekday = WEEKDAYS[date.weekday()]
    formats = [
        f"{d} {m} {y}",
        f"{m} {d}, {y}",
        f"{weekday}, {m} {d}, {y}",
        f"{weekday} {d} {mon} {y}",
        f"the {ordinal_words(d)} of {m} {y}",
        f"{ordinal_suffix(d)} {m}, {y}",
        f"{mon} {ordinal_suffix(d)} {y}",
        f"{d}.{date.month}.{y}",
        f"{y}, {m} the {ordinal_words(d)}",
        f"{m} {ordinal_words(d)}, {y}",
    ]
    return rng.choice(formats)


def generate(n: int, seed: int) -> list[tuple[str, str]]:
    """`n` (spelled date, ISO date) pairs for dates from 1900 to 2099, from `seed`."""
    rng = random.Random(seed)
    start, days = dt.date(1900, 1, 1), (dt.date(2099, 12, 31) - dt.date(1900, 1, 1)).days
    pairs = []
    for _ in range(n):
        date = start + dt.timedelta(days=rng.randrange(days + 1))
        pairs.append((spell(date, rng), date.isoformat()))
    return pairs


def gold_alignment(spelled: str, iso: str) -> str:
    """The true alignment of a spelled date's words to its ISO date's characters, as a
    Pharaoh line of gold links (`seqtasks evaluate alignment --target-units pieces`): each
    digit of the year, month and day sure to the word that spells that field (in `d.m.y`, the
    one word), the day's digits possible to the "the" and "of" around an ordinal, and each
    hyphen possible to every word (it is the format's, no word's)."""
    year, month, day = (int(field) for field in iso.split("-"))
    spellings = {
        (0, 1, 2, 3): {str(year)},
        (5, 6): {MONTHS[month - 1], MONTHS[month - 1][:3]},
        (8, 9): {str(day), ordinal_words(day), ordinal_suffix(day)},
    }
    links = []
    for i, word in enumerate(spelled.split()):
        token = word.strip(",")
        for characters, names in spellings.items():
            if token in names or token.count(".") == 2:  # d.m.y spells every field
                links += [f"{i}-{j}" for j in characters]
        if word in ("the", "of"):
            links += [f"{i}?{j}" for j in (8, 9)]
        links += [f"{i}?{j}" for j in (4, 7)]
    return " ".join(links)


def write_dates(out: Path, train: int = 20000, val: int = 500, test: int = 1000, seed: int = 0):
    """Write train/val/test `.text`/`.iso` files, the true word alignments of val and test
    (`.align`, `gold_alignment`) and character-level sentencepiece models, saying so on stderr
    (`Preparation`)."""
    out.mkdir(parents=True, exist_ok=True)
    splits = {"train": train, "val": val, "test": test}
    start = f"generating {sum(splits.values()):,} pairs and their sentencepiece models in {out}"
    with Preparation("dates corpus", start, ticking=True):
        corpus = {name: generate(n, seed + i) for i, (name, n) in enumerate(splits.items())}
        for name, pairs in corpus.items():
            for side, lang in enumerate(("text", "iso")):
                write_atomic(out / f"{name}.{lang}", "".join(p[side] + "\n" for p in pairs))
            if name != "train":
                gold = "".join(gold_alignment(*pair) + "\n" for pair in pairs)
                write_atomic(out / f"{name}.align", gold)
        for side, lang in enumerate(("text", "iso")):
            tokenizer = train_sentencepiece((p[side] for p in corpus["train"]), 100, "char")
            write_atomic(out / f"spm.{lang}.model", tokenizer.proto)


class DatesData(TranslationData):
    """`TranslationData` over the generated dates corpus, written to `data_dir` on first use.

    Args:
        data_dir: where the corpus is (or will be) written.
        num_train: training pairs to generate.
        max_tokens: padded characters per batch.
        seed: seed of the corpus and of the batch order.
        num_workers: DataLoader worker processes.
    """

    def __init__(
        self,
        data_dir: str = "data/dates",
        num_train: int = 20000,
        max_tokens: int = 4096,
        seed: int = 0,
        num_workers: int = 0,
    ):
        path = Path(data_dir)
        if not (path / "spm.iso.model").is_file():
            write_dates(path, train=num_train, seed=seed)
        super().__init__(
            data_dir,
            src_lang="text",
            tgt_lang="iso",
            train_split="train",
            val_split="val",
            test_split="test",
            max_tokens=max_tokens,
            max_length=100,
            num_workers=num_workers,
            seed=seed,
        )
