"""Word-level tokenisation for captions: lower-cased words, punctuation stripped, rare words UNK.

It shares the special-token ids of every seqtasks model (`tokenizer.PAD_ID` …) and the
`Tokenizer` protocol (`encode`, `decode`, `pieces`, `vocab_size`), and is stored in a checkpoint
as its word list.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

from seqtasks.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID

SPECIALS = {PAD_ID: "<pad>", UNK_ID: "<unk>", BOS_ID: "<s>", EOS_ID: "</s>"}
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")


def words(text: str) -> list[str]:
    """Lower-cased words without punctuation: "A dog's ball, red." -> [a, dog's, ball, red]."""
    return _WORD.findall(text.lower())


class WordTokenizer:
    """A fixed word list: ids 0–3 are the special tokens, then one id per word.

    Args:
        vocabulary: the words, without the special tokens, in id order.
    """

    def __init__(self, vocabulary: list[str]):
        self.vocabulary = list(vocabulary)
        self.itos = [SPECIALS[i] for i in range(len(SPECIALS))] + self.vocabulary
        self.stoi = {word: i for i, word in enumerate(self.itos)}

    @classmethod
    def build(cls, texts: Iterable[str], min_freq: int = 1) -> WordTokenizer:
        """The words of `texts` seen at least `min_freq` times, most frequent first."""
        counts = Counter(word for text in texts for word in words(text))
        kept = [w for w, n in counts.items() if n >= min_freq]
        return cls(sorted(kept, key=lambda w: (-counts[w], w)))

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    def encode(self, text: str) -> list[int]:
        return [self.stoi.get(word, UNK_ID) for word in words(text)]

    def decode(self, ids: Sequence[int]) -> str:
        """The words of `ids` joined by spaces; special tokens other than UNK are left out."""
        return " ".join(self.itos[i] for i in ids if i == UNK_ID or i not in SPECIALS)

    def pieces(self, ids: Sequence[int]) -> list[str]:
        """One string per id, for the panels of attention figures."""
        return [self.itos[i] for i in ids]
