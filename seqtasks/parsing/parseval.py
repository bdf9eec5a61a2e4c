"""Labelled bracket scoring as EVALB computes it (Sekine & Collins 1997), with `COLLINS.prm`.

Per sentence, as EVALB's `read_line`, `calc_result` and `massage_data`:
- a word whose *gold* tag is in DELETE_LABELS (the punctuation tags) is removed from both trees
  together with its preterminal, and so is every `-NONE-` preterminal (a test tree with another
  number of words, e.g. written without punctuation, loses the words its own tags mark); a
  constituent with such a label loses only its own bracket (so `TOP` goes, its children stay);
  a constituent left with no words is not counted;
- labels are cut at the first '-' or '=' (function tags, indices), and ADVP and PRT are equal;
- brackets (label, first word, last word + 1) of the two trees are matched as multisets;
- a test tree with no words (by its own tags) is *skipped*; one whose words differ from the
  gold tree's is an *error*; both are left out of the totals, and their counts reported;
- the length that selects the ≤ 40 figures counts the gold tree's preterminals except
  `-NONE-` (punctuation included).

Only `TOP` is deleted as a root: a root labelled `ROOT`, or the treebank's unlabelled outer
bracket, counts as a constituent and costs precision, as it does in EVALB.

EVALB itself deletes punctuation by each tree's own tags, so a test tree whose tags differ from
the gold ones on a punctuation word (a tagger's mistake, or the `XX` preterminals of Vinyals et
al.) keeps a word the gold tree lost, and the sentence becomes a length error. Deciding by the
gold tags is what EVALB does whenever the tags agree, and scores any tagging: the brackets
score the same whatever the test tree's tags are, and only tagging accuracy reads them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

from nltk import Tree

from seqtasks.metrics.buckets import LengthBucket, in_bucket, length_ranges

DELETE_LABELS = frozenset({"TOP", "-NONE-", ",", ":", "``", "''", "."})
LENGTH_IGNORED = frozenset({"-NONE-"})
EQUIVALENT_LABELS = {"PRT": "ADVP"}
CUTOFF_LENGTH = 40


@dataclass
class Bracketing:
    """What EVALB keeps of one tree: the words and tags left after deletion, the brackets
    (label, start, end) over those words, and the length used for the cutoff."""

    words: list[str]
    tags: list[str]
    brackets: Counter[tuple[str, int, int]]
    length: int


def _bracket_label(label: str) -> str:
    """EVALB's `modify_label` (cut at '-' or '='), then the equivalence classes."""
    label = re.split(r"[-=]", label, maxsplit=1)[0]
    return EQUIVALENT_LABELS.get(label, label)


def punctuation(tree: Tree) -> list[bool]:
    """Per word of `tree` (its preterminals other than `-NONE-`), whether its tag marks it as
    punctuation that EVALB deletes."""
    return [tag in DELETE_LABELS for _, tag in tree.pos() if tag not in LENGTH_IGNORED]


def bracketing(tree: Tree, deleted: Sequence[bool] | None = None) -> Bracketing:
    """The words, tags and brackets EVALB scores in `tree`. `deleted` says, per word (as
    `punctuation` counts them), which words to remove; by default the tree's own tags decide."""
    if deleted is None:
        deleted = punctuation(tree)
    words: list[str] = []
    tags: list[str] = []
    brackets: Counter[tuple[str, int, int]] = Counter()
    length = 0
    position = 0  # of the next word, in `deleted`

    def visit(node: Tree) -> None:
        nonlocal length, position
        if node and not isinstance(node[0], Tree):  # a preterminal
            if node.label() in LENGTH_IGNORED:  # -NONE-: never a word
                return
            length += 1
            if not deleted[position]:
                words.append(node[0])
                tags.append(node.label())
            position += 1
            return
        start = len(words)
        for child in node:
            visit(child)
        label = _bracket_label(node.label())
        if len(words) > start and label not in DELETE_LABELS:
            brackets[label, start, len(words)] += 1

    visit(tree)
    return Bracketing(words, tags, brackets, length)


class Status(Enum):
    OK = 0
    ERROR = 1  # the words differ, or the test tree could not be read
    SKIP = 2  # the test tree has no words


@dataclass
class SentenceScore:
    """One sentence; the counts are zero unless `status` is OK."""

    status: Status
    length: int
    matched: int = 0
    gold: int = 0
    test: int = 0
    words: int = 0
    correct_tags: int = 0

    @property
    def complete(self) -> bool:
        return self.status is Status.OK and self.matched == self.gold == self.test


