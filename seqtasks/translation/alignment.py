"""Word alignments: read from a model's attention over subword pieces, written and read in the
Pharaoh format, and scored by alignment error rate (Och & Ney 2003).

A link (i, j) joins source word i and target word j, counted from 0, as the Pharaoh format
writes it: `i-j` pairs separated by spaces, a sentence a line. A gold alignment has sure links S
(`i-j`) and possible ones P (`i?j` or `ipj`, the two spellings Pharaoh-style gold files use);
every sure link is also possible (S ⊆ P). For a
predicted alignment A, over a whole corpus (the counts summed over sentences):

    precision = |A ∩ P| / |A|      recall = |A ∩ S| / |S|
    AER = 1 − (|A ∩ S| + |A ∩ P|) / (|A| + |S|)

each given × 100, as the papers print them (and every score of seqtasks is).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from torch import Tensor

Link = tuple[int, int]  # (source word, target word)
Units = Literal["words", "pieces"]  # what a target position is
WORD_START = "▁"  # sentencepiece's mark of a piece that starts a word
LINK = re.compile(r"(\d+)([-?p])(\d+)")


@dataclass(frozen=True)
class GoldAlignment:
    """One sentence pair's gold links: `sure` S and `possible` P, with S ⊆ P."""

    sure: frozenset[Link]
    possible: frozenset[Link]


def read_links(line: str, where: str) -> GoldAlignment:
    """One Pharaoh line: `i-j` sure, `i?j` or `ipj` possible (and so P = those ∪ S).

    Raises:
        ValueError: naming `where` (file:line) and the first item that is not a link.
    """
    sure, possible = set(), set()
    for item in line.split():
        found = LINK.fullmatch(item)
        if found is None:
            raise ValueError(
                f"{where}: {item!r} is not a link: write i-j (sure), i?j or ipj (possible), "
                "i the source word and j the target word, from 0"
            )
        link = (int(found[1]), int(found[3]))
        (sure if found[2] == "-" else possible).add(link)
    return GoldAlignment(frozenset(sure), frozenset(possible | sure))


def write_links(links: Iterable[Link]) -> str:
    """A Pharaoh line of `links`, by source word, then target word."""
    return " ".join(f"{i}-{j}" for i, j in sorted(set(links)))


def piece_words(pieces: Sequence[str]) -> list[int]:
    """The word each piece belongs to: a piece that starts with ▁ starts the next word (the
    first piece starts word 0 whether or not it has the mark)."""
    words, word = [], -1
    for k, piece in enumerate(pieces):
        if k == 0 or piece.startswith(WORD_START):
            word += 1
        words.append(word)
    return words


def piece_positions(pieces: Sequence[str]) -> list[int | None]:
    """Each piece a position of its own, but a bare word mark ▁, which holds no character
    (None): for a character model, such as the dates task's, the text's characters."""
    positions, position = [], 0
    for piece in pieces:
        positions.append(None if piece == WORD_START else position)
        position += piece != WORD_START
    return positions


def word_attention(
    attention: Tensor, source: Sequence[str], target: Sequence[str], target_units: Units = "words"
) -> Tensor:
    """(T, S + 1) attention of target pieces over source pieces and the source EOS ->
    (target words, source words + 1): the attention of a word's pieces summed, on both sides
    (the EOS a word of its own, last). With `target_units` "pieces" the rows are the target's
    pieces (`piece_positions`) instead of its words."""
    if tuple(attention.shape) != (len(target), len(source) + 1):
        raise ValueError(
            f"attention {tuple(attention.shape)} is not over {len(target)} target pieces and "
            f"{len(source)} source pieces and the EOS"
        )
    columns: list[int | None] = [*piece_words(source)]
    columns.append(columns[-1] + 1 if columns else 0)  # the EOS
    rows = piece_words(target) if target_units == "words" else piece_positions(target)
    return _summing(rows, attention).T @ attention @ _summing(columns, attention)


def _summing(words: Sequence[int | None], like: Tensor) -> Tensor:
    """(pieces, words) of 0 and 1: piece k is in word `words[k]` (in none for None)."""
    counted = [(k, word) for k, word in enumerate(words) if word is not None]
    matrix = like.new_zeros(len(words), max((w for _, w in counted), default=-1) + 1)
    for k, word in counted:
        matrix[k, word] = 1
    return matrix


def attention_links(
    attention: Tensor, source: Sequence[str], target: Sequence[str], target_units: Units = "words"
) -> set[Link]:
    """Each target word (or piece: `target_units`) linked to the source word it attends to
    most, its pieces' attention summed (Garg et al. 2019); a target word that attends
    most to the EOS is left unaligned."""
    words = word_attention(attention, source, target, target_units)
    eos = words.size(1) - 1
    return {(i, j) for j, i in enumerate(words.argmax(dim=1).tolist()) if i != eos}


def alignment_attention(
    cross: Sequence[Tensor], layer: int | None = None, heads: Sequence[int] | None = None
) -> Tensor:
    """The (queries, keys) map alignments are read from, out of a decoder's cross-attention
    maps, each (heads, queries, keys), bottom up: `layer`'s (counted from 0 at the bottom, −1
    at the top; None: the penultimate layer of two or more, the one otherwise, which Garg et al.
    2019 found aligns best), averaged over `heads` (None: all of them).

    Raises:
        IndexError: for a layer or head the decoder has not, naming how many it has.
    """
    layer = (-2 if len(cross) >= 2 else -1) if layer is None else layer
    if not -len(cross) <= layer < len(cross):
        raise IndexError(f"layer {layer}: the decoder's cross-attention has {len(cross)} layers")
    weights = cross[layer]
    if heads is None:
        return weights.mean(0)
    missing = [h for h in heads if not 0 <= h < weights.size(0)]
    if missing or not heads:
        raise IndexError(
            f"heads {list(heads)}: the decoder's cross-attention has {weights.size(0)} heads "
            f"(0 to {weights.size(0) - 1})"
        )
    return weights[list(heads)].mean(0)


@dataclass(frozen=True)
class AlignmentScores:
    """Precision, recall and AER (0–100) of a corpus, and the counts they come from."""

    precision: float
    recall: float
    aer: float
    predicted: int  # |A|
    sure: int  # |S|
    possible: int  # |P|
    sentences: int


def score_alignments(
    predicted: Sequence[Iterable[Link]], gold: Sequence[GoldAlignment]
) -> AlignmentScores:
    """Och & Ney's precision, recall and AER over the corpus (counts summed over sentences).

    Raises:
        ValueError: for files of different lengths, or gold with no sure link at all.
    """
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predicted alignments for {len(gold)} gold ones")
    a = a_s = a_p = s = p = 0
    for links, truth in zip(predicted, gold, strict=True):
        links = set(links)
        a += len(links)
        a_s += len(links & truth.sure)
        a_p += len(links & truth.possible)
        s += len(truth.sure)
        p += len(truth.possible)
    if s == 0:
        raise ValueError("the gold alignments have no sure link: recall and AER are undefined")
    return AlignmentScores(
        precision=100 * a_p / a if a else 0.0,
        recall=100 * a_s / s,
        aer=100 * (1 - (a_s + a_p) / (a + s)),
        predicted=a,
        sure=s,
        possible=p,
        sentences=len(gold),
    )
