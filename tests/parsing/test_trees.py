"""Reading and cleaning treebank trees, and Vinyals' linearisation: write, read, repair."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from nltk import Tree

from seqtasks.parsing.linearisation import (
    MAX_DEPTH,
    XX,
    delinearise,
    linearise,
    repair,
    tree_from_output,
)
from seqtasks.parsing.trees import (
    TreebankError,
    clean_tree,
    read_treebank,
    read_trees,
    strip_function_tags,
    to_line,
)

RAW = """( (S
    (NP-SBJ-1 (NNP Pierre) (NNP Vinken) )
    (VP (MD will)
      (VP (VB join)
        (NP (DT the) (NN board) )
        (S (NP-SBJ (-NONE- *-1) ) (VP (TO to) (VP (VB help) )))
        (PP-CLR=2 (-LRB- -LRB-) (IN as) (NP (DT a) (NN director) ) (-RRB- -RRB-))))
    (. .) ))
( (S (NP-SBJ (PRP He) ) (VP (VBD left) ) (. .) ))
"""


@pytest.fixture(scope="module")
def sample_trees(shared_data: Path) -> list[Tree]:
    """The cleaned trees of the sample's dev files, wsj_0160–wsj_0179 (273)."""
    paths = [shared_data / "ptb_sample" / f"wsj_{n:04d}.mrg" for n in range(160, 180)]
    return [clean_tree(t) for path in paths for t in read_treebank(path)]


def test_reads_multi_line_trees_with_the_outer_bracket():
    first, second = read_trees(RAW)
    assert first.label() == "" and first[0].label() == "S"
    assert first.leaves()[:3] == ["Pierre", "Vinken", "will"]
    assert second.leaves() == ["He", "left", "."]


def test_cleaning_drops_traces_strips_function_tags_and_roots_in_top():
    cleaned = clean_tree(read_trees(RAW)[0])
    assert to_line(cleaned) == (
        "(TOP (S (NP (NNP Pierre) (NNP Vinken)) (VP (MD will) (VP (VB join) (NP (DT the) "
        "(NN board)) (S (VP (TO to) (VP (VB help)))) (PP (-LRB- -LRB-) (IN as) (NP (DT a) "
        "(NN director)) (-RRB- -RRB-)))) (. .)))"
    )
    assert clean_tree(Tree("S", [Tree("NP", [Tree("-NONE-", ["*"])])])) is None
    assert clean_tree(Tree("S", [Tree("NN", ["x"])])).label() == "TOP"  # a bare root is wrapped


@pytest.mark.parametrize(
    "label, expected",
    [("NP-SBJ-1", "NP"), ("NP=2", "NP"), ("NP-SBJ=1-3", "NP"), ("-LRB-", "-LRB-"), ("S", "S")],
)
def test_strip_function_tags(label, expected):
    assert strip_function_tags(label) == expected


def test_sample_is_clean_and_round_trips_through_one_line(sample_trees):
    assert len(sample_trees) == 273
    for tree in sample_trees:
        assert tree.label() == "TOP"
        assert all(t != "-NONE-" and "=" not in t for _, t in tree.pos())
        assert all("-" not in s.label() for s in tree.subtrees() if isinstance(s[0], Tree))
        assert read_trees(to_line(tree)) == [tree]


@pytest.mark.parametrize(
    "text, problem",
    [
        ("(S (NP a))\n(S (NP b)))", "tree 3 (line 2): unbalanced brackets"),
        ("(S (NP a))\n(S (NP b)", "tree 2 (line 2): unbalanced brackets: 1 still open"),
        ("(S (NP a)) stray", "tree 2 (line 1): word 'stray' outside any bracket"),
        ("(S (NP a b))", "tree 1 (line 1): (NP …) holds 'b' beside another child"),
        ("(S (NP a (NN b)))", "tree 1 (line 1): (NP …) holds a word beside a bracket"),
    ],
)
def test_bad_trees_are_named_by_file_and_number(tmp_path, text, problem):
    path = tmp_path / "bad.mrg"
    path.write_text(text)
    with pytest.raises(TreebankError, match=r"bad\.mrg: ") as error:
        read_treebank(path)
    assert problem in str(error.value)


