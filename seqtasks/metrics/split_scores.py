"""What validation and test report for each task: a typed record per decoded example, and the
`RecordMetric` that scores a whole split from them with the scorers proven elsewhere
(sacreBLEU, the EVALB-equal scorer, CIDEr-D) and the objective per target token."""

from __future__ import annotations

from dataclasses import dataclass

from seqtasks.metrics.bleu import score_corpus as bleu_corpus
from seqtasks.metrics.captioning import score_captions
from seqtasks.metrics.parseval import score_corpus as parseval_corpus
from seqtasks.metrics.records import RecordMetric
from seqtasks.metrics.shapes import Judgement, summarise
from seqtasks.parsing.linearisation import tree_from_output
from seqtasks.parsing.trees import NONE_TAG, read_trees


def loss_per_token(records: list) -> dict[str, float]:
    """`loss`: the split's objective per target token, each example counted once."""
    tokens = sum(record.tokens for record in records)
    return {"loss": sum(record.loss for record in records) / max(tokens, 1)}


@dataclass
class Translated:
    """One sentence of a split, translated. `loss` is its objective summed over its `tokens`
    target tokens; `index` its position in the split."""

    index: int
    loss: float
    tokens: int
    source: str
    hypothesis: str  # detokenised
    reference: str


class TranslationScores(RecordMetric[Translated]):
    """loss, BLEU and chrF (sacreBLEU, cased, 13a) and exact match, in %."""

    def __init__(self):
        super().__init__(Translated)

    def score(self, records: list[Translated]) -> dict[str, float]:
        hypotheses = [r.hypothesis for r in records]
        references = [r.reference for r in records]
        scores = bleu_corpus(hypotheses, references)
        exact = sum(h == r for h, r in zip(hypotheses, references)) / len(records)
        return loss_per_token(records) | {
            "bleu": scores.bleu,
            "chrf": scores.chrf,
            "exact_match": 100.0 * exact,
        }


@dataclass
class Parsed:
    """One sentence of a split, parsed: the bracket sequence the decoder wrote, and the gold
    tree on one line."""

    index: int
    loss: float
    tokens: int
    written: str
    gold: str


class ParseScores(RecordMetric[Parsed]):
    """EVALB's figures of the trees as the model wrote them (its tags, or XX) over the gold
    words: punctuation is decided by the gold tags, so the brackets score the same either way.
    `malformed` is the % of outputs that needed repair; `tagging_accuracy` means something only
    for a model that writes tags."""

    def __init__(self):
        super().__init__(Parsed)

    def score(self, records: list[Parsed]) -> dict[str, float]:
        golds, preds, repaired = [], [], 0
        for record in records:
            gold = read_trees(record.gold)[0]
            words = [word for word, tag in gold.pos() if tag != NONE_TAG]
            tree, repairs = tree_from_output(record.written.split(), words)
            golds.append(gold)
            preds.append(tree)
            repaired += repairs > 0
        scores = parseval_corpus(golds, preds).all
        return loss_per_token(records) | {
            "f1": scores.f1,
            "recall": scores.recall,
            "precision": scores.precision,
            "complete_match": scores.complete_match,
            "malformed": 100.0 * repaired / len(records),
            "tagging_accuracy": scores.tagging_accuracy,
        }


@dataclass
class Captioned:
    """One image of a split, captioned. On the shapes world (`judged`) also the caption read
    against the scene: exact, truthful, and attention hits over shape mentions."""

    index: int
    loss: float
    tokens: int
    caption: str
    references: tuple[str, ...]
    judged: bool = False
    exact: bool = False
    truthful: bool = False
    hits: int = 0
    mentions: int = 0


class CaptionScores(RecordMetric[Captioned]):
    """loss, CIDEr-D and BLEU-1/4, and on the shapes world exact match, truthfulness and the
    attention hit rate (`seqtasks.metrics.shapes`), in %."""

    def __init__(self):
        super().__init__(Captioned)

    def score(self, records: list[Captioned]) -> dict[str, float]:
        scores = score_captions([r.caption for r in records], [r.references for r in records])
        result = loss_per_token(records) | {
            "cider": scores.cider,
            "bleu1": scores.bleu1,
            "bleu4": scores.bleu4,
        }
        judged = [Judgement(r.exact, r.truthful, r.hits, r.mentions) for r in records if r.judged]
        return result | (summarise(judged) if judged else {})
