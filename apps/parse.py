"""`python apps/parse.py …` is `seqtasks parse …` (seqtasks/parsing/command.py)."""

import sys

from seqtasks.parsing.command import main

if __name__ == "__main__":
    sys.exit(main())
