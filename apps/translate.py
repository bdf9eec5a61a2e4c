"""`python apps/translate.py …` is `seqtasks translate …` (seqtasks/commands/translate.py)."""

import sys

from seqtasks.commands.translate import main

if __name__ == "__main__":
    sys.exit(main())
