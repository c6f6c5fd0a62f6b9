"""Errors raised by sjsonl. Every one derives from :class:`SJSONLError`.

Example:
    >>> from sjsonl.errors import SJSONLError, RecordDecodeError
    >>> issubclass(RecordDecodeError, SJSONLError) and issubclass(RecordDecodeError, ValueError)
    True
"""

from __future__ import annotations


def one_line(text: str) -> str:
    """``text`` with line breaks escaped, so a message (e.g. naming a file whose name holds a newline)
    stays on one line.

    Example:
        >>> one_line("no such data file: /data/a\\nb.jsonl")
        'no such data file: /data/a\\\\nb.jsonl'
    """
    return text.replace("\r", "\\r").replace("\n", "\\n")


class SJSONLError(Exception):
    """Base class of every error sjsonl raises on purpose. Its message is always one line.

    Example:
        >>> from sjsonl import JSONLDataset
        >>> try:
        ...     JSONLDataset("/no/such/data.jsonl")
        ... except SJSONLError as exc:
        ...     print(type(exc).__name__, exc)
        DataFileError no such data file: /no/such/data.jsonl
    """

    def __str__(self) -> str:
        return one_line(super().__str__())


class DataFileError(SJSONLError, OSError):
    """A data file cannot be used: missing, a directory, unreadable. ``errno`` is set as for OSError.

    Example:
        >>> import errno, tempfile
        >>> from sjsonl import JSONLDataset
        >>> try:
        ...     JSONLDataset(tempfile.gettempdir())
        ... except DataFileError as exc:
        ...     exc.errno == errno.EISDIR, str(exc).startswith("expected a JSONL file, got a directory")
        (True, True)
    """

    def __str__(self) -> str:  # one plain line, without OSError's "[Errno N]" prefix
        return one_line(str(self.strerror)) if self.strerror else super().__str__()


class StaleIndexError(SJSONLError):
    """The index on disk no longer matches its data file, and building was disabled.

    Example:
        >>> import os, tempfile
        >>> from sjsonl import JSONLDataset
        >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
        >>> _ = open(path, "w").write("1\\n")
        >>> _ = JSONLDataset(path)                      # builds and saves the index
        >>> _ = open(path, "a").write("2\\n")          # the data changes
        >>> JSONLDataset(path, build_index_on_load=False)
        Traceback (most recent call last):
        ...
        sjsonl.errors.StaleIndexError: index ... is stale: data file was appended to (2 -> 4 bytes); ...
    """


class StaleDataError(SJSONLError):
    """A data file changed under an open dataset (replaced, truncated or rewritten), so the records its
    index describes can no longer be read. Raised, for example, in a worker process that received a
    pickled dataset when the file at the path is no longer the one the parent indexed: the worker never
    silently reads other data than its parent. Reopen the dataset to index the new version.

    Example:
        >>> import os, pickle, tempfile
        >>> from sjsonl import JSONLDataset
        >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
        >>> _ = open(path, "w").write("1\\n2\\n")
        >>> blob = pickle.dumps(JSONLDataset(path))
        >>> _ = open(path + ".new", "w").write("3\\n4\\n")
        >>> os.replace(path + ".new", path)          # a new version under the same name
        >>> pickle.loads(blob)[0]
        Traceback (most recent call last):
        ...
        sjsonl.errors.StaleDataError: ...d.jsonl changed after it was indexed: ...
    """


class IndexFileError(SJSONLError):
    """An index file is missing (with building disabled), unreadable or malformed.

    Example:
        >>> import os, tempfile
        >>> from sjsonl import JSONLDataset
        >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
        >>> _ = open(path, "w").write("1\\n")
        >>> JSONLDataset(path, build_index_on_load=False)
        Traceback (most recent call last):
        ...
        sjsonl.errors.IndexFileError: no index for ...; build it with `sjsonl index ...` or pass ...
    """


class RecordDecodeError(SJSONLError, ValueError):
    """A record is not valid JSON (or not valid UTF-8).

    Attributes name where it is: ``path``, ``line`` (1-based line number in the file, not the record
    number), ``offset`` (byte offset of the line's start), ``excerpt`` and the parser's ``reason``.

    Example:
        >>> import os, tempfile
        >>> from sjsonl import JSONLDataset
        >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
        >>> _ = open(path, "w").write('{"a": 1}\\n\\n{"a": \\n')
        >>> try:
        ...     JSONLDataset(path)[1]
        ... except RecordDecodeError as exc:
        ...     print(exc.line, exc.offset, exc.excerpt)
        3 10 '{"a": '
    """

    def __init__(self, path: str, line: int, offset: int, excerpt: str, reason: str) -> None:
        self.path, self.line, self.offset, self.excerpt, self.reason = path, line, offset, excerpt, reason
        super().__init__(
            f"{path}:{line}: invalid JSON record at byte offset {offset}: {reason}; line starts {excerpt}"
        )

    def __reduce__(self):  # keep the fields through pickling (DataLoader workers re-raise in the parent)
        return (type(self), (self.path, self.line, self.offset, self.excerpt, self.reason))


class MissingDependencyError(SJSONLError, ImportError):
    """An optional dependency is needed; the message names the extra to install.

    Example:
        >>> try:
        ...     require("no_such_module", "torch")
        ... except MissingDependencyError as exc:
        ...     print(exc)
        no_such_module is required for this feature: pip install 'sjsonl[torch]'
    """


def require(module: str, extra: str):
    """Import ``module`` or raise :class:`MissingDependencyError` naming ``pip install 'sjsonl[extra]'``."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(
            f"{module} is required for this feature: pip install 'sjsonl[{extra}]'"
        ) from exc
