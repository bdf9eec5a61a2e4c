"""Raw text to Penn Treebank tokens, offline: sentence splitting and PTB word tokenisation.

Sentences are split by nltk's Punkt algorithm with its abbreviations taken from the treebank's
own words ("Mr.", "Corp.", "U.S.": every word that ends in a period), so nothing is trained or
downloaded; words are split by nltk's Treebank tokeniser, which writes quotes as `` and '' and
brackets as -LRB- -RRB- (-LSB-, -LCB-, …), as the treebank does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from nltk.tokenize import TreebankWordTokenizer
from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

_ABBREVIATION = re.compile(r"^[^\W\d][\w.&-]*\.$")


def abbreviations(words: Iterable[str]) -> set[str]:
    """The words that end in a period but not a sentence: 'Mr.', 'U.S.', 'Inc.'."""
    return {w for w in words if _ABBREVIATION.match(w)}


class PTBTokenizer:
    """Splits text into sentences of PTB tokens.

    Args:
        known_abbreviations: words with a final period that do not end a sentence.
    """

    def __init__(self, known_abbreviations: Iterable[str] = ()):
        parameters = PunktParameters()
        parameters.abbrev_types = {w[:-1].lower() for w in abbreviations(known_abbreviations)}
        self.splitter = PunktSentenceTokenizer(parameters)
        self.words = TreebankWordTokenizer()

    def tokenize(self, sentence: str) -> list[str]:
        """One sentence's tokens."""
        return self.words.tokenize(sentence, convert_parentheses=True)

    def sentences(self, text: str) -> list[list[str]]:
        """Every sentence of `text`, as tokens."""
        return [self.tokenize(s) for s in self.splitter.tokenize(text)]


def escape_brackets(tokens: Iterable[str]) -> list[str]:
    """Round brackets inside tokens written as the treebank writes them (-LRB-, -RRB-), so
    that trees over the tokens can be read back."""
    return [t.replace("(", "-LRB-").replace(")", "-RRB-") for t in tokens]


def check_tokens(tokens: Sequence[str], what: str) -> None:
    """Raise a ValueError naming `what` and the token if one of `tokens` cannot be a leaf of a
    bracketed tree: an empty token, or one holding white space (read back as two leaves)."""
    for i, token in enumerate(tokens):
        if not token:
            raise ValueError(f"{what}: token {i} is empty (every token must hold a character)")
        if token.split() != [token]:
            raise ValueError(
                f"{what}: token {i} ({token[:30]!r}) holds white space; split it into tokens"
            )
