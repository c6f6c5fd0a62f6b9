"""``python -m sjsonl.cli …``: the same command line as the ``sjsonl`` script (and ``python -m sjsonl``)."""

import sys

from sjsonl.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
