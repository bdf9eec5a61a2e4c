"""The options that choose which attention a command reads: the layer and heads alignments come
from (`translate --alignments`, `evaluate alignment`) and the layers, heads and kind a grid of
plots shows (`translate --attention-plots`). Light: no torch is imported for --help."""

from __future__ import annotations

import argparse

KINDS = ("encoder", "decoder", "cross")  # attention.recording.KINDS, spelled here for --help
MEAN = "mean"  # tasks.attentions.MEAN: the mean of a layer's heads


def add_alignment_options(parser: argparse.ArgumentParser) -> None:
    """What alignments are read from and over: `--alignment-layer`, `--alignment-heads` (the
    cross-attention map, `alignment.alignment_attention`) and `--target-units` (what a target
    position is, `alignment.Units`)."""
    parser.add_argument(
        "--alignment-layer",
        type=int,
        default=None,
        metavar="N",
        help="the decoder layer whose cross-attention alignments are read from, from 0 at the "
        "bottom or -1 at the top; default: the penultimate of two or more (Garg et al. 2019)",
    )
    parser.add_argument(
        "--alignment-heads",
        type=head_list,
        default=None,
        metavar="H[,H…]|all",
        help="the heads of that layer averaged, e.g. 0,2; default: all",
    )
    parser.add_argument(
        "--target-units",
        choices=("words", "pieces"),
        default="words",
        help="the target positions of alignments: words (split at white space, the default) or "
        "pieces (each subword its own: a character model's characters)",
    )


def head_list(text: str) -> list[int] | None:
    """`--alignment-heads`: "all" (None) or head numbers separated by commas."""
    return index_list(text, "head", negative=False)


def index_list(
    text: str, what: str, negative: bool, words: tuple[str, ...] = ()
) -> list[int | str] | None:
    """Numbers separated by commas (counted from 0; from −1 at the end too, if `negative`),
    any of `words` among them, or "all" (None): `--alignment-heads`, `--layers`, `--heads`."""
    if text.strip() == "all":
        return None
    found: list[int | str] = []
    for item in text.split(","):
        item = item.strip()
        if item in words:
            found.append(item)
            continue
        try:
            number = int(item)
        except ValueError:
            allowed = ", ".join(("'all'", *(repr(w) for w in words)))
            raise argparse.ArgumentTypeError(
                f"expected {allowed} or {what} numbers like 0,2, got {text!r}"
            ) from None
        if number < 0 and not negative:
            raise argparse.ArgumentTypeError(f"{what} numbers count from 0, got {text!r}")
        found.append(number)
    return found


def add_plot_grid_options(parser: argparse.ArgumentParser) -> None:
    """`--layers`, `--heads` and `--attention-kind`: the grid `--attention-plots` draws."""
    parser.add_argument(
        "--layers",
        type=lambda text: index_list(text, "layer", negative=True),
        metavar="L[,L…]|all",
        help="with --attention-plots: a grid of these layers' maps per line (from 0 at the "
        "bottom, -1 at the top), a row each; default with --heads: all",
    )
    parser.add_argument(
        "--heads",
        type=lambda text: index_list(text, "head", negative=False, words=(MEAN,)),
        metavar="H[,H…]|mean|all",
        help="with --attention-plots: these heads of each layer, a panel each ('mean': their "
        "mean); default with --layers: all",
    )
    parser.add_argument(
        "--attention-kind",
        choices=KINDS,
        default=None,
        help="with --layers/--heads: the decoder's cross-attention (the default), or the "
        "encoder's or the decoder's self-attention",
    )
