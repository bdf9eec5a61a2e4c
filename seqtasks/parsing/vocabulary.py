"""Parsing's two vocabularies: source words (with unknown-word classes) and target tokens.

The source vocabulary is word level: the decoder writes one preterminal per input word, so
attention that moves one annotation per word is what the output needs, and the constraint
counts words. Words seen fewer than `min_count` times in training are read as an unknown-word
class from their shape and suffix (as the Berkeley parser's signatures, Petrov et al. 2006),
and during training a word seen c times is read as its class with probability α / (α + c)
(word dropout, Kiperwasser & Goldberg 2016), so the classes are learnt from real contexts and
carry what the model knows about unseen words. A parser fine-tuned from a pre-trained encoder
reads that encoder's tokeniser's pieces instead, and keeps one annotation per word all the same
(`seqtasks.parsing.pieces`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from nltk import Tree

from seqtasks.data.tokenizer import UNK_ID
from seqtasks.parsing.linearisation import linearise
from seqtasks.parsing.pieces import BOUNDARY, SourcePieces, as_text, from_text
from seqtasks.parsing.trees import read_trees

SPECIALS = ["<pad>", "<unk>", "<s>", "</s>"]  # at PAD_ID, UNK_ID, BOS_ID, EOS_ID


SUFFIXES = ("ing", "ed", "ion", "er", "est", "ly", "ity", "al", "ble", "ic", "ive", "y", "s")


def unknown_word_class(word: str) -> str:
    """The token an unknown word is read as: its capitalisation, digits, dash and suffix,
    e.g. `Cap-ing` for "Bankrolling", `other-num` for "3.5"."""
    if word.isupper():
        shape = "CAPS"
    elif word[:1].isupper():
        shape = "Cap"
    else:
        shape = "low" if word[:1].islower() else "other"
    features = [shape]
    if any(c.isdigit() for c in word):
        features.append("num")
    if "-" in word:
        features.append("dash")
    lowered = word.lower()
    features += [s for s in SUFFIXES if lowered.endswith(s) and len(word) > len(s) + 2][:1]
    return "<unk-" + "-".join(features) + ">"


class TokenList:
    """A fixed list of tokens, id i for `tokens[i]`: what the two sides share."""

    def __init__(self, tokens: list[str]):
        self.tokens = tokens
        self.ids = {t: i for i, t in enumerate(tokens)}

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    def pieces(self, ids: Sequence[int]) -> list[str]:
        return [self.tokens[i] for i in ids]


class SourceWords(TokenList):
    """The source side as a `Tokenizer`: a sentence's words (split at spaces) to ids, unknown
    words read as their class, in the order the encoder reads them."""

    def __init__(self, words: list[str], reverse: bool):
        super().__init__(words)
        self.reverse = reverse

    def ordered(self, items: list) -> list:
        """Source positions in the order the encoder reads them."""
        return items[::-1] if self.reverse else items

    def unknown_id(self, word: str) -> int:
        return self.ids.get(unknown_word_class(word), UNK_ID)

    def encode_words(self, words: Sequence[str]) -> list[int]:
        """Source ids (no EOS), unknown words as their class."""
        ids = [self.ids.get(w) for w in words]
        return self.ordered([self.unknown_id(w) if i is None else i for i, w in zip(ids, words)])

    def encode(self, text: str) -> list[int]:
        return self.encode_words(text.split())

    def decode(self, ids: Sequence[int]) -> str:
        return " ".join(self.ordered(self.pieces(ids)))


class TreeTokens(TokenList):
    """The target side as a `Tokenizer`: a tree (on one line) to the ids of its bracket
    sequence (`seqtasks.parsing.linearisation`), and ids back to that sequence."""

    def __init__(self, tokens: list[str], tags: bool):
        super().__init__(tokens)
        self.tags = tags

    def encode_tree(self, tree: Tree) -> list[int]:
        """Target ids of the tree's bracket sequence (no BOS/EOS)."""
        return [self.ids.get(t, UNK_ID) for t in linearise(tree, self.tags)]

    def encode(self, text: str) -> list[int]:
        return self.encode_tree(read_trees(text)[0])

    def decode(self, ids: Sequence[int]) -> str:
        return " ".join(self.pieces(ids))


@dataclass
class ParsingVocabulary:
    """Source words and target tokens, stored in checkpoints as these lists and flags; `source`
    and `target` are the two sides as `Tokenizer`s.

    Attributes:
        words: the source token of each id: SPECIALS, the words, the unknown-word classes.
        tokens: the target token of each id: SPECIALS, then brackets and preterminals.
        tags: preterminals are POS tags instead of `XX`.
        reverse: the words are fed in reverse order (Vinyals et al. 2015).
        source_tokenizer: the sentencepiece model (base64) the words are read with instead
            of `words`, which then lists its pieces (`SourcePieces`); None: words.
    """

    words: list[str]
    tokens: list[str]
    tags: bool
    reverse: bool
    source_tokenizer: str | None = None

    def __post_init__(self):
        if self.source_tokenizer is None:
            self.source = SourceWords(self.words, self.reverse)
        elif self.reverse:
            raise ValueError("a parser that reads pieces reads them in order, not reversed")
        else:
            self.source = SourcePieces(from_text(self.source_tokenizer))
        self.target = TreeTokens(self.tokens, self.tags)

    @property
    def tokenizer_proto(self) -> bytes | None:
        """The source tokeniser's sentencepiece model (None: the source is words)."""
        return self.source.tokenizer.proto if isinstance(self.source, SourcePieces) else None

    @property
    def known_words(self) -> list[str]:
        """The words the source knows whole (for the abbreviations that do not end a
        sentence: `PTBTokenizer`): its words, or the pieces that are a word."""
        if isinstance(self.source, SourcePieces):
            return [p[len(BOUNDARY) :] for p in self.words if p.startswith(BOUNDARY)]
        return self.words

    @classmethod
    def build(
        cls,
        trees: Sequence[Tree],
        tags: bool,
        reverse: bool,
        min_count: int,
        tokenizer: bytes | None = None,
    ) -> ParsingVocabulary:
        """From training trees: words seen at least `min_count` times, the classes of all
        training words (or, with a sentencepiece `tokenizer`, its pieces), and every target
        token."""
        tokens = SPECIALS + sorted({t for tree in trees for t in linearise(tree, tags)})
        if tokenizer is not None:
            return cls(SourcePieces(tokenizer).tokens, tokens, tags, reverse, as_text(tokenizer))
        counts = Counter(w for tree in trees for w in tree.leaves())
        frequent = sorted(w for w, c in counts.items() if c >= min_count)
        classes = sorted({unknown_word_class(w) for w in counts})
        return cls(SPECIALS + frequent + classes, tokens, tags, reverse)

    def as_dict(self) -> dict[str, Any]:
        """Plain lists and flags, as stored in checkpoints (a word vocabulary without the
        `source_tokenizer` key, as before it existed)."""
        stored = asdict(self)
        if self.source_tokenizer is None:
            del stored["source_tokenizer"]
        return stored

    @classmethod
    def from_dict(cls, stored: dict[str, Any]) -> ParsingVocabulary:
        return cls(**stored)
