"""The fp8 experiment's former home, kept because notebook 08 (fp8 training) imports it:
everything is in ``nn.experiments.fp8`` (``python -m nn.experiments_fp8`` still runs it)."""

from nn.experiments.fp8 import *  # noqa: F403
from nn.experiments.fp8 import __doc__ as _doc  # noqa: F401
from nn.experiments.fp8 import main

if __name__ == "__main__":
    main()
