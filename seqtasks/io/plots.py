"""Figures: attention heat maps (over text, or laid over an image) and BLEU by source length.
Files are written atomically."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import Tensor  # noqa: E402

from seqtasks.io.files import temporary_path  # noqa: E402


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


def plot_attention_grid(
    maps: Sequence[Sequence[tuple[str, Tensor]]],
    keys: Sequence[str],
    queries: Sequence[str],
    path: str | Path,
    title: str | None = None,
) -> Path:
    """A grid of heat maps, a row of panels per layer: `maps[r][c]` is (panel title, α) with α
    (len(queries), len(keys)), the axes labelled by the pieces on the outer panels."""
    rows, columns = len(maps), max(len(row) for row in maps)
    width, height = len(keys), len(queries)
    cell = (max(2.5, 0.3 * width + 1.0), max(2.0, 0.3 * height + 0.8))
    figure, axes = plt.subplots(
        rows, columns, figsize=(cell[0] * columns, cell[1] * rows), squeeze=False
    )
    for r, row in enumerate(maps):
        for c in range(columns):
            panel = axes[r][c]
            if c >= len(row):
                panel.axis("off")
                continue
            name, weights = row[c]
            alpha = weights.detach().float().cpu().numpy()
            panel.imshow(alpha, cmap="Greys", vmin=0.0, vmax=1.0, aspect="auto")
            panel.set_title(name, fontsize=8)
            panel.set_xticks(range(width), list(keys) if r == rows - 1 else [], fontsize=6)
            panel.set_yticks(range(height), list(queries) if c == 0 else [], fontsize=6)
            panel.tick_params(axis="x", labelrotation=90)
    if title:
        figure.suptitle(title, fontsize=9)
    return _save(figure, path)


def png_pixels(path: str | Path) -> np.ndarray:
    """A PNG these functions wrote, as (H, W, 3) uint8 RGB: what TensorBoard's `add_image`
    shows (read back, not drawn twice, so it is the file's picture)."""
    pixels = plt.imread(path)  # (H, W, 3 or 4) floats in [0, 1] for a PNG
    return (pixels[..., :3] * 255).round().astype(np.uint8)


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


def plot_caption_attention(
    image: Tensor,
    words: Sequence[str],
    attention: Tensor,
    grid: tuple[int, int],
    path: str | Path,
    columns: int = 5,
) -> Path:
    """The image under its caption, then one panel per word: the attention behind the word, an
    (H, W) map of α upsampled bilinearly to the image and laid over it, and a colour bar for
    α, the weight of each grid cell (0–1; a word's weights sum to 1). Every panel has the
    same colour scale, from 0 to the caption's highest α, so panels compare; a word's own
    highest α is in its title.

    Args:
        image: (3, S, S) RGB in [0, 1].
        words: the caption's words, one per row of `attention`.
        attention: (T, L) the weights over the L = H·W grid cells.
        grid: (H, W).
    """
    weights = attention.detach().float().cpu()
    maps = weights.view(-1, 1, *grid)  # (T, 1, H, W)
    maps = F.interpolate(maps, size=image.shape[-2:], mode="bilinear", align_corners=False)
    picture = image.detach().float().cpu().permute(1, 2, 0).numpy()
    top = max(float(weights.max()), 1e-12)
    panels = len(words) + 1
    rows = -(-panels // columns)
    figure, axes = plt.subplots(
        rows,
        columns,
        figsize=(2.2 * columns + 1, 2.4 * rows + 0.6),
        squeeze=False,
        layout="constrained",
    )
    for axis in axes.flat:
        axis.axis("off")
    figure.suptitle(textwrap.fill(" ".join(words), width=16 * columns), fontsize=9)
    axes.flat[0].imshow(picture)
    axes.flat[0].set_title("the image", fontsize=8)
    heat = None
    for axis, word, upsampled, peak in zip(axes.flat[1:], words, maps[:, 0], weights.amax(-1)):
        axis.imshow(picture)
        heat = axis.imshow(upsampled, cmap="inferno", alpha=0.6, vmin=0.0, vmax=top)
        axis.set_title(f"{word} (highest α {float(peak):.2f})", fontsize=8)
    if heat is not None:
        bar = figure.colorbar(heat, ax=axes, shrink=min(1.0, 2.0 / rows), aspect=30)
        bar.solids.set_alpha(1.0)
        bar.set_label("α: attention weight of a grid cell (0–1; each word's sum to 1)", fontsize=8)
    return _save(figure, path)
