"""Caption metrics on the coco-caption conventions (pycocoevalcap), reimplemented here.

Hypotheses and references are first tokenised PTB-style and lower-cased, with punctuation tokens
dropped, as coco-caption's Stanford PTBTokenizer does (`ptb_tokenize` agrees with it on every
caption of the shared Flickr8k subset). Then:

- BLEU-n: corpus BLEU (Papineni et al. 2002) with clipped n-gram counts against all references,
  the reference length closest to each hypothesis (the shorter on a tie), and coco-caption's tiny
  smoothing (1e-15 / 1e-9), so an n-gram order with no match gives ~0 rather than an error.
- CIDEr-D (Vedantam et al. 2015): TF-IDF weighted n-grams (n = 1–4) with document frequencies
  from the references of the evaluated set, the hypothesis's counts clipped by each reference's,
  a Gaussian length penalty (σ = 6, lengths counted in bigrams as coco-caption does), averaged
  over references and n, times 10. coco-caption calls this "CIDEr".
- METEOR through pycocoevalcap when it is installed and Java is on the path.

Scores are reported ×100, as papers print them.
"""

from __future__ import annotations

import math
import re
import shutil
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

_BRACKETS = {"(": "-lrb-", ")": "-rrb-", "[": "-lsb-", "]": "-rsb-", "{": "-lcb-", "}": "-rcb-"}
_SPLIT_WORDS = {
    "cannot": "can not",
    "gonna": "gon na",
    "gotta": "got ta",
    "wanna": "wan na",
    "lemme": "lem me",
    "gimme": "gim me",
    "y'all": "y' all",
}
# The punctuation coco-caption removes; it compares case-sensitively with "-LRB-" …, so the
# lower-cased brackets "-lrb-" … stay, as they do here.
_PUNCTUATION = {"''", "'", "``", "`", ".", "?", "!", ",", ":", "-", "--", "...", ";", '"'}
_CLITIC = r"'(?:s|re|ve|ll|d|m)(?![^\W_])"
_TOKEN = re.compile(
    rf"""
    \.\.\.+                                          # ellipsis
  | [^\W\d_]\.(?:[^\W\d_]\.)+                        # initials: U.S., p.m.
  | (?:mr|mrs|ms|dr|st|jr|sr|vs|etc|inc|co|mt|ft)\.(?=\s|$)
  | no\.(?=\s*\d)
  | '\d+s?(?![^\W_]) | 'n'                           # '90s, rock 'n' roll
  | \d+(?:[,:]\d+)+                                  # 10,000  5:30
  | {_CLITIC}                                        # 's 're 've 'll 'd 'm
  | (?-i:[A-Z]+&[A-Z]+)                              # AT&T
  | [^\W_](?:[^\W_]|[-/.](?=[^\W_])|'(?!(?:s|re|ve|ll|d|m)(?![^\W_]))(?=[^\W_]))*  # words
  | [!?]+ | --+ | [^\w\s]
    """,
    re.VERBOSE | re.IGNORECASE,
)


def ptb_tokenize(text: str) -> list[str]:
    """Lower-cased PTB tokens without punctuation: "A dog's ball, (red)." ->
    [a, dog, 's, ball, -lrb-, red, -rrb-], like coco-caption's PTBTokenizer."""
    tokens = []
    for token in _TOKEN.findall(text):
        token = token.lower()
        token = _SPLIT_WORDS.get(token, _BRACKETS.get(token, token))
        if len(token) > 3 and token.endswith("n't"):
            token = f"{token[:-3]} n't"
        tokens.extend(token.split())
    return [t for t in tokens if t not in _PUNCTUATION]


def ngrams(words: Sequence[str], max_n: int = 4) -> Counter:
    """Counts of every n-gram (as a tuple) of `words`, for n = 1 … max_n."""
    return Counter(
        tuple(words[i : i + n]) for n in range(1, max_n + 1) for i in range(len(words) - n + 1)
    )


def bleu(hypotheses: Sequence[list[str]], references: Sequence[Sequence[list[str]]]) -> list[float]:
    """Corpus BLEU-1 … BLEU-4 (on 0–1) of tokenised hypotheses, each with its references."""
    tiny, small = 1e-15, 1e-9
    correct, guess = [0] * 4, [0] * 4
    hyp_length = ref_length = 0
    for hypothesis, refs in zip(hypotheses, references, strict=True):
        counts = ngrams(hypothesis)
        most = Counter()
        for ref in refs:
            most |= ngrams(ref)  # the most times each n-gram occurs in one reference
        for gram, count in counts.items():
            correct[len(gram) - 1] += min(count, most[gram])
        for n in range(4):
            guess[n] += max(0, len(hypothesis) - n)
        hyp_length += len(hypothesis)
        ref_length += min((abs(len(r) - len(hypothesis)), len(r)) for r in refs)[1]
    scores, product = [], 1.0
    for n in range(4):
        product *= (correct[n] + tiny) / (guess[n] + small)
        scores.append(product ** (1 / (n + 1)))
    ratio = (hyp_length + tiny) / (ref_length + small)
    brevity = math.exp(1 - 1 / ratio) if ratio < 1 else 1.0
    return [s * brevity for s in scores]


