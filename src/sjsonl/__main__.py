"""``python -m sjsonl …``: the same command line as the ``sjsonl`` script."""

import sys

from sjsonl.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
