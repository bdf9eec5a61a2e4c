"""`python apps/parse.py …` is `seqtasks parse …` (seqtasks/commands/parse.py)."""

import sys

from seqtasks.commands.parse import main

if __name__ == "__main__":
    sys.exit(main())