def score_sentence(gold: Tree, test: Tree | None) -> SentenceScore:
    """EVALB's figures for one sentence; `test` is None when the output could not be read."""
    gold_punctuation = punctuation(gold)
    g = bracketing(gold, gold_punctuation)
    if test is None:
        return SentenceScore(Status.ERROR, g.length)
    if not bracketing(test).words:  # nothing but punctuation and traces, by its own tags
        return SentenceScore(Status.SKIP, g.length)
    # Word for word, the gold tags decide; a test tree without the punctuation words (as
    # some parsers write them) is read as EVALB reads it, by its own tags.
    test_punctuation = punctuation(test)
    same_words = len(test_punctuation) == len(gold_punctuation)
    t = bracketing(test, gold_punctuation if same_words else test_punctuation)
    if g.words != t.words:
        return SentenceScore(Status.ERROR, g.length)
    return SentenceScore(
        Status.OK,
        g.length,
        matched=sum((g.brackets & t.brackets).values()),
        gold=sum(g.brackets.values()),
        test=sum(t.brackets.values()),
        words=len(g.words),
        correct_tags=sum(
            EQUIVALENT_LABELS.get(a, a) == EQUIVALENT_LABELS.get(b, b)
            for a, b in zip(g.tags, t.tags)
        ),
    )


def _ratio(numerator: float, denominator: float) -> float:
    return 100.0 * numerator / denominator if denominator else 0.0


@dataclass
class ParsevalTotals:
    """Sums over a set of sentences, and the percentages EVALB prints for them."""

    sentences: int = 0
    errors: int = 0
    skipped: int = 0
    matched: int = 0
    gold: int = 0
    test: int = 0
    complete: int = 0
    words: int = 0
    correct_tags: int = 0

    def add(self, s: SentenceScore) -> None:
        self.sentences += 1
        self.errors += s.status is Status.ERROR
        self.skipped += s.status is Status.SKIP
        self.matched += s.matched
        self.gold += s.gold
        self.test += s.test
        self.complete += s.complete
        self.words += s.words
        self.correct_tags += s.correct_tags

    @property
    def valid(self) -> int:
        return self.sentences - self.errors - self.skipped

    @property
    def recall(self) -> float:
        return _ratio(self.matched, self.gold)

    @property
    def precision(self) -> float:
        return _ratio(self.matched, self.test)

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    @property
    def complete_match(self) -> float:
        return _ratio(self.complete, self.valid)

    @property
    def tagging_accuracy(self) -> float:
        return _ratio(self.correct_tags, self.words)


@dataclass
class ParsevalScores:
    """All sentences, those of length ≤ `CUTOFF_LENGTH`, and each sentence's figures."""

    all: ParsevalTotals
    short: ParsevalTotals
    sentences: list[SentenceScore] = field(repr=False)


def score_corpus(golds: Sequence[Tree], tests: Sequence[Tree | None]) -> ParsevalScores:
    """EVALB over aligned gold and test trees (None for a test tree that could not be read)."""
    if len(golds) != len(tests):
        raise ValueError(f"{len(golds)} gold trees but {len(tests)} test trees")
    every, short = ParsevalTotals(), ParsevalTotals()
    sentences = [score_sentence(g, t) for g, t in zip(golds, tests)]
    for s in sentences:
        every.add(s)
        if s.length <= CUTOFF_LENGTH:
            short.add(s)
    return ParsevalScores(every, short, sentences)


@dataclass
class F1Bucket(LengthBucket):
    f1: float


def f1_by_length(scores: ParsevalScores, edges: Sequence[int] = (10, 20, 30, 40)) -> list[F1Bucket]:
    """F1 per bucket of sentence length (EVALB's length): (10, 20) gives 1–10, 11–20, 21+.
    Empty buckets are left out."""
    buckets = []
    for low, high in length_ranges(edges):
        totals = ParsevalTotals()
        for s in scores.sentences:
            if in_bucket(s.length, low, high):
                totals.add(s)
        if totals.sentences:
            buckets.append(F1Bucket(low, high, totals.sentences, totals.f1))
    return buckets


def summary(scores: ParsevalScores, tagged: bool = True) -> str:
    """EVALB's summary block, for all sentences and for length ≤ CUTOFF_LENGTH; tagging
    accuracy reads `n/a` for trees that are not `tagged` (XX preterminals)."""
    lines = ["=== Summary ==="]
    for title, t in (("All", scores.all), (f"len<={CUTOFF_LENGTH}", scores.short)):
        lines += [
            "",
            f"-- {title} --",
            f"Number of sentence        = {t.sentences:6d}",
            f"Number of Error sentence  = {t.errors:6d}",
            f"Number of Skip  sentence  = {t.skipped:6d}",
            f"Number of Valid sentence  = {t.valid:6d}",
            f"Bracketing Recall         = {t.recall:6.2f}",
            f"Bracketing Precision      = {t.precision:6.2f}",
            f"Bracketing FMeasure       = {t.f1:6.2f}",
            f"Complete match            = {t.complete_match:6.2f}",
            f"Tagging accuracy          = {t.tagging_accuracy:6.2f}"
            if tagged
            else "Tagging accuracy          =    n/a",
        ]
    return "\n".join(lines)
