"""Words read as a pre-trained tokeniser's pieces, one annotation per word (Kitaev & Klein
2019, §3: "we use the representation of the first subword of each word"): the parser keeps its
word-level output, constraint and EVALB scoring while its encoder reads the pieces it was
pre-trained on (`seqtasks.tasks.pretrained`).

Each word is encoded on its own, so a word's pieces are never shared with a neighbour's and its
first piece is the one that starts with sentencepiece's word boundary "▁"; the encoder's
annotation of that piece stands for the word, and the source's EOS for itself. A tokeniser of
whole words (`data_prep/monolingual.py --model-type word`) has no piece inside a word, so the
one `<unk>` it reads a word it lacks as stands for that word.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

import torch
from torch import Tensor

from seqtasks.data.tokenizer import EOS_ID, UNK_ID, SentencePieceTokenizer
from seqtasks.layers.memory import Memory, lengths_to_mask

BOUNDARY = "▁"  # sentencepiece's mark of a word's start (U+2581)


class SourcePieces:
    """The source side as a `Tokenizer` over a sentencepiece model: a sentence's words (split
    at spaces) to the pieces of each word in turn, and a table saying which ids start a word.

    Args:
        proto: the sentencepiece model's bytes (`SentencePieceTokenizer.proto`).
    """

    def __init__(self, proto: bytes):
        self.tokenizer = SentencePieceTokenizer(proto, name="the parser's source tokeniser")
        self.tokens = self.tokenizer.pieces(range(self.tokenizer.vocab_size))
        self.word_starts = [piece.startswith(BOUNDARY) for piece in self.tokens]
        if all(self.word_starts[EOS_ID + 1 :]):  # whole words: the unknown one is a word too
            self.word_starts[UNK_ID] = True
        self.word_starts[EOS_ID] = True
        self.starts = torch.tensor(self.word_starts)  # (V,) bool: the id begins a word, or EOS

    def encode_words(self, words: Sequence[str]) -> list[int]:
        """Each word's pieces in turn (no EOS).

        Raises:
            ValueError: for a word whose pieces do not start, or do not only start, with the
                tokeniser's word boundary (a model trained without `add_dummy_prefix`), which
                would lose the word's position.
        """
        ids = []
        for word in words:
            pieces = self.tokenizer.encode(word)
            starts = [self.word_starts[i] for i in pieces]
            if not starts or not starts[0] or any(starts[1:]):
                raise ValueError(
                    f"the source tokeniser reads the word {word!r} as {self.pieces(pieces)}, "
                    f"not as pieces of which only the first starts with {BOUNDARY!r}: use a "
                    "sentencepiece model trained with add_dummy_prefix (the default)"
                )
            ids += pieces
        return ids

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    def pieces(self, ids: Sequence[int]) -> list[str]:
        return [self.tokens[i] for i in ids]

    def encode(self, text: str) -> list[int]:
        return self.encode_words(text.split())

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(ids)


def as_text(proto: bytes) -> str:
    """A sentencepiece model as text for a vocabulary's JSON (base64)."""
    return base64.b64encode(proto).decode("ascii")


def from_text(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


def first_pieces(memory: Memory, starts: Tensor) -> Memory:
    """`memory` over pieces → over words: each row keeps the annotations of the positions that
    `starts` (B, S) marks (a word's first piece, the EOS), in order, padded at the end; the
    summary is the encoder's own (over every piece)."""
    keep = starts & memory.mask
    counts = keep.sum(dim=1)
    order = torch.argsort((~keep).to(torch.int8), dim=1, stable=True)[:, : int(counts.max())]
    states = memory.states.gather(1, order[..., None].expand(-1, -1, memory.states.size(-1)))
    mask = lengths_to_mask(counts, order.size(1))
    return Memory(states * mask[..., None], mask, memory.summary, None, memory.auxiliary_loss)
