"""Parse text with a trained checkpoint: one tree per sentence.

    echo "Pierre Vinken will join the board. He is 61." | python apps/parse.py --checkpoint CKPT
    python apps/parse.py --checkpoint CKPT --pretokenized < data/ptb/dev.txt
    python apps/parse.py --checkpoint CKPT --format pretty < story.txt
    python apps/parse.py --checkpoint A.ckpt B.ckpt < story.txt     # an ensemble

By default each input line is raw text, split into sentences and PTB tokens offline (round
brackets become -LRB- -RRB-, quotes `` ''); blank lines are skipped. With --pretokenized each
line is one sentence of space-separated tokens and gives exactly one output, so input and
output lines stay aligned.

Formats: `ptb` one tree per line, `pretty` nltk's drawing, `svg` one SVG document per tree.
Preterminals carry the model's POS tags if it was trained with `tags: true`, else `XX`. A
sentence that cannot be parsed (empty, or longer than --max-words) gets a note on stderr and,
in `ptb` format, an empty line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nltk.tree import Tree, TreePrettyPrinter

import seqtasks
from seqtasks.cli.arguments import add_max_tokens_option, add_stop_option, device_name, positive_int
from seqtasks.data.text import read_stdin_lines
from seqtasks.io.checkpoint_files import CheckpointError
from seqtasks.parsing.ptb_text import PTBTokenizer, escape_brackets
from seqtasks.parsing.trees import to_line


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--checkpoint", required=True, type=Path, nargs="+", help="one, or several: an ensemble"
    )
    parser.add_argument(
        "--pretokenized", action="store_true", help="one sentence a line, tokens split by spaces"
    )
    parser.add_argument("--format", choices=["ptb", "pretty", "svg"], default="ptb")
    parser.add_argument("--beam", type=positive_int, default=10, help="beam size; 1 = greedy")
    add_stop_option(parser)
    parser.add_argument(
        "--max-words", type=positive_int, default=400, help="longer sentences are skipped"
    )
    add_max_tokens_option(parser, "words")
    parser.add_argument(
        "--device", type=device_name, default="auto", help="cpu, cuda, cuda:1 … or auto"
    )
    return parser.parse_args(argv)


def render(tree: Tree, form: str) -> str:
    if form == "ptb":
        return to_line(tree) + "\n"
    drawing = TreePrettyPrinter(tree)
    return (drawing.text() if form == "pretty" else drawing.svg()) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        model = seqtasks.load(args.checkpoint, args.device, task="parsing")
        lines = read_stdin_lines()
    except (CheckpointError, FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    if args.pretokenized:
        sentences = [escape_brackets(line.split()) for line in lines]
    else:
        tokenizer = PTBTokenizer(model.task.vocabulary.words)
        sentences = [s for line in lines for s in tokenizer.sentences(line)]
    if not sentences:
        print("note: no sentences in the input", file=sys.stderr)

    todo = []
    for i, words in enumerate(sentences, start=1):
        if not words:
            print(f"note: sentence {i} is empty; nothing to parse", file=sys.stderr)
        elif len(words) > args.max_words:
            print(
                f"note: sentence {i} has {len(words)} tokens, more than --max-words "
                f"{args.max_words}; not parsed",
                file=sys.stderr,
            )
        elif len(words) > (model.max_words or len(words)):
            print(
                f"note: sentence {i} has {len(words)} tokens, more than the model reads "
                f"({model.max_words}); not parsed",
                file=sys.stderr,
            )
        else:
            todo.append(i - 1)
    parsed = model.parse(
        [sentences[i] for i in todo], beam=args.beam, max_tokens=args.max_tokens, stop=args.stop
    )
    parses = dict(zip(todo, parsed))
    for i in range(len(sentences)):
        if i in parses:
            sys.stdout.write(render(parses[i].tree, args.format))
        elif args.format == "ptb":
            sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
