"""`python apps/caption.py …` is `seqtasks caption …` (seqtasks/captioning/command.py)."""

import sys

from seqtasks.captioning.command import main

if __name__ == "__main__":
    sys.exit(main())
