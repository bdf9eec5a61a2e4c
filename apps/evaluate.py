"""`python apps/evaluate.py …` is `seqtasks evaluate …` (seqtasks/cli/evaluate.py)."""

import sys

from seqtasks.cli.evaluate import main

if __name__ == "__main__":
    sys.exit(main())
