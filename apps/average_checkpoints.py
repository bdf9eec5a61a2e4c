"""`python apps/average_checkpoints.py …` is `seqtasks average …` (seqtasks/cli/average.py)."""

import sys

from seqtasks.cli.average import main

if __name__ == "__main__":
    sys.exit(main())
