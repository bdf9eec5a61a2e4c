"""Every tokeniser meets the one `Tokenizer` protocol: encode without BOS/EOS, decode back, one
piece per id, the shared special ids."""

from __future__ import annotations

import pytest

from seqtasks.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Tokenizer
from seqtasks.data.words import WordTokenizer
from seqtasks.parsing.trees import read_trees, to_line
from seqtasks.parsing.vocabulary import ParsingVocabulary

TREE = "(TOP (S (NP (DT The) (NN dog)) (VP (VBD barked)) (. .)))"


@pytest.fixture(scope="module")
def tokenizers(toy_tokenizers) -> dict[str, tuple[Tokenizer, str, str]]:
    """name -> (tokenizer, a text, that text as decode gives it back)."""
    words = WordTokenizer.build(["A dog runs.", "The dog barked at a cat"])
    vocabulary = ParsingVocabulary.build(read_trees(TREE), tags=True, reverse=True, min_count=1)
    sentence = "Ein Hund läuft durch den Schnee ."
    return {
        "sentencepiece": (toy_tokenizers[0], sentence, sentence),
        "caption words": (words, "The dog, a CAT!", "the dog a cat"),
        "parsing words (reversed)": (vocabulary.source, "The dog barked .", "The dog barked ."),
        "parsing tree tokens": (
            vocabulary.target,
            to_line(read_trees(TREE)[0]),
            "(S (NP DT NN )NP (VP VBD )VP . )S",
        ),
    }


@pytest.mark.parametrize(
    "name",
    ["sentencepiece", "caption words", "parsing words (reversed)", "parsing tree tokens"],
)
def test_every_tokenizer_meets_the_protocol(tokenizers, name):
    tokenizer, text, decoded = tokenizers[name]
    assert isinstance(tokenizer, Tokenizer)
    ids = tokenizer.encode(text)
    assert ids and not {BOS_ID, EOS_ID, PAD_ID} & set(ids)
    assert all(0 <= i < tokenizer.vocab_size for i in ids)
    assert tokenizer.decode(ids) == decoded
    assert len(tokenizer.pieces(ids)) == len(ids)


def test_unknown_words_get_the_shared_unknown_id(tokenizers):
    words, _, _ = tokenizers["caption words"]
    assert words.encode("zebra dog") == [UNK_ID, words.encode("dog")[0]]
