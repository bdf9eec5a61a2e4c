"""The tokeniser protocol and the fixed special-token ids every model shares, and subword
tokenisation with sentencepiece."""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

import sentencepiece as spm

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3


@runtime_checkable
class Tokenizer(Protocol):
    """What every tokeniser offers (sentencepiece subwords, caption words, parsing's words and
    tree tokens): text to ids and back, with the special ids above at the same places in
    every vocabulary. `encode` adds neither BOS nor EOS (the data modules do); `pieces` gives
    one display string per id, for attention plots and bracket sequences."""

    @property
    def vocab_size(self) -> int: ...

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...

    def pieces(self, ids: Sequence[int]) -> list[str]: ...


class SentencePieceTokenizer:
    """A sentencepiece model held as its serialised bytes, so it travels inside checkpoints.

    Text is encoded without BOS/EOS; the data module adds them. `decode` detokenises, giving
    the plain text that BLEU is computed on. Bytes that are no sentencepiece model, or one
    without seqtasks' special ids, are a ValueError naming `name`.
    """

    def __init__(self, model_proto: bytes, name: str = "<bytes>"):
        self.proto = model_proto
        if not model_proto:  # sentencepiece takes no bytes for a model it cannot use
            raise ValueError(f"{name} is not a sentencepiece model (it is empty)")
        try:
            self.sp = spm.SentencePieceProcessor(model_proto=model_proto)
        except RuntimeError as error:  # "INTERNAL: …(109) [model_proto->ParseFromArray(…)]"
            why = "it does not parse" if "Parse" in str(error) else " ".join(str(error).split())
            raise ValueError(f"{name} is not a sentencepiece model ({why})") from None
        if self.sp.get_piece_size() <= EOS_ID:
            raise ValueError(f"{name} is not a sentencepiece model (it has no pieces)")
        ids = (self.sp.pad_id(), self.sp.unk_id(), self.sp.bos_id(), self.sp.eos_id())
        if ids != (PAD_ID, UNK_ID, BOS_ID, EOS_ID):
            raise ValueError(
                f"sentencepiece model {name} has pad/unk/bos/eos ids {ids}; seqtasks needs "
                f"{(PAD_ID, UNK_ID, BOS_ID, EOS_ID)}: train it with train_sentencepiece"
            )

    @classmethod
    def from_file(cls, path: str | Path) -> SentencePieceTokenizer:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"sentencepiece model not found: {path}")
        return cls(path.read_bytes(), name=str(path))

    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size()

    def encode(self, text: str) -> list[int]:
        return self.sp.encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        return self.sp.decode(list(ids))

    def pieces(self, ids: Sequence[int]) -> list[str]:
        """The subword strings of `ids`, for axis labels of attention plots."""
        return self.sp.id_to_piece(list(ids))  # one call for the list


def train_sentencepiece(
    lines: Iterable[str],
    vocab_size: int,
    model_type: Literal["bpe", "unigram", "char", "word"] = "unigram",
    character_coverage: float = 1.0,
) -> SentencePieceTokenizer:
    """Train a sentencepiece model in memory with seqtasks' special-token ids."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        vocab_size=vocab_size,
        model_type=model_type,
        character_coverage=character_coverage,
        pad_id=PAD_ID,
        unk_id=UNK_ID,
        bos_id=BOS_ID,
        eos_id=EOS_ID,
        hard_vocab_limit=False,
        minloglevel=2,
        num_threads=2,
    )
    return SentencePieceTokenizer(model.getvalue())
