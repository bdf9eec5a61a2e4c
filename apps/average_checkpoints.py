"""`python apps/average_checkpoints.py …` is `seqtasks average …` (seqtasks/commands/average.py)."""

import sys

from seqtasks.commands.average import main

if __name__ == "__main__":
    sys.exit(main())
