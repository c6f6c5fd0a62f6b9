"""The one place the version is written: ``sjsonl.__version__``, ``sjsonl --version`` and the build read
it."""

__version__ = "0.1.0"
