"""The EVALB-compatible scorer: the figures the real EVALB (COLLINS.prm) gives on the sample's
dev split, and each convention on a small tree."""

from __future__ import annotations

import pytest
from nltk import Tree

from seqtasks.parsing.parseval import (
    Status,
    bracketing,
    f1_by_length,
    score_corpus,
    score_sentence,
    summary,
)
from seqtasks.parsing.trees import read_treebank


@pytest.fixture(scope="module")
def dev(ptb_dir) -> list[Tree]:
    """The 273 cleaned dev trees (wsj_0160–wsj_0179), as data_prep/ptb.py writes them."""
    return read_treebank(ptb_dir / "dev.mrg")


def leaf(word: str, tag: str) -> Tree:
    return Tree(tag, [word])


def flat(tree: Tree) -> Tree:
    """(TOP (S (T1 w1) … (Tn wn))) with the gold tags."""
    return Tree("TOP", [Tree("S", [leaf(w, t) for w, t in tree.pos()])])


def right_branching(tree: Tree) -> Tree:
    """(TOP (S (T1 w1) (S (T2 w2) … (S (Tn-1 wn-1) (Tn wn))))) with the gold tags."""
    leaves = [leaf(w, t) for w, t in tree.pos()]
    node = Tree("S", leaves[-2:])
    for item in reversed(leaves[:-2]):
        node = Tree("S", [item, node])
    return Tree("TOP", [node])


def figures(golds, tests) -> tuple:
    t = score_corpus(golds, tests).all
    return t.matched, t.gold, t.test, round(t.recall, 2), round(t.precision, 2), round(t.f1, 2)


def test_gold_against_itself(dev):
    scores = score_corpus(dev, dev)
    assert (scores.all.sentences, scores.all.valid) == (273, 273)
    assert figures(dev, dev) == (4980, 4980, 4980, 100.0, 100.0, 100.0)
    assert scores.all.complete_match == scores.all.tagging_accuracy == 100.0
    assert scores.short.sentences == 260 and scores.short.f1 == 100.0


def test_flat_trees_as_evalb_scores_them(dev):
    assert figures(dev, [flat(t) for t in dev]) == (251, 4980, 273, 5.04, 91.94, 9.56)


def test_right_branching_trees_as_evalb_scores_them(dev):
    assert figures(dev, [right_branching(t) for t in dev]) == (492, 4980, 6045, 9.88, 8.14, 8.93)


GOLD = Tree.fromstring(
    "(TOP (S (NP-SBJ (DT The) (NN dog)) (, ,) (VP (VBD gave) (PRT (RP up)) (NP (-NONE- *))) (. .)))"
)


def test_conventions():
    b = bracketing(GOLD)
    assert b.words == ["The", "dog", "gave", "up"]  # punctuation and traces deleted
    assert b.length == 6  # punctuation counts for the length, traces do not
    # TOP goes, function tags go, PRT reads as ADVP, the emptied NP counts for nothing
    assert set(b.brackets) == {("S", 0, 4), ("NP", 0, 2), ("VP", 2, 4), ("ADVP", 3, 4)}


@pytest.mark.parametrize(
    "test, matched, tested",
    [
        ("(TOP (S (NP (DT The) (NN dog)) (, ,) (VP (VBD gave) (ADVP (RP up))) (. .)))", 4, 4),
        ("(ROOT (S (NP (DT The) (NN dog)) (, ,) (VP (VBD gave) (PRT (RP up))) (. .)))", 4, 5),
        ("( (S (NP (DT The) (NN dog)) (, ,) (VP (VBD gave) (PRT (RP up))) (. .)))", 4, 5),
        ("(TOP (S (S (NP (DT The) (NN dog)) (VP (VBD gave) (PRT (RP up))))))", 4, 5),
        ("(TOP (S (NP (DT The) (NN dog) (, ,)) (VP (VBD gave) (PRT (RP up)) (. .))))", 4, 4),
    ],
    ids=["ADVP=PRT", "ROOT-counts", "empty-root-counts", "unary-twice", "punctuation-moved"],
)
def test_sentence_scores(test, matched, tested):
    s = score_sentence(GOLD, Tree.fromstring(test))
    assert (s.status, s.matched, s.gold, s.test) == (Status.OK, matched, 4, tested)


