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
            holds a word beside anything else, naming `source`, the tree number (from 1) and
            the line.
    """
    trees: list[Tree] = []
    stack: list[Tree] = []
    tokens = [(m.group(), m.start()) for m in _TOKEN.finditer(text)]
    i = 0
    while i < len(tokens):
        token, at = tokens[i]
        problem = None
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
            line = text.count("\n", 0, at) + 1
            raise TreebankError(f"{source}: tree {len(trees) + 1} (line {line}): {problem}")
        i += 1
    if stack:
        raise TreebankError(
            f"{source}: tree {len(trees) + 1}: unbalanced brackets: {len(stack)} still open "
            "at the end"
        )
    return trees


def _tree_number(text: str) -> int:
    """The number (from 1) of the tree that is being read where `text` ends."""
    depth, number = 0, 1
    for token in _TOKEN.findall(text):
        depth += (token == "(") - (token == ")")
        number += token == ")" and depth == 0
    return number


def decode_trees(raw: bytes, source: str) -> list[Tree]:
    """The trees of a UTF-8 file's bytes; errors name `source` and the tree number."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        before = raw[: error.start].decode("utf-8")
        line = before.count("\n") + 1
        raise TreebankError(
            f"{source}: tree {_tree_number(before)} (line {line}): invalid UTF-8"
        ) from None
    return read_trees(text, source)


def read_treebank(path: str | Path) -> list[Tree]:
    """The trees of a UTF-8 file; errors name the file and the tree number."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such treebank file: {path}")
    return decode_trees(path.read_bytes(), str(path))


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
