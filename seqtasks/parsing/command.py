"""Parse text with a trained checkpoint: one tree per sentence.

    echo "Pierre Vinken will join the board. He is 61." | seqtasks parse --checkpoint CKPT
    seqtasks parse --checkpoint CKPT --pretokenized < data/ptb/dev.txt
    seqtasks parse --checkpoint CKPT --format pretty < story.txt
    seqtasks parse --checkpoint A.ckpt B.ckpt < story.txt     # an ensemble

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
from typing import TYPE_CHECKING

from seqtasks.cli.arguments import (
    CommandParser,
    add_device_option,
    add_max_tokens_option,
    add_model_option,
    add_search_options,
    given,
    positive_int,
)
from seqtasks.cli.loading import CommandError, load_model
from seqtasks.cli.streams import require_stdin, require_stdout, write_stdout
from seqtasks.data.text import read_stdin_lines

if TYPE_CHECKING:
    from nltk.tree import Tree


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = CommandParser(prog="seqtasks parse", description=__doc__.split("\n\n")[0])
    add_model_option(parser)
    parser.add_argument(
        "--pretokenized", action="store_true", help="one sentence a line, tokens split by spaces"
    )
    parser.add_argument(
        "--format",
        choices=["ptb", "pretty", "svg"],
        default="ptb",
        help="ptb: a tree a line (an empty line for a sentence not parsed), as seqtasks "
        "evaluate parsing --pred reads; pretty: drawn in text; svg: drawn as SVG",
    )
    add_search_options(parser)
    parser.add_argument(
        "--max-words", type=positive_int, default=400, help="longer sentences are skipped"
    )
    add_max_tokens_option(parser, "words")
    add_device_option(parser)
    return parser.parse_args(argv)


def render(tree: Tree, form: str) -> str:
    from nltk.tree import TreePrettyPrinter

    from seqtasks.parsing.trees import to_line

    if form == "ptb":
        return to_line(tree) + "\n"
    drawing = TreePrettyPrinter(tree)
    return (drawing.text() if form == "pretty" else drawing.svg()) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Parse the sentences of stdin; 0, or 2 for an input, checkpoint or setting that will not
    do."""
    args = parse_args(argv)
    require_stdin(None)
    require_stdout(None)
    search = given(beam=args.beam, stop=args.stop)
    try:
        model, _ = load_model(args.checkpoint, args.device, "parsing", search)
        lines = read_stdin_lines()
    except (CommandError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    from seqtasks.parsing.ptb_text import PTBTokenizer, escape_brackets  # nltk: once loaded

    if args.pretokenized:
        sentences = [escape_brackets(line.split()) for line in lines]
    else:
        tokenizer = PTBTokenizer(model.task.vocabulary.known_words)
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
        elif (read := model.source_length(words)) > (model.max_words or read):
            pieces = "" if read == len(words) else f" ({read} pieces)"
            print(
                f"note: sentence {i} has {len(words)} tokens{pieces}, more than the model reads "
                f"({model.max_words}); not parsed",
                file=sys.stderr,
            )
        else:
            todo.append(i - 1)
    parsed = model.parse([sentences[i] for i in todo], max_tokens=args.max_tokens, **search)
    parses = dict(zip(todo, parsed))
    written = [
        render(parses[i].tree, args.format) if i in parses else "\n" if args.format == "ptb" else ""
        for i in range(len(sentences))
    ]
    write_stdout("".join(written))
    return 0
