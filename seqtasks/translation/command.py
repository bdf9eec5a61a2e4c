"""Translate text with a trained checkpoint: one line in, one line out.

    echo "Ein Hund rennt durch den Schnee." | seqtasks translate --checkpoint best.ckpt
    seqtasks translate --checkpoint best.ckpt --input news.de --output news.en --beam 5
    seqtasks translate --checkpoint best.ckpt --n-best 3 < in.txt   # i ||| text ||| score
    seqtasks translate --checkpoint best.ckpt --attention-plots plots/ < in.txt
    seqtasks translate --checkpoint best.ckpt --attention-plots plots/ --layers all --heads all
    seqtasks translate --checkpoint best.ckpt --alignments out.align < in.txt  # Pharaoh i-j
    seqtasks translate --checkpoint a.ckpt b.ckpt c.ckpt < in.txt   # an ensemble

The model is loaded once and the input translated in length-sorted batches; the output keeps
the input's line count and order (an empty line gives an empty line). An --output file is
written to a temporary name and renamed when complete. Several checkpoints decode as one
ensemble (their log-probabilities averaged at every step; `seqtasks.load`). The search
settings are the checkpoint's own but for the options given. --alignments writes each line's
word alignment of its (best) translation from the attention that wrote it (the cross-attention
of --alignment-layer averaged over --alignment-heads; by default Garg et al.'s penultimate
layer, all heads), in the Pharaoh format (`i-j`: source word i, target word j, from 0;
`seqtasks evaluate alignment` scores them).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seqtasks.cli.arguments import (
    CommandParser,
    add_device_option,
    add_max_tokens_option,
    add_model_option,
    add_search_options,
    check_outputs,
    given,
    positive_int,
)
from seqtasks.cli.attention_options import add_alignment_options, add_plot_grid_options
from seqtasks.cli.loading import CommandError, load_model
from seqtasks.cli.streams import require_stdin, require_stdout, write_stdout
from seqtasks.data.text import read_lines, read_stdin_lines
from seqtasks.io.files import write_atomic

if TYPE_CHECKING:
    from seqtasks.tasks.attentions import Panels


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = CommandParser(prog="seqtasks translate", description=__doc__.split("\n\n")[0])
    add_model_option(parser)
    parser.add_argument(
        "--input", type=Path, help="UTF-8 text, one sentence a line (default: stdin)"
    )
    parser.add_argument("--output", type=Path, help="where to write (default: stdout)")
    add_search_options(parser)
    parser.add_argument(
        "--n-best", type=positive_int, help="K hypotheses per line, at most the beam (default: 1)"
    )
    parser.add_argument("--attention-plots", type=Path, help="folder for one heat map per line")
    add_plot_grid_options(parser)
    parser.add_argument(
        "--alignments",
        type=Path,
        help="write each line's word alignment to its translation here (Pharaoh i-j, a line each)",
    )
    add_alignment_options(parser)
    add_max_tokens_option(parser)
    parser.add_argument(
        "--max-length",
        type=positive_int,
        help="longer sources (in subwords) are cut; default: the model's own",
    )
    add_device_option(parser)
    args = parser.parse_args(argv)
    grid = {"--layers": args.layers, "--heads": args.heads, "--attention-kind": args.attention_kind}
    for option, value in grid.items():
        if value is not None and not args.attention_plots:
            parser.error(f"argument {option}: is for --attention-plots")
    args.grid = any(value is not None for value in grid.values())
    if args.n_best is not None and args.beam is not None and args.n_best > args.beam:
        parser.error(f"argument --n-best: must be at most --beam ({args.beam}), got {args.n_best}")
    check_outputs(
        parser,
        {
            "--output": args.output,
            "--attention-plots": args.attention_plots,
            "--alignments": args.alignments,
        },
        {"--input": args.input, "--checkpoint": args.checkpoint},
        folders={"--attention-plots"},
    )
    return args


def main(argv: list[str] | None = None) -> int:
    """Translate the input; 0, or 2 for an input, checkpoint or setting that will not do."""
    args = parse_args(argv)
    if args.input is None:
        require_stdin()
    if args.output is None:
        require_stdout()
    search = given(beam=args.beam, n_best=args.n_best, stop=args.stop, max_length=args.max_length)
    asked = [name for name in ("attention_plots", "alignments") if getattr(args, name)]
    figures = "--" + asked[0].replace("_", "-") if asked else None
    try:
        lines = read_lines(args.input) if args.input else read_stdin_lines()
        model, settings = load_model(args.checkpoint, args.device, "translation", search, figures)
    except (CommandError, FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    n_best = settings.n_best

    every = "all" if args.alignments or args.grid else bool(asked)  # layers and heads chosen
    results = model.translate(lines, max_tokens=args.max_tokens, attention=every, **search)
    try:
        aligned = alignments(model, lines, results, args) if args.alignments else None
    except IndexError as error:  # a layer or head the model has not
        print(f"error: argument --alignment-layer/--alignment-heads: {error}", file=sys.stderr)
        return 2
    try:
        panels = grids(results, args) if args.grid else None
    except (IndexError, ValueError) as error:
        print(f"error: argument --layers/--heads/--attention-kind: {error}", file=sys.stderr)
        return 2
    if n_best == 1:
        out = [best.text for best in results]
    else:
        out = [
            f"{i} ||| {t.text} ||| {t.score:.4f}"
            for i, best in enumerate(results)
            for t in [best, *best.alternatives]
        ]
    text = "".join(line + "\n" for line in out)
    if args.output:
        write_atomic(args.output, text)
    else:
        write_stdout(text)

    if aligned is not None:
        write_atomic(args.alignments, aligned)
    if panels is not None:
        from seqtasks.io.plots import plot_attention_grid  # matplotlib: only for plots

        for i, (line, best) in enumerate(zip(lines, results)):
            if i in panels:
                queries, keys = best.attentions.axes(args.attention_kind or "cross")
                plot_attention_grid(
                    panels[i],
                    keys,
                    queries,
                    args.attention_plots / f"line{i + 1:05d}.png",
                    title=f"{line.strip()} → {best.text}",
                )
    elif args.attention_plots:
        from seqtasks.io.plots import plot_attention  # matplotlib: only for plots

        for i, (line, best) in enumerate(zip(lines, results)):
            if best.attention is None:  # an empty line or translation
                continue
            source = model.source_pieces(line, **given(max_length=args.max_length))
            plot_attention(
                best.attention,
                source,
                best.tokens,
                args.attention_plots / f"line{i + 1:05d}.png",
                title=f"{line.strip()} → {best.text}",
            )
    return 0


def grids(results: list[Any], args: argparse.Namespace) -> dict[int, Panels]:
    """Per line with a translation, by number from 0, the panels its plot shows: the maps of
    `--attention-kind`, a row per layer of `--layers`, a panel per head of `--heads`."""
    kind = args.attention_kind or "cross"
    return {
        i: best.attentions.panels(kind, args.layers, args.heads)
        for i, best in enumerate(results)
        if best.attentions is not None and best.tokens
    }


def alignments(model: Any, lines: list[str], results: list[Any], args: argparse.Namespace) -> str:
    """The Pharaoh lines of each line's best translation, by the attention that wrote it
    (`alignment.attention_links`, in `--target-units`), the cross-attention of
    `--alignment-layer` averaged over `--alignment-heads` (`alignment.alignment_attention`); an
    empty line or translation aligns nothing."""
    from seqtasks.translation.alignment import alignment_attention, attention_links, write_links

    out = []
    for line, best in zip(lines, results, strict=True):
        links: set = set()
        if best.attentions is not None and best.tokens:
            source = model.source_pieces(line, **given(max_length=args.max_length))[:-1]  # no EOS
            layer, heads = args.alignment_layer, args.alignment_heads
            attention = alignment_attention(best.attentions.cross, layer, heads)[:-1]
            links = attention_links(attention, source, best.tokens, args.target_units)
        out.append(write_links(links) + "\n")
    return "".join(out)
