"""The `seqtasks` command (Lightning's CLI) and the argument types of the apps."""

from seqtasks.cli.main import main

__all__ = ["main"]
