"""The `seqtasks` command: Lightning's CLI (`fit`, `validate`, `test`, `predict`) for training,
and two commands for a trained checkpoint:

    seqtasks serve CKPT [CKPT ...] [--port 8000]       # HTTP endpoints (seqtasks.serving)
    seqtasks export CKPT --to ctranslate2 OUT/          # a CTranslate2 model (seqtasks.export)
"""

from __future__ import annotations

import importlib
import sys

# Imported here, before `main` below is defined: importing the submodule later would rebind
# the package's `main` to it.
from seqtasks.cli.main import main as lightning_main

COMMANDS = {"serve": "seqtasks.serving", "export": "seqtasks.export"}


def main(args: list[str] | None = None) -> None:
    """Run `seqtasks serve|export …` (exiting with its status), or Lightning's CLI."""
    argv = sys.argv[1:] if args is None else list(args)
    if argv and argv[0] in COMMANDS:
        command = importlib.import_module(COMMANDS[argv[0]])
        sys.exit(command.main(argv[1:]))
    lightning_main(args)  # None: LightningCLI reads sys.argv itself (and warns if also given)


__all__ = ["main"]
