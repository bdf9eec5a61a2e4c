"""`python -m seqtasks` is the `seqtasks` command (`seqtasks.cli.commands`)."""

import sys

from seqtasks.cli.commands import main

if __name__ == "__main__":
    sys.exit(main())
