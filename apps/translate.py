"""Translate text with a trained checkpoint: one line in, one line out.

    echo "Ein Hund rennt durch den Schnee." | python apps/translate.py --checkpoint best.ckpt
    python apps/translate.py --checkpoint best.ckpt --input news.de --output news.en --beam 5
    python apps/translate.py --checkpoint best.ckpt --n-best 3 < in.txt   # i ||| text ||| score
    python apps/translate.py --checkpoint best.ckpt --attention-plots plots/ < in.txt
    python apps/translate.py --checkpoint a.ckpt b.ckpt c.ckpt < in.txt   # an ensemble

The model is loaded once and the input translated in length-sorted batches; the output keeps
the input's line count and order (an empty line gives an empty line). An --output file is
written to a temporary name and renamed when complete. Several checkpoints decode as one
ensemble (their log-probabilities averaged at every step; `seqtasks.load`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import seqtasks
from seqtasks.cli.arguments import (
    add_max_tokens_option,
    add_stop_option,
    check_outputs,
    device_name,
    positive_int,
)
from seqtasks.data.text import read_lines, read_stdin_lines
from seqtasks.io.checkpoint_files import CheckpointError
from seqtasks.io.files import write_atomic
from seqtasks.io.plots import plot_attention


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--checkpoint", required=True, type=Path, nargs="+", help="one, or several: an ensemble"
    )
    parser.add_argument(
        "--input", type=Path, help="UTF-8 text, one sentence a line (default: stdin)"
    )
    parser.add_argument("--output", type=Path, help="where to write (default: stdout)")
    parser.add_argument("--beam", type=positive_int, default=5, help="beam size; 1 = greedy")
    parser.add_argument("--n-best", type=positive_int, default=1, help="K hypotheses per line")
    add_stop_option(parser)
    parser.add_argument("--attention-plots", type=Path, help="folder for one heat map per line")
    add_max_tokens_option(parser)
    parser.add_argument(
        "--max-length", type=positive_int, default=250, help="longer sources are cut"
    )
    parser.add_argument(
        "--device", type=device_name, default="auto", help="cpu, cuda, cuda:1 … or auto"
    )
    args = parser.parse_args(argv)
    if args.n_best > args.beam:
        parser.error(f"argument --n-best: must be at most --beam ({args.beam}), got {args.n_best}")
    check_outputs(
        parser,
        {"--output": args.output, "--attention-plots": args.attention_plots},
        {"--input": args.input, "--checkpoint": args.checkpoint},
        folders={"--attention-plots"},
    )
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        lines = read_lines(args.input) if args.input else read_stdin_lines()
        model = seqtasks.load(args.checkpoint, args.device, task="translation")
    except (CheckpointError, FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.attention_plots and not model.gives_attention:
        name = type(model.task.decoder).__name__
        print(
            f"error: --attention-plots: {args.checkpoint[0]}'s {name} has no attention",
            file=sys.stderr,
        )
        return 2

    results = model.translate(
        lines,
        beam=args.beam,
        n_best=args.n_best,
        max_tokens=args.max_tokens,
        max_length=args.max_length,
        attention=args.attention_plots is not None,
        stop=args.stop,
    )
    if args.n_best == 1:
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
        sys.stdout.write(text)

    if args.attention_plots:
        for i, (line, best) in enumerate(zip(lines, results)):
            if best.attention is None:  # an empty line or translation
                continue
            source = model.source_pieces(line, args.max_length)
            plot_attention(
                best.attention,
                source,
                best.tokens,
                args.attention_plots / f"line{i + 1:05d}.png",
                title=f"{line.strip()} → {best.text}",
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
