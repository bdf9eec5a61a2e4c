"""`Parser`: sentences in, constituency trees (`Parse`) out.

model = seqtasks.load("parser.ckpt")
model.parse(["Pierre Vinken will join the board ."])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from nltk import Tree
from torch import Tensor

from seqtasks.data.text import check_text
from seqtasks.data.tokenizer import EOS_ID
from seqtasks.parsing.linearisation import tree_from_output
from seqtasks.parsing.pieces import SourcePieces
from seqtasks.parsing.ptb_text import PTBTokenizer, check_tokens, escape_brackets
from seqtasks.parsing.task import ParsingTask
from seqtasks.parsing.trees import ROOT, to_line
from seqtasks.search import Hypothesis, SearchSettings
from seqtasks.search.budget import TokenBudget, check_max_tokens
from seqtasks.tasks.attentions import AttentionRequest, Attentions, wants_every_attention
from seqtasks.tasks.model import Model, as_list, with_alternatives

CPU_ROWS = 40_000  # search rows (words × beam) per batch, but for an "auto" budget on a GPU

__all__ = ["Parse", "Parser"]


@dataclass
class Parse:
    """One parse: its tree, the bracket sequence the decoder wrote, its score, and the edits
    that made that sequence well formed (0 when it already was); when asked for, the attention
    behind each token over the words and the EOS, and every attention by layer and head.
    `alternatives` holds the rest of an n-best list, best first."""

    tree: Tree
    tokens: list[str]
    score: float
    repairs: int
    attention: Tensor | None = field(default=None, repr=False)  # (len(tokens), words + EOS)
    attentions: Attentions | None = field(default=None, repr=False)  # attention="all"
    alternatives: list[Parse] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The tree on one line, as the treebank writes it."""
        return to_line(self.tree)


class Parser(Model):
    """A parser and its vocabularies: sentences in, constituency trees out."""

    task: ParsingTask
    max_rows = CPU_ROWS

    def __init__(self, task: ParsingTask, checkpoints: Sequence[str | Path]):
        super().__init__(task, checkpoints)
        self._ptb = PTBTokenizer(task.vocabulary.known_words)

    def parse(
        self,
        sentences: Sequence[str | Sequence[str]],
        beam: int | None = None,
        n_best: int | None = None,
        tags: Sequence[Sequence[str]] | None = None,
        max_tokens: TokenBudget = "auto",
        stop: str | None = None,
        workers: int | None = None,
        settings: SearchSettings | None = None,
        attention: AttentionRequest = False,
    ) -> list[Parse]:
        """One `Parse` per sentence, in order. A sentence is a string, split into PTB tokens
        (round brackets become -LRB- -RRB-, quotes `` ''), or a list of tokens, taken as they
        are. With `tags` the preterminals carry them instead of what the model writes. An
        empty sentence gives the empty tree `(TOP )`. `beam`, `n_best`, `stop`, `max_tokens`
        (in words), `workers` and `settings` as for `Translator.translate`; batches also hold at
        most `CPU_ROWS` search rows (words × beam), but for an "auto" budget on a GPU, which
        bounds the rows itself. The budgets measured fastest on a 2-core CPU, greedy and with
        beam 10 (docs/parsing.md, "Speed"); the output does not depend on them but through the
        batching. `attention` keeps each parse's attention (its tokens × the words read, in
        the order the encoder reads them, and the EOS); "all" also keeps every attention behind
        it, by layer and head (`Parse.attentions`: over the encoder's pieces, for a parser
        reading a tokeniser's), read by one teacher-forced pass over each output."""
        settings = self.search_settings(beam, n_best, stop, settings=settings)
        check_max_tokens(max_tokens)
        sentences = as_list(sentences, "sentences")
        words = [self.tokens(sentence, i) for i, sentence in enumerate(sentences)]
        sources = [self.task.vocabulary.source.encode_words(w) for w in words]
        for i, (tokens, ids) in enumerate(zip(words, sources)):
            if self.max_words is not None and len(ids) > self.max_words:
                read = "" if len(ids) == len(tokens) else f" (read as {len(ids)} pieces)"
                raise ValueError(
                    f"sentence {i} has {len(tokens)} tokens{read}; this parser reads at most "
                    f"{self.max_words} (its encoder's max_positions, less one for the EOS)"
                )
        if tags is not None and [len(t) for t in tags] != [len(w) for w in words]:
            raise ValueError("tags must give one tag per token of every sentence")
        every = wants_every_attention(attention)
        nbests = self.search_sources(sources, settings, max_tokens, workers, bool(attention))
        parses = [
            Parse(Tree(ROOT, []), [], 0.0, 0)
            if nbest is None
            else with_alternatives([self.parse_of(h, words[i], tags and tags[i]) for h in nbest])
            for i, nbest in enumerate(nbests)
        ]
        if every:
            self.attach_attentions(
                sources, nbests, parses, lambda i, t: self.attention_names(words[i], sources[i], t)
            )
        return parses

    def parse_of(
        self, hypothesis: Hypothesis, words: Sequence[str], tags: Sequence[str] | None = None
    ) -> Parse:
        """The parse a hypothesis describes over `words`, its preterminals tagged with `tags`
        when given, else with what the model wrote (`XX` or its own tags)."""
        tokens = self.task.vocabulary.target.pieces(hypothesis.tokens)
        tree, repairs = tree_from_output(tokens, words, tags)
        return Parse(tree, tokens, hypothesis.score, repairs, hypothesis.attention)

    def attention_names(
        self, words: Sequence[str], source: list[int], tokens: list[int]
    ) -> tuple[list[str], list[str], list[str]]:
        """The pieces `Attentions` are over: what the encoder reads (words, or unknown words'
        classes, in its order; or a tokeniser's pieces), the memory's words in that order, and
        the tokens written, each with the EOS."""
        vocabulary = self.task.vocabulary
        read = vocabulary.source.pieces([*source, EOS_ID])
        if isinstance(vocabulary.source, SourcePieces):
            memory = [*words, read[-1]]
        else:
            memory = [*vocabulary.source.ordered(list(words)), read[-1]]
        return read, memory, vocabulary.target.pieces([*tokens, EOS_ID])

    def source_length(self, words: Sequence[str]) -> int:
        """How many source positions `words` take (more than words for a tokeniser's pieces),
        without the EOS."""
        return len(self.task.vocabulary.source.encode_words(words))

    @property
    def max_words(self) -> int | None:
        """The most tokens (or pieces, for a parser reading a tokeniser's) a sentence may have
        (None: any): a Transformer encoder reads its `max_positions`, one of them the EOS; a
        tree cannot cover a sentence cut short."""
        positions = self.task.encoder.max_positions
        return None if positions is None else positions - 1

    def tokens(self, sentence: str | Sequence[str], index: int = 0) -> list[str]:
        """The PTB tokens the parser reads for `sentence` (number `index`, for messages).

        Raises:
            TypeError: for a sentence that is neither a string nor a list of strings.
            ValueError: for text that is not valid Unicode, or a token that cannot be a leaf
                (empty, or holding white space: `check_tokens`).
        """
        what = f"sentence {index}"
        if isinstance(sentence, str):
            check_text(sentence, what)
            return self._ptb.tokenize(sentence)
        if not isinstance(sentence, Sequence) or not all(isinstance(t, str) for t in sentence):
            raise TypeError(f"{what} must be a string or a list of string tokens")
        for token in sentence:
            check_text(token, what)
        check_tokens(sentence, what)
        return escape_brackets(sentence)
