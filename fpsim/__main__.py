"""``python -m fpsim``: the ``fpsim`` command line."""

import sys

from fpsim.cli import main

if __name__ == "__main__":
    sys.exit(main())
