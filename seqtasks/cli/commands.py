"""The `seqtasks` command: Lightning's CLI for training, and commands for a trained checkpoint.

    seqtasks fit --config configs/translation/dates.yaml      # fit | validate | test | predict
    seqtasks translate --checkpoint best.ckpt < in.txt         # translate | parse | caption
    seqtasks evaluate translation --checkpoint best.ckpt --src … --ref …
    seqtasks serve best.ckpt --port 8000

`seqtasks --help` lists the commands, `seqtasks COMMAND --help` gives one's options. A command
is a module with `main(argv) -> int` (the exit status). Its module imports at the top only what
its argument parser needs (`seqtasks.cli.arguments`, which imports no torch), and the rest where
the work starts, after the arguments are parsed: so `--help` answers at once, without the
seconds that torch and Lightning take to import (tests/cli/test_commands.py checks it).
"""

from __future__ import annotations

import importlib
import sys
import warnings

import seqtasks
from seqtasks.cli.arguments import did_you_mean
from seqtasks.cli.streams import at_the_edges
from seqtasks.registry import Command, TaskPackageWarning, tasks

USAGE = "usage: seqtasks COMMAND [ARGS ...]"


# Lightning's CLI (seqtasks/cli/main.py) reads the subcommand itself: its `main` gets it too.
LIGHTNING = {
    command.name: command
    for command in (
        Command("fit", "train a model described by a YAML config (--config F.yaml)", ""),
        Command("validate", "score a model on the validation split", ""),
        Command("test", "score a model on the test split", ""),
        Command("predict", "run a model over the data's predict split", ""),
    )
}
GENERIC = (
    Command(
        "evaluate",
        "score checkpoints the way their field does (sacreBLEU, EVALB, CIDEr-D)",
        "seqtasks.cli.evaluate",
    ),
    Command("average", "average the weights of several checkpoints", "seqtasks.cli.average"),
    Command("serve", "serve checkpoints over HTTP with dynamic batching", "seqtasks.cli.serve"),
    Command("export", "write a model folder, or a format a task offers", "seqtasks.cli.export"),
)


def commands() -> dict[str, Command]:
    """The commands for a trained model: each task's own (translate, …), then the generic ones;
    a task's module named by its full path. A task's command named as one of seqtasks' own or an
    earlier task's (the built-in tasks come first) is left out, with one warning line, rather
    than taking that name over."""
    taken = {*LIGHTNING, *(command.name for command in GENERIC)}
    own: dict[str, Command] = {}
    owners: dict[str, str] = {}
    for entry in tasks().values():
        command = entry.command
        if command is None:
            continue
        if command.name in taken or command.name in own:
            whose = (
                "seqtasks' own" if command.name in taken else f"the {owners[command.name]} task's"
            )
            warnings.warn(
                f"task package {entry.package}: its command {command.name!r} left out: "
                f"seqtasks {command.name} is {whose}",
                TaskPackageWarning,
                stacklevel=2,
            )
            continue
        own[command.name] = Command(command.name, command.summary, entry.path(command.module))
        owners[command.name] = entry.name
    return {**own, **{command.name: command for command in GENERIC}}


# What gives Lightning's CLI a model to run (or asks it for help), in a subcommand's arguments.
DESCRIBED = ("--config", "-c", "--model", "--data", "-h", "--help", "--print_config")


def listing() -> str:
    """The commands, a line each, in two groups."""

    def lines(named: dict[str, Command]) -> str:
        return "\n".join(f"  {name:<10} {command.summary}" for name, command in named.items())

    return (
        "training, with Lightning's CLI (seqtasks fit --help for its options):\n"
        f"{lines(LIGHTNING)}\n\n"
        f"with a trained checkpoint:\n{lines(commands())}"
    )


def usage() -> str:
    """What `seqtasks --help` prints."""
    return (
        f"{USAGE}\n\n"
        "Encoders and attention decoders for translation, captioning and parsing.\n\n"
        f"{listing()}\n\n"
        "options:\n"
        "  -h, --help  show this message and exit\n"
        "  --version   show seqtasks' version and exit\n\n"
        "seqtasks COMMAND --help gives the options of COMMAND."
    )


def _say_left_out_packages() -> None:
    """Show a `TaskPackageWarning` (an outside task package left out) as one `warning:` line,
    other warnings as Python shows them."""
    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001
        if issubclass(category, TaskPackageWarning):
            print(f"warning: {message}", file=file or sys.stderr)
        else:
            shown(message, category, filename, lineno, file, line)

    warnings.showwarning = show


def main(argv: list[str] | None = None) -> int:
    """Run the command `argv` (default: the process's arguments) names; its exit status. An
    unknown command is an error (status 2) that lists the commands; what fails at the edges of
    a command (its streams, the files it writes) ends it as `seqtasks.cli.streams` says."""
    args = sys.argv[1:] if argv is None else list(argv)
    _say_left_out_packages()
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        return 0
    if args[0] == "--version":
        print(f"seqtasks {seqtasks.__version__}")
        return 0
    name = args[0]
    if name in LIGHTNING:
        if not any(arg.startswith(DESCRIBED) for arg in args[1:]):  # said before Lightning loads
            print(
                f"{USAGE}\nerror: seqtasks {name} needs a config: --config F.yaml (configs/ "
                "holds one per task and model, e.g. configs/translation/dates.yaml); "
                f"seqtasks {name} --help lists the options",
                file=sys.stderr,
            )
            return 2
        if any(arg in ("-h", "--help") or arg.startswith("--print_config") for arg in args[1:]):
            print(  # the seconds before Lightning's parser can answer are not a silence
                f"seqtasks {name}: reading Lightning's options (importing PyTorch and Lightning "
                "takes a few seconds)…",
                file=sys.stderr,
                flush=True,
            )
        from seqtasks.cli.main import main as lightning

        # None: LightningCLI reads sys.argv itself (and warns if also given)
        return at_the_edges(lambda: lightning(argv) or 0)
    known = commands()
    if name not in known:
        what = "option" if name.startswith("-") else "command"
        near = did_you_mean(name, [*LIGHTNING, *known, "--help", "--version"])
        print(f"{USAGE}\nerror: unknown {what} {name!r}{near}\n\n{listing()}", file=sys.stderr)
        return 2
    try:
        module = importlib.import_module(known[name].module)
    except Exception as error:  # an outside task's command that cannot be imported
        print(f"error: seqtasks {name} cannot be loaded ({known[name].module}): "
              f"{type(error).__name__}: {error}", file=sys.stderr)  # fmt: skip
        return 1
    return at_the_edges(lambda: module.main(args[1:]))
