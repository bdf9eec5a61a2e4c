"""What validation and test report for captioning: a `Captioned` record per image, and the
`RecordMetric` that scores a split from them with CIDEr-D and BLEU, the shapes world's
judgements and the objective per token."""

from __future__ import annotations

from dataclasses import dataclass

from seqtasks.captioning.judgements import Judgement, summarise
from seqtasks.captioning.metrics import score_captions
from seqtasks.metrics.records import RecordMetric, loss_per_token


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
    attention hit rate (`seqtasks.captioning.judgements`), in %."""

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
