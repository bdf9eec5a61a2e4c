"""`python -m seqtasks.serving CKPT …` is `seqtasks serve CKPT …`."""

import sys

from seqtasks.serving import main

if __name__ == "__main__":
    sys.exit(main())
