"""Types for the command-line arguments of the commands and data_prep scripts: a bad value is
an argparse error that names the option (`error: argument --beam: must be a positive integer,
got 0`), never a traceback later on or a result quietly computed from nothing. Nothing here
imports torch until a value is checked, so that `seqtasks COMMAND --help` answers at once."""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from seqtasks.io.outputs import OutputError, check_output

Paths = Path | Iterable[Path] | None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """ " (did you mean --beam?)" for the choice nearest `word`, or "" when none is near."""
    near = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {near[0]}?)" if near else ""


class CommandParser(argparse.ArgumentParser):
    """argparse's parser for the seqtasks commands and scripts, whose errors name a misspelt
    option with the nearest one ("unrecognized arguments: --beem (did you mean --beam?)"),
    also where argparse would say first that a required option is missing (`--chekpoint` is
    not "--checkpoint is required"): argparse lists choices, but not near options."""

    def parse_known_args(self, args=None, namespace=None):  # noqa: ANN001, ANN201 (argparse's)
        self._given = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        unknown = re.match(r"unrecognized arguments: (.*)", message)
        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        misspelt = self._misspelt() if message.startswith("the following arguments") else None
        if unknown:
            words = [w for w in unknown[1].split() if w.startswith("-")]
            message += did_you_mean(words[0].split("=")[0], self._options()) if words else ""
        elif misspelt:
            near = did_you_mean(misspelt.split()[0], self._options())
            message = f"unrecognized arguments: {misspelt}{near}"
        elif choice:
            message += did_you_mean(choice[1], re.findall(r"'([^']*)'", choice[2]))
        super().error(message)

    def _options(self) -> list[str]:
        return [option for action in self._actions for option in action.option_strings]

    def _misspelt(self) -> str | None:
        """The first option given that this parser does not know, nor takes as a unique
        abbreviation of one it knows (argparse's `allow_abbrev`), with the values after it,
        as argparse lists unrecognized arguments ("--beem 3"); None if every one is known."""
        options, given = self._options(), getattr(self, "_given", [])
        for at, word in enumerate(given):
            if word == "--":
                return None
            name = word.split("=")[0]
            if not name.startswith("-") or name == "-" or _NUMBER.match(name):
                continue
            abbreviates = [o for o in options if o.startswith(name) and o.startswith("--")]
            if name not in options and not (self.allow_abbrev and len(abbreviates) == 1):
                values = []
                for value in given[at + 1 :]:
                    if value.startswith("-") and not _NUMBER.match(value):
                        break
                    values.append(value)
                return " ".join([word, *values])
        return None


_NUMBER = re.compile(r"^-\d+(\.\d*)?$")  # a negative number, a value rather than an option


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


def model_reference(text: str) -> Path | str:
    """A model to load: a checkpoint file or model folder that is here (a Path), or a model on
    the Hugging Face Hub, `hf://ORG/NAME[@REVISION]` (kept as the string: a Path would fold
    its `//`). A path that is not there is refused at once, with the nearest name beside it."""
    if not text:
        raise argparse.ArgumentTypeError("needs a checkpoint, model folder or hf:// name, got ''")
    if text.startswith("hf://"):
        return text
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"no such checkpoint or model folder: {text}{_near(path)}")
    return path


def _near(path: Path) -> str:
    """ " (did you mean runs/…/last.ckpt?)" for the name beside `path` nearest its own; "" when
    none is near, or its folder is not there either."""
    try:
        names = [entry.name for entry in path.parent.iterdir()]
    except OSError:
        return f" ({path.parent} is not there either)" if path.parent != path else ""
    near = difflib.get_close_matches(path.name, names, n=1, cutoff=0.6)
    return f" (did you mean {path.parent / near[0]}?)" if near else ""


