"""``python -m fpsim``: the ``fpsim`` command line."""

import sys

from fpsim.cli import main

sys.exit(main())
