"""`Translator`: raw sentences in, `Translation`s out.

model = seqtasks.load("best.ckpt")
model.translate(["Ein Hund rennt."], beam=5)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from seqtasks.data.text import check_text
from seqtasks.data.tokenizer import EOS_ID
from seqtasks.search import Hypothesis, SearchSettings
from seqtasks.search.budget import TokenBudget, check_max_tokens
from seqtasks.tasks.attentions import AttentionRequest, Attentions, wants_every_attention
from seqtasks.tasks.model import Model, as_list, decoded, with_alternatives
from seqtasks.translation.alignment import (
    Link,
    Units,
    alignment_attention,
    attention_links,
    write_links,
)
from seqtasks.translation.data import encode_source
from seqtasks.translation.task import TranslationTask

__all__ = ["Alignment", "Translation", "Translator"]


@dataclass
class Translation:
    """One translation: its text, its subword pieces, its score (the log-probability, divided
    by the length penalty in beam search), and the attention behind each piece when asked for.
    `alternatives` holds the rest of an n-best list, best first."""

    text: str
    tokens: list[str]  # subword pieces, for plots
    score: float
    attention: Tensor | None = field(default=None, repr=False)  # (len(tokens), source + EOS)
    alternatives: list[Translation] = field(default_factory=list)
    attentions: Attentions | None = field(default=None, repr=False)  # attention="all"


@dataclass
class Alignment:
    """One sentence pair's word alignment: the links (source word, target word), counted from
    0 (`pharaoh` writes them as `i-j` pairs), and the pieces and attention they come from."""

    links: list[Link]
    source: list[str]  # subword pieces, without the EOS
    target: list[str]
    attention: Tensor = field(repr=False)  # (len(target), len(source) + EOS)

    @property
    def pharaoh(self) -> str:
        return write_links(self.links)


def sentences_of(items: Sequence) -> list[str]:
    """`items` as a list of strings that a tokeniser can read.

    Raises:
        TypeError: for a lone string, or an item that is not a string (naming its position).
        ValueError: for a string that is not valid Unicode (`check_text`), naming its position.
    """
    sentences = as_list(items, "sentences")
    for i, sentence in enumerate(sentences):
        if not isinstance(sentence, str):
            raise TypeError(f"sentence {i} is a {type(sentence).__name__}, not a string")
        check_text(sentence, f"sentence {i}")
    return sentences


class Translator(Model):
    """A translation model and its sentencepiece models."""

    task: TranslationTask

    def translate(
        self,
        sentences: Sequence[str],
        beam: int | None = None,
        n_best: int | None = None,
        attention: AttentionRequest = False,
        max_length: int | None = None,
        max_tokens: TokenBudget = "auto",
        stop: str | None = None,
        workers: int | None = None,
        settings: SearchSettings | None = None,
    ) -> list[Translation]:
        """One `Translation` per sentence (raw text), in order; an empty sentence gives the
        empty translation (and no alternative), a source over `max_length` subwords is cut (with a
        warning).
        `beam`, `n_best`, `stop` (when beam search ends: "exact" or "heuristic",
        `seqtasks.search.beam_search`) and `max_length`: the checkpoint's unless given
        (`search_settings`). Batches hold about `max_tokens` source subwords ("auto": by
        device, `batch_tokens`), taken by `workers` threads on a CPU (`search_sources`).
        `settings`: a `SearchSettings` to search with instead (then none of `beam`, `n_best`,
        `stop` and `max_length`).
        `attention` keeps each translation's attention matrix (its pieces × the source's,
        `source_pieces`); "all" also keeps every attention behind it, by layer and head
        (`Translation.attentions`), read by one teacher-forced pass over each output."""
        settings = self.search_settings(beam, n_best, stop, max_length, settings)
        check_max_tokens(max_tokens)
        sentences = sentences_of(sentences)
        limit = self.source_limit(settings.max_length)
        tokenizer = self.task.src_tokenizer
        sources = [encode_source(tokenizer, sentence.strip(), limit) for sentence in sentences]
        every = wants_every_attention(attention)
        nbests = self.search_sources(sources, settings, max_tokens, workers, bool(attention))
        translations = self.translations(nbests, settings.n_best)
        if every:
            self.attach_attentions(
                sources, nbests, translations, lambda i, t: self.attention_names(sources[i], t)
            )
        return translations

    def attention_names(
        self, source: list[int], tokens: list[int]
    ) -> tuple[list[str], list[str], list[str]]:
        """The pieces `Attentions` are over: the source's twice (it is the memory), the
        output's, each with its EOS."""
        read = self.task.src_tokenizer.pieces([*source, EOS_ID])
        return read, read, self.task.tgt_tokenizer.pieces([*tokens, EOS_ID])

    def translations(
        self, nbests: Sequence[list[Hypothesis] | None], n_best: int
    ) -> list[Translation]:
        """The `Translation`s of `search_sources`' n-best lists (at most `n_best` each); for an
        empty source (None), the empty translation, which has no alternative: an n-best list
        holds different outputs, and there is no other translation of nothing."""
        return [
            Translation("", [], 0.0)
            if nbest is None
            else with_alternatives([self.translation_of(h) for h in nbest[:n_best]])
            for nbest in nbests
        ]

    def translation_of(self, hypothesis: Hypothesis) -> Translation:
        """A hypothesis as text, pieces, score and attention."""
        return Translation(*decoded(hypothesis, self.task.tgt_tokenizer))

    def align(
        self,
        sources: Sequence[str],
        targets: Sequence[str],
        max_tokens: int = 2000,
        target_units: Units = "words",
        layer: int | None = None,
        heads: Sequence[int] | None = None,
    ) -> list[Alignment]:
        """The word alignment of each pair of a source sentence and its translation (a
        reference, or the model's own) by the decoder's attention while it reads the
        translation by teacher forcing, as it had while writing it (`Model.every_attention`):
        each target word linked to the source word it attends to most
        (`alignment.attention_links`), in the cross-attention of `layer` averaged over `heads`
        (`alignment.alignment_attention`; by default Garg et al.'s penultimate layer, all
        heads). Words are the sentences' own, split at white space (`target_units` "pieces":
        each target piece a position, the characters of a character model); a source longer
        than the model reads is cut, as `translate` cuts it."""
        sources, targets = sentences_of(sources), sentences_of(targets)
        if len(sources) != len(targets):
            raise ValueError(f"{len(sources)} sources but {len(targets)} translations")
        limit = self.source_limit(self.search_settings().max_length)
        source_tokenizer, target_tokenizer = self.task.src_tokenizer, self.task.tgt_tokenizer
        source_ids = [encode_source(source_tokenizer, s.strip(), limit) for s in sources]
        target_ids = [target_tokenizer.encode(t.strip()) for t in targets]
        found = []
        every = self.every_attention(source_ids, target_ids, max_tokens)
        for ids, translated, maps in zip(source_ids, target_ids, every, strict=True):
            if maps is None:  # an empty source: every target word unaligned
                attention = torch.zeros(len(translated), 1)
            else:  # the row that writes the EOS left out
                attention = alignment_attention(maps["cross"], layer, heads)[:-1]
            source, target = source_tokenizer.pieces(ids), target_tokenizer.pieces(translated)
            links = sorted(attention_links(attention, source, target, target_units))
            found.append(Alignment(links, source, target, attention))
        return found

    def source_pieces(self, sentence: str, max_length: int | None = None) -> list[str]:
        """The subwords the model reads for `sentence`, plus EOS: the columns of its attention
        (`max_length`: as for `translate`)."""
        limit = self.source_limit(self.search_settings(max_length=max_length).max_length)
        tokenizer = self.task.src_tokenizer
        return tokenizer.pieces(encode_source(tokenizer, sentence.strip(), limit) + [EOS_ID])
