"""`python apps/caption.py …` is `seqtasks caption …` (seqtasks/commands/caption.py)."""

import sys

from seqtasks.commands.caption import main

if __name__ == "__main__":
    sys.exit(main())
