"""Config errors of the `seqtasks` command in one line (`seqtasks.io.config_errors`), before
jsonargparse's own account."""

from __future__ import annotations

import importlib
import os
import re
import sys
from typing import NoReturn

from lightning.pytorch.cli import LightningArgumentParser

from seqtasks.io.config_errors import config_error_summary
from seqtasks.old_names import renamed


class SeqtasksParser(LightningArgumentParser):
    """LightningCLI's parser, whose errors begin with the line `config_error_summary` makes:
    jsonargparse prints the whole usage (some 50 lines) first and the key at fault later."""

    def error(self, message: str, ex: Exception | None = None) -> NoReturn:
        if not self.exit_on_error or os.environ.get("JSONARGPARSE_DEBUG"):
            super().error(message, ex)  # jsonargparse is trying alternatives, or debugging
        details = f"\n{message.rstrip()}\n" if "\n" in message.strip() else ""
        sys.stderr.write(
            f"error: {with_new_name(config_error_summary(message))}\n{details}\n"
            f"tip: `{self.prog.replace(' [options]', '')} --help` lists the options\n"
        )
        self.exit(2)


_NOT_A_PARAMETER = re.compile(
    r"^(?P<key>\S+?)(?P<option>[^.\s]+): not a parameter of (?P<owner>[\w.]+)$"
)


def with_new_name(summary: str) -> str:
    """`summary`, or for a setting the class has renamed since 0.1 (`seqtasks.old_names`),
    the line that says its name now: "data.init_args.num_train: renamed to data.init_args.
    counts.train in seqtasks 0.2 (CHANGELOG.md)"."""
    found = _NOT_A_PARAMETER.match(summary)
    if found is None:
        return summary
    try:
        module, _, name = found["owner"].rpartition(".")
        owner = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        return summary
    new = renamed(owner, found["option"]) if isinstance(owner, type) else None
    if new is None:
        return summary
    key, option = found["key"], found["option"]
    return f"{key}{option}: renamed to {key}{new} in seqtasks 0.2 (CHANGELOG.md)"
