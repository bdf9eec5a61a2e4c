"""Translation metrics: sacreBLEU's BLEU and chrF on detokenised text, and BLEU by length."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sacrebleu

from seqtasks.metrics.buckets import LengthBucket, in_bucket, length_ranges


@dataclass
class TranslationScores:
    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str
    sentences: int


def score_corpus(
    hypotheses: Sequence[str],
    references: Sequence[str],
    lowercase: bool = False,
    tokenize: str = "13a",
) -> TranslationScores:
    """Corpus BLEU and chrF with sacreBLEU's defaults (13a tokenisation, cased unless asked)."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    bleu = sacrebleu.metrics.BLEU(lowercase=lowercase, tokenize=tokenize)
    chrf = sacrebleu.metrics.CHRF(lowercase=lowercase)
    refs = [list(references)]
    bleu_score = bleu.corpus_score(list(hypotheses), refs)
    chrf_score = chrf.corpus_score(list(hypotheses), refs)
    return TranslationScores(
        bleu=bleu_score.score,
        chrf=chrf_score.score,
        bleu_signature=str(bleu.get_signature()),
        chrf_signature=str(chrf.get_signature()),
        sentences=len(hypotheses),
    )


@dataclass
class BleuBucket(LengthBucket):
    bleu: float


def bleu_by_source_length(
    sources: Sequence[str],
    hypotheses: Sequence[str],
    references: Sequence[str],
    edges: Sequence[int] = (10, 20, 30, 40),
) -> list[BleuBucket]:
    """Corpus BLEU per bucket of source length in words (Bahdanau et al. 2015, Fig. 2).

    `edges` are the upper bounds of all but the last bucket: (10, 20) gives 1–10, 11–20, 21+.
    Empty buckets are left out.
    """
    buckets = []
    for low, high in length_ranges(edges):
        chosen = [i for i, s in enumerate(sources) if in_bucket(len(s.split()), low, high)]
        if not chosen:
            continue
        bleu = sacrebleu.metrics.BLEU().corpus_score(
            [hypotheses[i] for i in chosen], [[references[i] for i in chosen]]
        )
        buckets.append(BleuBucket(low, high, len(chosen), bleu.score))
    return buckets
