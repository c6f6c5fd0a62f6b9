"""The ``sjsonl`` command line, for people: :func:`main` parses (:mod:`~sjsonl.cli.main`), the commands do
the work (:mod:`~sjsonl.cli.commands`, :mod:`~sjsonl.cli.stats`), and every file they write goes through
:mod:`~sjsonl.cli.output` (never over an input or its index). ``sjsonl filter``'s expressions are
:mod:`~sjsonl.cli.expr`; ``sjsonl demo`` is :mod:`~sjsonl.cli.demo`.
"""

from sjsonl.cli.main import main

__all__ = ["main"]
