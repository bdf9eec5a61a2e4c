"""`python apps/translate.py …` is `seqtasks translate …` (seqtasks/translation/command.py)."""

import sys

from seqtasks.translation.command import main

if __name__ == "__main__":
    sys.exit(main())
