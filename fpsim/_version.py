"""``__version__`` of the fpsim distribution (the packages fpsim and nn), from its installed
metadata; "0+unknown" when it runs from a source tree that was never installed."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("fpsim")
except PackageNotFoundError:
    __version__ = "0+unknown"