def max_tokens(text: str) -> str | int:
    """A decoding budget: "auto" or a positive integer (`search.budget.max_tokens_option`).
    "auto", the default, is taken as it is: argparse passes a default through its type too,
    and checking it would import torch before a usage error could be said."""
    if text == "auto":
        return text
    from seqtasks.search.budget import max_tokens_option  # torch, only when a value is given

    return max_tokens_option(text)


def add_max_tokens_option(parser: argparse.ArgumentParser, unit: str = "source tokens") -> None:
    """`--max-tokens`: the decoding batch, "auto" (by device, `seqtasks.search.budget`) or a
    number of `unit`."""
    parser.add_argument(
        "--max-tokens",
        type=max_tokens,
        default="auto",
        help=f"{unit} per batch; auto: 2000 on a CPU, by free memory on a GPU",
    )


def stop_rule(text: str) -> str:
    """A stopping rule of beam search (`seqtasks.search.STOPS`), refused as argparse refuses a
    choice."""
    from seqtasks.search import STOPS  # torch, only when a value is given

    if text not in STOPS:
        choices = ", ".join(map(repr, STOPS))
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from {choices})")
    return text


def add_search_options(parser: argparse.ArgumentParser) -> None:
    """`--beam` and `--stop` (beam search's stopping rule, `seqtasks.search.beam_search`): the
    model's own unless given."""
    parser.add_argument(
        "--beam", type=positive_int, help="beam size, 1 = greedy; default: the model's own"
    )
    parser.add_argument(
        "--stop",
        type=stop_rule,
        metavar="RULE",
        help="when beam search ends: exact (cannot change the output) or heuristic (faster, as "
        "Hugging Face's default); default: the model's own",
    )


def add_model_option(parser: argparse.ArgumentParser) -> None:
    """`--checkpoint`, required: the model (several: an ensemble) a command runs."""
    parser.add_argument(
        "--checkpoint",
        required=True,
        type=model_reference,
        nargs="+",
        help="a checkpoint, model folder or hf://ORG/NAME; several: an ensemble",
    )


@dataclass(frozen=True)
class Scored:
    """What a report scores, one of two: `--checkpoint` (`model` says what it does; `several`:
    one or more models), or a file of outputs a command wrote (its `option`, `kind` and
    `help`)."""

    model: str
    option: str
    kind: Callable[[str], object]
    help: str
    several: bool = False


def add_scored_options(parser: argparse.ArgumentParser, scored: Scored) -> None:
    """`--checkpoint` or the file of outputs, one of them required (`Scored`)."""
    group = parser.add_mutually_exclusive_group(required=True)
    nargs = "+" if scored.several else None
    group.add_argument("--checkpoint", nargs=nargs, type=model_reference, help=scored.model)
    group.add_argument(scored.option, type=scored.kind, help=scored.help)


def add_buckets_option(parser: argparse.ArgumentParser, bounds: list[int], of: str) -> None:
    """`--buckets`: upper bounds of the length buckets a report scores apart (they must
    increase: `seqtasks.cli.evaluate`)."""
    parser.add_argument(
        "--buckets",
        type=positive_int,
        nargs="+",
        default=bounds,
        help=f"upper bounds of the {of}-length buckets, in words",
    )


def add_device_option(
    parser: argparse.ArgumentParser, help: str = "cpu, cuda, cuda:1 … or auto"
) -> None:
    """`--device`: where the model runs, "auto" (a GPU when one is visible) by default."""
    parser.add_argument("--device", type=device_name, default="auto", help=help)


def given(**options: object) -> dict[str, object]:
    """The options that were given (not None), as keyword arguments: what a command passes to
    `seqtasks.load`'s models, whose None is the checkpoint's own setting."""
    return {name: value for name, value in options.items() if value is not None}


def device_name(text: str) -> str:
    """A device that is here (`seqtasks.devices.check_device`): "auto", "cpu", "cuda:1" …;
    "auto", the default, as it is (as `max_tokens`'s)."""
    if text == "auto":
        return text
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
