"""What validation and test report for translation: a `Translated` record per sentence, and
the `RecordMetric` that scores a split from them with sacreBLEU and the objective per token."""

from __future__ import annotations

from dataclasses import dataclass

from seqtasks.metrics.records import RecordMetric, loss_per_token
from seqtasks.translation.bleu import score_corpus as bleu_corpus


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
