"""`seqtasks evaluate TASK …`: score trained models (or files of their outputs) the way each
task's field does. Each task with an evaluation declares it (`TaskEntry.evaluation`), a module
that imports no torch at its top, so that `--help` answers at once:

    RUN                   where the scoring is ("module.function", "." inside the task's
                          package; the built-in ones: ".report.evaluate"), imported once the
                          arguments are read: `function(args) -> int` prints the report (and
                          --json's last line) and gives the exit status
    HELP                  the line `seqtasks evaluate --help` shows for the task
    SCORED                what it scores: --checkpoint, or a file of outputs (`Scored`)
    BUCKETS               (optional) the default bounds of its length buckets, and of what
    OUTPUT                what --output writes
    add_arguments(parser) the task's own options (the shared ones are added here: --checkpoint
                          or the file, --beam, --stop, --buckets, --output, --device, --json)
    check(args, error)    refuse combinations of options, with `error(message)`
    inputs(args), outputs(args)
                          what a run reads and writes, by option, so that an output that would
                          overwrite an input, or cannot be written, is refused before any model
                          is loaded (docs/bad_input.md)

    seqtasks evaluate translation --checkpoint best.ckpt --src test.de --ref test.en --beam 5
    seqtasks evaluate parsing --checkpoint best.ckpt --gold data/ptb/dev.mrg --beam 10
    seqtasks evaluate captioning --checkpoint best.ckpt --source data/flickr8k --split test

`seqtasks evaluate TASK --help` describes each task's report.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from seqtasks.cli.arguments import (
    CommandParser,
    add_buckets_option,
    add_device_option,
    add_scored_options,
    add_search_options,
    check_outputs,
)
from seqtasks.cli.streams import require_stdout
from seqtasks.model_files.peek import other_task
from seqtasks.registry import TaskEntry, TaskPackageWarning, left_out, tasks

DEVICE = "cpu, cuda, cuda:1 … or auto (a GPU when one is visible)"
JSON = "end with the report as one JSON object, on the last line"


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, Callable[..., int]]:
    """The arguments of `seqtasks evaluate TASK …`, checked (buckets increase, the task's own
    rules, outputs safe to write, models of the task), and what scores them (the evaluation's
    `RUN`, imported now). A model of another task ends the command (status 2) before torch is
    imported."""
    parser = CommandParser(
        prog="seqtasks evaluate",
        description="Score trained models the way their field does.",
    )
    subparsers = parser.add_subparsers(dest="task", required=True)
    modules, task_names = {}, {}
    for entry, name, module in evaluations():
        modules[name], task_names[name] = module, entry.name
        task = subparsers.add_parser(
            name,
            help=module.HELP,
            description=module.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        add_scored_options(task, module.SCORED)
        module.add_arguments(task)
        add_search_options(task)
        if hasattr(module, "BUCKETS"):
            add_buckets_option(task, *module.BUCKETS)
        task.add_argument("--output", type=Path, help=module.OUTPUT)
        add_device_option(task, DEVICE)
        task.add_argument("--json", action="store_true", help=JSON)
    given = sys.argv[1:] if argv is None else argv
    asked = next((arg for arg in given if not arg.startswith("-")), None)
    for package in left_out():
        if package.name == asked:  # its evaluation cannot be offered: say why, not "invalid"
            parser.error(f"the {asked!r} task cannot be used: {package}")
    args = parser.parse_args(argv)
    module, task = modules[args.task], subparsers.choices[args.task]
    buckets = getattr(args, "buckets", None)
    if buckets is not None and buckets != sorted(set(buckets)):
        task.error(f"argument --buckets: must increase, got {' '.join(map(str, buckets))}")
    module.check(args, task.error)
    check_outputs(task, module.outputs(args), module.inputs(args))
    models = args.checkpoint if isinstance(args.checkpoint, list) else [args.checkpoint]
    refused = other_task([m for m in models if m is not None], task_names[args.task])
    if refused is not None:  # before the report imports torch: at once
        print(f"error: {refused}", file=sys.stderr)
        raise SystemExit(2)
    return args, tasks()[task_names[args.task]].imported(module.RUN)


def evaluations() -> list[tuple[TaskEntry, str, ModuleType]]:
    """Each report `seqtasks evaluate NAME` offers: its task, its name and its module
    (`TaskEntry.evaluation_modules`). One whose module fails to import, or whose name another
    task's report has, is left out with a warning naming its package; the others still score."""
    found: dict[str, tuple[TaskEntry, str, ModuleType]] = {}
    for entry in tasks().values():
        for name, path in entry.evaluation_modules().items():
            if name in found:
                why = f"seqtasks evaluate {name} is the {found[name][0].name} task's"
            else:
                try:
                    found[name] = (entry, name, importlib.import_module(entry.path(path)))
                    continue
                except Exception as error:  # an outside task's evaluation
                    why = f"importing it raised {type(error).__name__}: {error}"
            warnings.warn(
                f"task package {entry.package}: its evaluation {path} left out: {why}",
                TaskPackageWarning,
                stacklevel=3,
            )
    return list(found.values())


def main(argv: list[str] | None = None) -> int:
    """Score as the task asks; 0, 1 for scores over part of a split, 2 for an input, checkpoint
    or setting that will not do."""
    args, run = parse_args(argv)
    require_stdout(None)  # the report
    return run(args)