def test_invalid_utf8_and_missing_files(tmp_path):
    path = tmp_path / "latin1.mrg"
    path.write_bytes(b"(S (NN a))\n(S (NN caf\xe9))\n")
    with pytest.raises(TreebankError, match=r"latin1\.mrg: tree 2 \(line 2\): invalid UTF-8"):
        read_treebank(path)
    with pytest.raises(FileNotFoundError, match="nothere.mrg"):
        read_treebank(tmp_path / "nothere.mrg")


def test_linearisation_of_the_paper_example():
    tree = Tree.fromstring("(TOP (S (NP (NNP John)) (VP (VBZ has) (NP (DT a) (NN dog))) (. .)))")
    assert " ".join(linearise(tree)) == "(S (NP XX )NP (VP XX (NP XX XX )NP )VP XX )S"
    assert linearise(tree, tags=True)[:3] == ["(S", "(NP", "NNP"]
    words = tree.leaves()
    assert delinearise(linearise(tree), words, [t for _, t in tree.pos()]) == tree
    assert delinearise(linearise(tree, tags=True), words) == tree
    assert {t for _, t in delinearise(linearise(tree), words).pos()} == {XX}


def test_delinearise_inverts_linearise_on_the_sample(sample_trees):
    for tree in sample_trees:
        words, tags = zip(*tree.pos())
        tokens = linearise(tree)
        assert repair(tokens, len(words)) == (tokens, 0)
        assert delinearise(tokens, words, tags) == tree


@pytest.mark.parametrize(
    "tokens, problem",
    [
        ("(S XX XX )S )S", "closes no open"),
        ("(S XX XX )NP", "closes no open"),
        ("(S (NP )NP XX XX )S", "closes no open"),
        ("(S XX XX", "1 brackets left open"),
        ("(S XX XX XX )S", "more preterminals than the 2 words"),
        ("(S XX )S", "1 preterminals for 2 words"),
    ],
)
def test_delinearise_rejects_malformed_sequences(tokens, problem):
    with pytest.raises(ValueError, match=problem):
        delinearise(tokens.split(), ["a", "b"])


@pytest.mark.parametrize(
    "tokens, fixed, edits",
    [
        ("(S XX XX )S )S", "(S XX XX )S", 1),  # a close with nothing open
        ("(S (NP XX )VP XX )S", "(S (NP XX )NP XX )S", 1),  # the opening label wins
        ("(S (NP XX XX", "(S (NP XX XX )NP )S", 2),  # brackets left open
        ("(S XX XX XX )S", "(S XX XX )S", 1),  # a surplus preterminal
        ("(S XX )S (NP )NP", "(S XX )S (NP XX )NP", 1),  # a missing one, added at the end
        ("(S XX (NP )NP XX )S", "(S XX XX )S", 1),  # an empty constituent
        ("", "XX XX", 2),  # nothing at all
    ],
)
def test_repair(tokens, fixed, edits):
    assert repair(tokens.split(), 2) == (fixed.split(), edits)


def test_repair_makes_any_sequence_well_formed():
    rng = random.Random(0)
    vocabulary = ["(S", ")S", "(NP", ")NP", "(VP", ")VP", XX, "NN"]
    for _ in range(500):
        tokens = rng.choices(vocabulary, k=rng.randrange(0, 30))
        words = [f"w{i}" for i in range(rng.randrange(1, 8))]
        tree, edits = tree_from_output(tokens, words)
        assert tree.leaves() == words
        assert all(len(s) > 0 for s in tree.subtrees())
        assert repair(linearise(tree, tags=True), len(words)) == (linearise(tree, tags=True), 0)
        assert (edits == 0) == (repair(tokens, len(words))[0] == tokens)


def test_nesting_is_bounded():
    deep = ["(S"] * (MAX_DEPTH + 5) + [XX] + [")S"] * (MAX_DEPTH + 5)
    with pytest.raises(ValueError, match=f"nests deeper than {MAX_DEPTH}"):
        delinearise(deep, ["a"])
    fixed, edits = repair(deep, 1)
    assert edits == 5 and fixed == ["(S"] * MAX_DEPTH + [XX] + [")S"] * MAX_DEPTH
