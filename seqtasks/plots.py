"""Figures: attention heat maps and BLEU by source length. Files are written atomically."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from torch import Tensor  # noqa: E402

from seqtasks.files import temporary_path  # noqa: E402


def _save(figure: plt.Figure, path: str | Path) -> Path:
    """Save via a temporary file and rename, so a crash never leaves a truncated image."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_path(path)
    figure.savefig(tmp, dpi=120, bbox_inches="tight")
    plt.close(figure)
    tmp.replace(path)
    return path


def plot_attention(
    weights: Tensor,
    source: Sequence[str],
    target: Sequence[str],
    path: str | Path,
    title: str | None = None,
) -> Path:
    """Heat map of α (T, S): one row per output token, one column per source token."""
    alpha = weights.detach().float().cpu().numpy()
    height, width = alpha.shape
    figure, axes = plt.subplots(figsize=(max(4, 0.35 * width + 1.5), max(3, 0.35 * height + 1)))
    axes.imshow(alpha, cmap="Greys", vmin=0.0, vmax=1.0, aspect="auto")
    axes.set_xticks(range(width), list(source)[:width], rotation=90, fontsize=8)
    axes.set_yticks(range(height), list(target)[:height], fontsize=8)
    axes.set_xlabel("source")
    axes.set_ylabel("output")
    if title:
        axes.set_title(title, fontsize=9)
    return _save(figure, path)


def plot_bleu_by_length(
    curves: Mapping[str, Sequence[tuple[str, float]]], path: str | Path
) -> Path:
    """One line per model: BLEU per source-length bucket (Bahdanau et al. 2015, Fig. 2)."""
    figure, axes = plt.subplots(figsize=(6, 4))
    for name, points in curves.items():
        labels, values = zip(*points)
        axes.plot(range(len(values)), values, marker="o", label=name)
        axes.set_xticks(range(len(labels)), labels)
    axes.set_xlabel("source sentence length (words)")
    axes.set_ylabel("BLEU")
    axes.grid(alpha=0.3)
    axes.legend()
    return _save(figure, path)
