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
from collections.abc import Callable
from pathlib import Path

from seqtasks.cli.arguments import (
    CommandParser,
    add_buckets_option,
    add_device_option,
    add_scored_options,
    add_search_options,
    check_outputs,
)
from seqtasks.cli.streams import require_stdout
from seqtasks.registry import tasks

DEVICE = "cpu, cuda, cuda:1 … or auto (a GPU when one is visible)"
JSON = "end with the report as one JSON object, on the last line"


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, Callable[..., int]]:
    """The arguments of `seqtasks evaluate TASK …`, checked (buckets increase, the task's own
    rules, outputs safe to write), and what scores them (the evaluation's `RUN`, imported
    now)."""
    parser = CommandParser(
        prog="seqtasks evaluate",
        description="Score trained models the way their field does.",
    )
    subparsers = parser.add_subparsers(dest="task", required=True)
    modules = {}
    for name, entry in tasks().items():
        module = entry.evaluation_module()
        if module is None:
            continue
        modules[name] = module
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
    args = parser.parse_args(argv)
    module, task = modules[args.task], subparsers.choices[args.task]
    buckets = getattr(args, "buckets", None)
    if buckets is not None and buckets != sorted(set(buckets)):
        task.error(f"argument --buckets: must increase, got {' '.join(map(str, buckets))}")
    module.check(args, task.error)
    check_outputs(task, module.outputs(args), module.inputs(args))
    return args, tasks()[args.task].imported(module.RUN)


def main(argv: list[str] | None = None) -> int:
    """Score as the task asks; 0, 1 for scores over part of a split, 2 for an input, checkpoint
    or setting that will not do."""
    args, run = parse_args(argv)
    require_stdout(None)  # the report
    return run(args)
