"""`python -m seqtasks` is the `seqtasks` command (`seqtasks.commands`)."""

import sys

from seqtasks.commands import main

if __name__ == "__main__":
    sys.exit(main())
