"""What validation and test report for parsing: a `Parsed` record per sentence, and the
`RecordMetric` that scores a split from them with the EVALB-equal scorer and the objective per
token."""

from __future__ import annotations

from dataclasses import dataclass

from seqtasks.metrics.records import RecordMetric, loss_per_token
from seqtasks.parsing.linearisation import tree_from_output
from seqtasks.parsing.parseval import Status, score_sentence
from seqtasks.parsing.parseval import score_corpus as parseval_corpus
from seqtasks.parsing.trees import NONE_TAG, read_trees


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


def sentence_f1(gold: str, written: list[str]) -> float:
    """EVALB's bracket F1, in [0, 1], of the tree a bracket sequence describes over the gold
    tree's words (on one line); 0 for one EVALB cannot score."""
    tree = read_trees(gold)[0]
    words = [word for word, tag in tree.pos() if tag != NONE_TAG]
    scored = score_sentence(tree, tree_from_output(written, words)[0])
    if scored.status is not Status.OK or not scored.gold + scored.test:
        return 0.0
    return 2 * scored.matched / (scored.gold + scored.test)
