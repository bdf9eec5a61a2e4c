"""Penn Treebank trees: reading bracketed files, and the standard cleaning of WSJ trees.

A tree is an `nltk.Tree`: a preterminal is `Tree(tag, [word])`, every other node has only
subtrees as children. Files hold one or many trees, one per line or spread over lines, each
possibly wrapped in the treebank's unlabelled outer bracket `( (S …) )`.
"""

from __future__ import annotations

import re
from pathlib import Path

from nltk import Tree

ROOT = "TOP"
NONE_TAG = "-NONE-"  # the tag of traces and empty elements
_TOKEN = re.compile(r"\(|\)|[^\s()]+")


class TreebankError(ValueError):
    """A file or tree that cannot be read; the message names the source and the tree number."""


def read_trees(text: str, source: str = "<text>") -> list[Tree]:
    """All trees in `text`, in order; the unlabelled outer bracket reads as label "".

    Raises:
        TreebankError: for unbalanced brackets, a word outside any bracket, or a bracket that
            holds a word beside anything else, naming `source`, the tree number (from 1), the
            line it starts on and, if elsewhere, the line of the problem.
    """
    trees: list[Tree] = []
    stack: list[Tree] = []
    tokens = [(m.group(), m.start()) for m in _TOKEN.finditer(text)]
    start = 0  # where the tree being read starts
    i = 0
    while i < len(tokens):
        token, at = tokens[i]
        problem = None
        if not stack:
            start = at
        if token == "(":
            label = tokens[i + 1][0] if i + 1 < len(tokens) else "("
            if label in ("(", ")"):
                label = ""
            else:
                i += 1
            node = Tree(label, [])
            if stack and stack[-1] and not isinstance(stack[-1][0], Tree):
                problem = f"({stack[-1].label()} …) holds a word beside a bracket"
            elif stack:
                stack[-1].append(node)
            stack.append(node)
        elif token == ")":
            if not stack:
                problem = "unbalanced brackets: a ')' closes nothing"
            elif len(stack) == 1:
                trees.append(stack.pop())
            else:
                stack.pop()
        elif not stack:
            problem = f"word {token!r} outside any bracket"
        elif stack[-1]:
            problem = f"({stack[-1].label()} …) holds {token!r} beside another child"
        else:
            stack[-1].append(token)
        if problem:
            raise _error(source, len(trees) + 1, _line(text, start), problem, _line(text, at))
        i += 1
    if stack:
        problem = f"unbalanced brackets: {len(stack)} still open at the end"
        raise _error(source, len(trees) + 1, _line(text, start), problem)
    return trees


def _line(text: str, at: int) -> int:
    """The line (from 1) of offset `at`."""
    return text.count("\n", 0, at) + 1


def _error(
    source: str, number: int, line: int, problem: str, problem_line: int | None = None
) -> TreebankError:
    """`source: tree N (line L): problem`, L the line the tree starts on, and the problem's own
    line when it is another."""
    where = f" at line {problem_line}" if problem_line not in (None, line) else ""
    return TreebankError(f"{source}: tree {number} (line {line}): {problem}{where}")


def _tree_start(text: str) -> tuple[int, int]:
    """(number from 1, offset) of the tree that is being read where `text` ends."""
    depth, number, start = 0, 1, len(text)
    for m in _TOKEN.finditer(text):
        if depth == 0:
            start = m.start()
        depth += (m.group() == "(") - (m.group() == ")")
        if m.group() == ")" and depth == 0:
            number, start = number + 1, len(text)
    return number, start


def decode_trees(raw: bytes, source: str) -> list[Tree]:
    """The trees of a UTF-8 file's bytes; errors name `source`, the tree number and its line."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        before = raw[: error.start].decode("utf-8")
        number, start = _tree_start(before)
        line = _line(before, start)
        raise _error(source, number, line, "invalid UTF-8", _line(before, len(before))) from None
    return read_trees(text, source)


def read_treebank(path: str | Path) -> list[Tree]:
    """The trees of a UTF-8 file; errors name the file and the tree number."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such treebank file: {path}")
    return decode_trees(path.read_bytes(), str(path))


def read_predicted(path: str | Path, count: int, gold: str) -> list[Tree | None]:
    """The trees a parser wrote for the `count` sentences of the file `gold`, in order: a
    treebank file of `count` trees, or a file of one tree a line in which an empty line is a
    sentence that was not parsed (None), as `seqtasks parse` writes it.

    Raises:
        FileNotFoundError: naming the path.
        TreebankError: for a tree that cannot be read, or a file of another number of trees
            (or lines), naming the file and both counts.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such treebank file: {path}")
    raw = path.read_bytes()
    trees = decode_trees(raw, str(path))
    lines = raw.decode("utf-8").splitlines()  # decoded above already: it is UTF-8
    if any(not line.strip() for line in lines) and len(trees) == sum(map(_one_tree, lines)):
        if len(lines) != count:
            raise TreebankError(
                f"{gold} has {count} trees but {path} has {len(lines)} lines (a tree or an "
                "empty line each)"
            )
        found = iter(trees)
        return [next(found) if line.strip() else None for line in lines]
    if len(trees) != count:
        raise TreebankError(f"{gold} has {count} trees but {path} has {len(trees)}")
    return list(trees)


def _one_tree(line: str) -> bool:
    """Whether `line` holds exactly one whole tree."""
    try:
        return len(read_trees(line)) == 1
    except TreebankError:
        return False


def strip_function_tags(label: str) -> str:
    """`NP-SBJ-1` -> `NP`, `NP=2` -> `NP`; labels that begin with '-' (`-LRB-`, `-NONE-`) stay."""
    if label.startswith("-"):
        return label
    return re.split(r"[-=]", label, maxsplit=1)[0]


def _clean_node(node: Tree) -> Tree | None:
    if node and not isinstance(node[0], Tree):  # a preterminal
        return None if node.label() == NONE_TAG else Tree(node.label(), [node[0]])
    children = [c for c in (_clean_node(child) for child in node) if c is not None]
    return Tree(strip_function_tags(node.label()), children) if children else None


def clean_tree(tree: Tree) -> Tree | None:
    """The standard cleaning: drop `-NONE-` preterminals and the constituents they leave empty,
    strip function tags and indices, and root the tree in `TOP` (an unlabelled, `TOP` or `ROOT`
    outer bracket is relabelled, any other root is wrapped). None when nothing is left."""
    cleaned = _clean_node(tree)
    if cleaned is None:
        return None
    if cleaned.label() in ("", ROOT, "ROOT") and isinstance(cleaned[0], Tree):
        return Tree(ROOT, list(cleaned))
    return Tree(ROOT, [cleaned])


def to_line(tree: Tree) -> str:
    """The tree on one line, PTB style: `(TOP (S (NP (NNP Ms.) (NNP Haag)) …))`."""
    if tree and not isinstance(tree[0], Tree):
        return f"({tree.label()} {tree[0]})"
    return f"({tree.label()} {' '.join(to_line(child) for child in tree)})"