def test_errors_and_skips_leave_the_totals():
    other_words = Tree.fromstring("(TOP (S (NN A) (NN cat) (VBD gave) (RP up)))")
    no_words = Tree.fromstring("(TOP (S (. .)))")
    scores = score_corpus([GOLD, GOLD, GOLD, GOLD], [GOLD, other_words, no_words, None])
    assert [s.status for s in scores.sentences] == [
        Status.OK,
        Status.ERROR,
        Status.SKIP,
        Status.ERROR,
    ]
    t = scores.all
    assert (t.sentences, t.errors, t.skipped, t.valid) == (4, 2, 1, 1)
    assert (t.matched, t.gold, t.test, t.f1, t.complete_match) == (4, 4, 4, 100.0, 100.0)
    assert "Number of Error sentence  =      2" in summary(scores)


def with_tags(tree: Tree, tag) -> Tree:
    """A copy of `tree` whose preterminals (traces included) are relabelled `tag(old)`."""
    tree = tree.copy(deep=True)
    for position in tree.treepositions("leaves"):
        preterminal = tree[position[:-1]]
        preterminal.set_label(tag(preterminal.label()))
    return tree


def test_xx_tagged_gold_trees_score_100(dev):
    """Vinyals et al.'s output writes every preterminal as XX: the punctuation to delete is
    decided by the gold tags, so the gold structure with XX tags matches perfectly."""
    xx = [with_tags(t, lambda tag: tag if tag == "-NONE-" else "XX") for t in dev]
    scores = score_corpus(dev, xx)
    assert (scores.all.valid, scores.all.errors, scores.all.skipped) == (273, 0, 0)
    assert figures(dev, xx) == (4980, 4980, 4980, 100.0, 100.0, 100.0)
    assert scores.all.tagging_accuracy == 0.0  # XX is no tag
    assert summary(scores, tagged=False).count("Tagging accuracy          =    n/a") == 2
    assert scores.short.f1 == 100.0 and scores.short.valid == 260


def test_punctuation_is_decided_by_the_gold_tags():
    """A test tree that tags the period as NN and a word as '.' scores its brackets over the
    gold tree's words: the period goes, `dog` stays (EVALB, deleting by each tree's own tags,
    would count this sentence as a length error)."""
    test = Tree.fromstring(
        "(TOP (S (NP (DT The) (. dog)) (NN ,) (VP (VBD gave) (PRT (RP up))) (NP (NN .))))"
    )
    s = score_sentence(GOLD, test)
    # Brackets over The dog gave up (0..4): S, NP, VP, ADVP; the test NP over '.' is empty.
    assert (s.status, s.matched, s.gold, s.test) == (Status.OK, 4, 4, 4)
    assert (s.words, s.correct_tags) == (4, 3)  # The/DT gave/VBD up/RP right, dog/. wrong


def test_a_test_tree_with_another_word_count_is_an_error():
    one_more = Tree.fromstring(
        "(TOP (S (NP (XX The) (XX dog)) (XX ,) (VP (XX gave) (XX up)) (XX .) (XX !)))"
    )
    assert score_sentence(GOLD, one_more).status is Status.ERROR


def test_f1_by_length(dev):
    scores = score_corpus(dev, [flat(t) for t in dev])
    buckets = f1_by_length(scores, [10, 40])
    assert [(b.low, b.high) for b in buckets] == [(1, 10), (11, 40), (41, None)]
    assert sum(b.sentences for b in buckets) == 273
    assert buckets[-1].sentences == 273 - scores.short.sentences
