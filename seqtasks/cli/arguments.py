"""Types for the command-line arguments of the apps and data_prep scripts: a bad value is an
argparse error that names the option (`error: argument --beam: must be a positive integer, got
0`), never a traceback later on or a result quietly computed from nothing."""

from __future__ import annotations

import argparse
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path

from seqtasks.io.outputs import OutputError, check_output

Paths = Path | Iterable[Path] | None


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


def add_max_tokens_option(parser: argparse.ArgumentParser, unit: str = "source tokens") -> None:
    """`--max-tokens`: the decoding batch, "auto" (by device, `seqtasks.search.budget`) or a
    number of `unit`."""
    from seqtasks.search.budget import max_tokens_option  # here: it imports torch

    parser.add_argument(
        "--max-tokens",
        type=max_tokens_option,
        default="auto",
        help=f"{unit} per batch; auto: 2000 on a CPU, by free memory on a GPU",
    )


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


def device_name(text: str) -> str:
    """A device that is here (`seqtasks.devices.check_device`): "auto", "cpu", "cuda:1" …"""
    from seqtasks.devices import DeviceError, check_device  # torch, only when a value is given

    try:
        check_device(text)
    except DeviceError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def check_outputs(
    parser: argparse.ArgumentParser,
    outputs: Mapping[str, Paths],
    inputs: Mapping[str, Paths],
    folders: Collection[str] = (),
) -> None:
    """Refuse, as an argparse error naming the option, an output (option -> path or paths; a
    folder for the options in `folders`) that would overwrite one of `inputs` (what each is
    called -> path or paths), another output, or seqtasks' own files, or that cannot be written
    (`seqtasks.io.outputs.check_output`): before anything is read or computed."""
    written: dict[str, Paths] = dict(inputs)
    for option, paths in outputs.items():
        if paths is None:
            continue
        paths = [paths] if isinstance(paths, Path) else list(paths)
        for path in paths:
            try:
                check_output(path, f"argument {option}:", written, folder=option in folders)
            except OutputError as error:
                parser.error(str(error))
        written[f"the {option} {'folder' if option in folders else 'file'}"] = paths
