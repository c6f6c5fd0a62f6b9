"""Errors raised by sjsonl. Every one derives from :class:`SJSONLError`.

Example:
    >>> from sjsonl.errors import SJSONLError, RecordDecodeError
    >>> issubclass(RecordDecodeError, SJSONLError) and issubclass(RecordDecodeError, ValueError)
    True
"""

from __future__ import annotations


class SJSONLError(Exception):
    """Base class of every error sjsonl raises on purpose."""


class DataFileError(SJSONLError, OSError):
    """A data file cannot be used: missing, a directory, unreadable. ``errno`` is set as for OSError."""

    def __str__(self) -> str:  # one plain line, without OSError's "[Errno N]" prefix
        return str(self.strerror) if self.strerror else super().__str__()


class StaleIndexError(SJSONLError):
    """The index on disk no longer matches its data file, and building was disabled."""


class IndexFileError(SJSONLError):
    """An index file is unreadable or malformed."""


class RecordDecodeError(SJSONLError, ValueError):
    """A record is not valid JSON (or not valid UTF-8).

    Attributes name where it is: ``path``, ``line`` (1-based line number in the file, not the record
    number), ``offset`` (byte offset of the line's start), ``excerpt`` and the parser's ``reason``.
    """

    def __init__(self, path: str, line: int, offset: int, excerpt: str, reason: str) -> None:
        self.path, self.line, self.offset, self.excerpt, self.reason = path, line, offset, excerpt, reason
        super().__init__(
            f"{path}:{line}: invalid JSON record at byte offset {offset}: {reason}; line starts {excerpt}"
        )

    def __reduce__(self):  # keep the fields through pickling (DataLoader workers re-raise in the parent)
        return (type(self), (self.path, self.line, self.offset, self.excerpt, self.reason))


class MissingDependencyError(SJSONLError, ImportError):
    """An optional dependency is needed; the message names the extra to install."""


def require(module: str, extra: str):
    """Import ``module`` or raise :class:`MissingDependencyError` naming ``pip install 'sjsonl[extra]'``."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(
            f"{module} is required for this feature: pip install 'sjsonl[{extra}]'"
        ) from exc