class CiderD:
    """CIDEr-D (Vedantam et al. 2015) with the document frequencies of a reference corpus:
    coco-caption's, whose corpus is the evaluated images' references (`cider_d`), or the
    training captions', as self-critical training rewards with it (Rennie et al. 2017)."""

    def __init__(self, corpus: Sequence[Sequence[list[str]]], sigma: float = 6.0):
        self.frequency = Counter(
            gram for refs in corpus for gram in set().union(*(ngrams(r) for r in refs))
        )
        self.log_images, self.sigma = math.log(len(corpus)), sigma

    def vector(self, words: list[str]) -> tuple[list[dict], list[float], int]:
        """TF-IDF weights per n-gram order, their norms, and the length in bigrams."""
        weights: list[dict] = [{} for _ in range(4)]
        counts = ngrams(words)
        for gram, tf in counts.items():
            idf = self.log_images - math.log(max(1.0, self.frequency[gram]))
            weights[len(gram) - 1][gram] = tf * idf
        norms = [math.sqrt(sum(w * w for w in order.values())) for order in weights]
        return weights, norms, sum(tf for gram, tf in counts.items() if len(gram) == 2)

    def score(self, hypothesis: list[str], references: Sequence[list[str]]) -> float:
        """One hypothesis' CIDEr-D against its references (about 0–10)."""
        hyp, hyp_norms, hyp_length = self.vector(hypothesis)
        total = [0.0] * 4
        for reference in references:
            ref, ref_norms, ref_length = self.vector(reference)
            penalty = math.exp(-((hyp_length - ref_length) ** 2) / (2 * self.sigma**2))
            for n in range(4):
                overlap = sum(
                    min(w, ref[n].get(g, 0.0)) * ref[n].get(g, 0.0) for g, w in hyp[n].items()
                )
                if hyp_norms[n] and ref_norms[n]:
                    overlap /= hyp_norms[n] * ref_norms[n]
                total[n] += overlap * penalty
        return 10.0 * sum(total) / 4 / len(references)


def cider_d(
    hypotheses: Sequence[list[str]], references: Sequence[Sequence[list[str]]], sigma: float = 6.0
) -> float:
    """Corpus CIDEr-D of tokenised hypotheses, each with its references (coco-caption's scale:
    about 0–10, the mean of the per-image scores)."""
    scorer = CiderD(references, sigma)
    scores = [scorer.score(h, refs) for h, refs in zip(hypotheses, references, strict=True)]
    return sum(scores) / len(scores)


def meteor(
    hypotheses: Sequence[list[str]], references: Sequence[Sequence[list[str]]]
) -> float | None:
    """METEOR 1.5 (on 0–1) through pycocoevalcap, or None without it or without Java."""
    try:
        from pycocoevalcap.meteor.meteor import Meteor
    except ImportError:
        return None
    if shutil.which("java") is None:
        return None
    gts = {i: [" ".join(r) for r in refs] for i, refs in enumerate(references)}
    res = {i: [" ".join(h)] for i, h in enumerate(hypotheses)}
    try:
        score, _ = Meteor().compute_score(gts, res)
    except (OSError, ValueError):  # the Java process failed to start or to answer
        return None
    return float(score)


@dataclass
class CaptionScores:
    """Corpus scores ×100 over `images` images (METEOR None when it could not be computed)."""

    bleu1: float
    bleu2: float
    bleu3: float
    bleu4: float
    cider: float
    meteor: float | None
    images: int


def score_captions(
    hypotheses: Sequence[str], references: Sequence[Sequence[str]], with_meteor: bool = False
) -> CaptionScores:
    """BLEU-1 … 4 and CIDEr-D (and METEOR if asked and possible) of raw caption strings."""
    if len(hypotheses) != len(references) or not hypotheses:
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} reference sets")
    hyps = [ptb_tokenize(h) for h in hypotheses]
    refs = [[ptb_tokenize(r) for r in rs] for rs in references]
    b = bleu(hyps, refs)
    m = meteor(hyps, refs) if with_meteor else None
    return CaptionScores(
        *(100 * s for s in b),
        cider=100 * cider_d(hyps, refs),
        meteor=None if m is None else 100 * m,
        images=len(hypotheses),
    )
