"""One way to print a score, wherever seqtasks prints one (progress lines, the fit summary, the
results of `seqtasks validate` and `test`):

    test/exact_match 10.00 %    test/bleu 31.52    test/loss 1.234

Every score is computed on the 0–100 scale papers print (each task's `scores.py`): a share of
examples or words is a percentage and says so; BLEU, chrF, CIDEr-D and EVALB's F1, recall and
precision are points, with 2 decimals; a loss (per target token) has 4 significant digits.
In JSON (`seqtasks evaluate --json`) every score keeps `JSON_DECIMALS` decimals: 100.0, not the
100.00000000000004 that float arithmetic leaves, and still more than any table shows.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# Shares of the split's examples (or, for tagging and attention hits, of its words), × 100.
PERCENTAGES = frozenset(
    {
        "exact_match",
        "complete_match",
        "tagging_accuracy",
        "malformed",
        "truthful",
        "attention_hits",
    }
)
# Corpus scores on sacreBLEU's, CIDEr-D's (× 100), EVALB's and alignment error rate's 0–100
# scales.
POINTS = frozenset(
    {"bleu", "chrf", "bleu1", "bleu4", "cider", "meteor", "f1", "recall", "precision", "aer"}
)

JSON_DECIMALS = 6


def format_score(name: str, value: float) -> str:
    """`value` as the score `name` (`val/bleu`, `test/exact_match`, `train/loss`, `lr-Adam`)
    reads: `31.52`, `10.00 %`, `1.234`, `0.003`."""
    metric = name.split("/dataloader_idx_")[0].rsplit("/", 1)[-1]
    value = float(value)
    if metric in PERCENTAGES:
        return f"{value:.2f} %"
    if metric in POINTS:
        return f"{value:.2f}"
    if metric == "epoch":
        return f"{value:.0f}"
    if metric.startswith("lr"):
        return f"{value:.3g}"
    return f"{value:#.4g}"  # a loss: 1.234, 0.01235, 12.00


def score_list(scores: Iterable[tuple[str, float]], separator: str = "  ") -> str:
    """`name value` for each score, sorted by name, on one line."""
    return separator.join(f"{name} {format_score(name, value)}" for name, value in sorted(scores))


def score_table(scores: Iterable[tuple[str, float]]) -> str:
    """One score a line, sorted by name, the values aligned: what `seqtasks validate` and
    `test` print."""
    rows = sorted(scores)
    width = max((len(name) for name, _ in rows), default=0)
    return "\n".join(f"{name:<{width}}  {format_score(name, value)}" for name, value in rows)


def rounded(data: Any) -> Any:
    """`data` (a report: dicts and lists of numbers, text and None) with every float rounded to
    `JSON_DECIMALS` decimals; the rest as it is."""
    if isinstance(data, float):
        return round(data, JSON_DECIMALS)
    if isinstance(data, dict):
        return {key: rounded(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [rounded(value) for value in data]
    return data
