"""Types for the command-line arguments of the apps and data_prep scripts: a bad value is an
argparse error that names the option (`error: argument --beam: must be a positive integer, got
0`), never a traceback later on or a result quietly computed from nothing."""

from __future__ import annotations

import argparse
from pathlib import Path


def positive_int(text: str) -> int:
    """An integer ≥ 1 (beam sizes, batch sizes, length limits)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def non_negative_int(text: str) -> int:
    """An integer ≥ 0 (counts of images or examples, where none is a valid choice)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text}")
    return value


def text_file(text: str) -> Path:
    """An existing file that is not empty (a source or reference to score: an empty one would
    give a score of nothing)."""
    path = Path(text)
    if not text:
        raise argparse.ArgumentTypeError("needs a file name, got ''")
    if not path.exists():
        raise argparse.ArgumentTypeError(f"no such file: {path}")
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{path} is not a file")
    if path.stat().st_size == 0:
        raise argparse.ArgumentTypeError(f"{path} is empty")
    return path


def add_stop_option(parser: argparse.ArgumentParser) -> None:
    """`--stop`: beam search's stopping rule (`seqtasks.search.beam_search`); by default the
    model's own (`beam_stop`)."""
    from seqtasks.search import STOPS  # here: it imports torch, which the other types do not


    parser.add_argument(
        "--stop",
        choices=STOPS,
        help="when beam search ends: exact (cannot change the output) or heuristic (faster, as "
        "Hugging Face's default); default: the model's own",
    )
