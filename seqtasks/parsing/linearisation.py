"""Trees as bracket sequences (Vinyals et al. 2015, "Grammar as a Foreign Language", §2).

A tree under `TOP` is written depth first with labelled opening and closing brackets, every
preterminal as `XX` (or its tag, with `tags=True`); the words are left out, since the decoder
reads them from the input:

    (TOP (S (NP (NNP John)) (VP (VBZ has) (NP (DT a) (NN dog))) (. .)))
    -> (S (NP XX )NP (VP XX (NP XX XX )NP )VP XX )S

A sequence is *well formed* for n words when its brackets nest with matching labels at most
MAX_DEPTH deep, no constituent is empty and it has exactly n preterminals; `delinearise` turns
such a sequence and the words back into a tree, `repair` makes any sequence well formed, and
`BracketConstraint` (`seqtasks.parsing.constraint`) keeps a decoder inside the well-formed
sequences as it searches.
"""

from __future__ import annotations

from collections.abc import Sequence

from nltk import Tree

from seqtasks.parsing.trees import ROOT

XX = "XX"


MAX_DEPTH = 100  # the WSJ sample nests 28 brackets deep; recursive tree code stays safe


def is_open(token: str) -> bool:
    return token.startswith("(")


def is_close(token: str) -> bool:
    return token.startswith(")")


def is_leaf(token: str) -> bool:
    """A preterminal: `XX`, or a POS tag when tags are kept."""
    return not (is_open(token) or is_close(token))


def linearise(tree: Tree, tags: bool = False) -> list[str]:
    """The bracket sequence of the children of `tree`'s root (`TOP`)."""
    tokens: list[str] = []

    def visit(node: Tree) -> None:
        if node and not isinstance(node[0], Tree):
            tokens.append(node.label() if tags else XX)
            return
        tokens.append(f"({node.label()}")
        for child in node:
            visit(child)
        tokens.append(f"){node.label()}")

    for child in tree:
        visit(child)
    return tokens


def delinearise(
    tokens: Sequence[str], words: Sequence[str], tags: Sequence[str] | None = None
) -> Tree:
    """The tree under `TOP` that a well-formed sequence describes over `words`.

    A preterminal's tag is taken from `tags` when given (e.g. the gold tags, to score the
    predicted structure alone), else from the token (`XX`, or the tag a model predicted).

    Raises:
        ValueError: naming the first problem, if the sequence is not well formed.
    """
    stack = [Tree(ROOT, [])]
    used = 0
    for position, token in enumerate(tokens):
        if is_open(token):
            if len(stack) > MAX_DEPTH:
                raise ValueError(f"token {position} {token!r} nests deeper than {MAX_DEPTH}")
            node = Tree(token[1:], [])
            stack[-1].append(node)
            stack.append(node)
        elif is_close(token):
            if len(stack) == 1 or stack[-1].label() != token[1:] or not stack[-1]:
                raise ValueError(f"token {position} {token!r} closes no open non-empty bracket")
            stack.pop()
        else:
            if used == len(words):
                raise ValueError(f"more preterminals than the {len(words)} words")
            tag = tags[used] if tags is not None else token
            stack[-1].append(Tree(tag, [words[used]]))
            used += 1
    if len(stack) > 1:
        raise ValueError(f"{len(stack) - 1} brackets left open")
    if used < len(words):
        raise ValueError(f"{used} preterminals for {len(words)} words")
    return stack[0]


def repair(tokens: Sequence[str], n_words: int) -> tuple[list[str], int]:
    """A well-formed sequence for `n_words` close to `tokens`, and the number of edits made
    (0 when `tokens` was well formed already).

    Read left to right: an opening bracket deeper than MAX_DEPTH is dropped with its closing
    one, a closing bracket that closes nothing is dropped and one with the wrong label closes
    the innermost bracket (the opening label wins); preterminals beyond `n_words` are dropped
    and missing ones added as `XX` at the end of the last top-level constituent; brackets
    still open at the end are closed, and constituents left without words are removed.
    """
    edits = 0
    stack: list[list] = [[ROOT]]  # nodes as [label, child, …]; a preterminal is its token
    leaves = too_deep = 0
    for token in tokens:
        if is_open(token) and len(stack) > MAX_DEPTH:
            too_deep += 1
            edits += 1
        elif is_open(token):
            node = [token[1:]]
            stack[-1].append(node)
            stack.append(node)
        elif is_close(token) and too_deep:
            too_deep -= 1
        elif is_close(token):
            if len(stack) == 1:
                edits += 1
                continue
            edits += stack.pop()[0] != token[1:]
        elif leaves < n_words:
            stack[-1].append(token)
            leaves += 1
        else:
            edits += 1
    edits += len(stack) - 1
    if leaves < n_words:
        edits += n_words - leaves
        root = stack[0]
        last = next((c for c in reversed(root[1:]) if isinstance(c, list)), root)
        last.extend([XX] * (n_words - leaves))

    def write(children: list, out: list[str]) -> int:
        """Append the tokens of `children`, leaving out constituents without preterminals;
        return the number of preterminals."""
        nonlocal edits
        count = 0
        for child in children:
            if isinstance(child, str):
                out.append(child)
                count += 1
                continue
            inner: list[str] = []
            found = write(child[1:], inner)
            if found:
                out.extend([f"({child[0]}", *inner, f"){child[0]}"])
            edits += not found
            count += found
        return count

    fixed: list[str] = []
    write(stack[0][1:], fixed)
    return fixed, edits


def tree_from_output(
    tokens: Sequence[str], words: Sequence[str], tags: Sequence[str] | None = None
) -> tuple[Tree, int]:
    """The tree a decoder's output describes over `words` (see `delinearise`), repaired first
    if need be, and the number of edits the repair made (0: the output was well formed)."""
    fixed, edits = repair(tokens, len(words))
    return delinearise(fixed, words, tags), edits
