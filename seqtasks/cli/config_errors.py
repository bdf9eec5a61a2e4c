"""Config errors of the `seqtasks` command in one line (`seqtasks.io.config_errors`), before
jsonargparse's own account."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

from lightning.pytorch.cli import LightningArgumentParser

from seqtasks.io.config_errors import config_error_summary


class SeqtasksParser(LightningArgumentParser):
    """LightningCLI's parser, whose errors begin with the line `config_error_summary` makes:
    jsonargparse prints the whole usage (some 50 lines) first and the key at fault later."""

    def error(self, message: str, ex: Exception | None = None) -> NoReturn:
        if not self.exit_on_error or os.environ.get("JSONARGPARSE_DEBUG"):
            super().error(message, ex)  # jsonargparse is trying alternatives, or debugging
        details = f"\n{message.rstrip()}\n" if "\n" in message.strip() else ""
        sys.stderr.write(
            f"error: {config_error_summary(message)}\n{details}\n"
            f"tip: `{self.prog.replace(' [options]', '')} --help` lists the options\n"
        )
        self.exit(2)
