"""`python apps/evaluate.py …` is `seqtasks evaluate …` (seqtasks/commands/evaluate.py)."""

import sys

from seqtasks.commands.evaluate import main

if __name__ == "__main__":
    sys.exit(main())
