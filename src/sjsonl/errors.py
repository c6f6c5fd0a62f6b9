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
        DataFileNotFoundError no such data file: /no/such/data.jsonl
    """

    def __init__(self, *args: object, message: str | None = None) -> None:
        # message=: how MindSpore's DataLoader rebuilds a worker's error in the parent (exc_type(message=…));
        # torch's calls exc_type(text). Both keep the type when the class accepts them.
        super().__init__(*((message,) if message is not None else args))

    def __str__(self) -> str:
        text = str(self.args[0]) if len(self.args) == 1 else super().__str__()
        # A worker's error re-raised in the parent (torch's DataLoader, MindSpore) is rebuilt from one string
        # holding the worker's traceback: its line breaks are the traceback's, kept so it stays readable.
        return text if _TRACEBACK in text else one_line(text)


_TRACEBACK = "Traceback (most recent call last):"


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


class DataFileNotFoundError(DataFileError, FileNotFoundError):
    """A data file (or every file a pattern could match) does not exist.

    Example:
        >>> from sjsonl import JSONLDataset
        >>> try:
        ...     JSONLDataset("/no/such/data.jsonl")
        ... except FileNotFoundError as exc:
        ...     print(type(exc).__name__, isinstance(exc, SJSONLError), exc)
        DataFileNotFoundError True no such data file: /no/such/data.jsonl
    """


class DataFilePermissionError(DataFileError, PermissionError):
    """A data file exists but may not be read.

    Example:
        >>> issubclass(DataFilePermissionError, PermissionError), str(DataFilePermissionError("no"))
        (True, 'no')
    """


class DataFileIsADirectoryError(DataFileError, IsADirectoryError):
    """A directory was given where a data file was expected.

    Example:
        >>> issubclass(DataFileIsADirectoryError, IsADirectoryError)
        True
    """


class InvalidArgumentError(SJSONLError, ValueError):
    """An argument with a value sjsonl refuses (an unknown configuration name, a bad pattern …).

    Example:
        >>> issubclass(InvalidArgumentError, ValueError), str(InvalidArgumentError("bad"))
        (True, 'bad')
    """


class SplitError(InvalidArgumentError):
    """An unknown split, or a split specification 🤗 would refuse (``"train[:101%]"``).

    Example:
        >>> from sjsonl import load_dataset
        >>> import os, tempfile
        >>> f = os.path.join(tempfile.mkdtemp(), "d.jsonl")
        >>> _ = open(f, "w").write("{}\\n")
        >>> try:
        ...     load_dataset(f, split="validation")
        ... except ValueError as exc:
        ...     print(type(exc).__name__, exc)
        SplitError Unknown split "validation". Should be one of ['train'].
    """


class ColumnNotFoundError(SJSONLError, KeyError):
    """A column that the data do not have.

    Example:
        >>> from sjsonl.records.schema import schema_of_records
        >>> try:
        ...     schema_of_records([{"a": 1}])["b"]
        ... except KeyError as exc:
        ...     print(type(exc).__name__, exc)
        ColumnNotFoundError no column 'b'; the columns are ['a']
    """

    def __str__(self) -> str:  # KeyError's own str() would show the message quoted, like a key
        return SJSONLError.__str__(self)


class ArgumentTypeError(SJSONLError, TypeError):
    """An argument of a type sjsonl cannot use (e.g. float dataset indices).

    Example:
        >>> issubclass(ArgumentTypeError, TypeError), str(ArgumentTypeError("bad"))
        (True, 'bad')
    """


class RecordIndexError(SJSONLError, IndexError):
    """A record (or position) number out of range; the message says the valid range.

    Example:
        >>> import os, tempfile
        >>> from sjsonl import JSONLDataset
        >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
        >>> _ = open(path, "w").write("1\\n")
        >>> JSONLDataset(path)[5]
        Traceback (most recent call last):
        ...
        sjsonl.errors.RecordIndexError: d.jsonl has 1 record: index 5 is out of range (valid: 0 or -1)
    """


def plural(n: int, noun: str) -> str:
    """``"1 record"``, ``"3 records"``.

    Example:
        >>> plural(1, "record"), plural(0, "batch"), plural(2, "entry")
        ('1 record', '0 batches', '2 entries')
    """
    if n == 1:
        return f"{n} {noun}"
    if noun.endswith(("s", "x", "ch", "sh")):
        return f"{n} {noun}es"
    if noun.endswith("y") and noun[-2:-1] not in "aeiou":
        return f"{n} {noun[:-1]}ies"
    return f"{n} {noun}s"


def out_of_range(index: int, n: int, what: str = "a dataset", unit: str = "record") -> RecordIndexError:
    """The error for ``index`` outside ``n`` items, naming ``what`` holds them and the valid range.

    Example:
        >>> str(out_of_range(7, 3, "train.jsonl"))
        'train.jsonl has 3 records: index 7 is out of range (valid: 0..2 or -3..-1)'
        >>> str(out_of_range(0, 0, "a mixture"))
        'a mixture has 0 records: index 0 is out of range (it is empty)'
    """
    if n == 0:
        valid = "it is empty"
    elif n == 1:
        valid = "valid: 0 or -1"
    else:
        valid = f"valid: 0..{n - 1} or -{n}..-1"
    return RecordIndexError(f"{what} has {plural(n, unit)}: index {index} is out of range ({valid})")


class UnsupportedArgumentError(ArgumentTypeError):
    """A keyword argument sjsonl cannot honour (it never ignores one silently).

    Example:
        >>> issubclass(UnsupportedArgumentError, TypeError)
        True
    """


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

    def __init__(
        self,
        path: str = "",
        line: int | None = None,
        offset: int | None = None,
        excerpt: str | None = None,
        reason: str | None = None,
        *,
        message: str | None = None,
    ) -> None:
        if message is not None:  # rebuilt from one string in a parent process (see SJSONLError)
            path, line = message, None
        self.path, self.line, self.offset, self.excerpt, self.reason = path, line, offset, excerpt, reason
        if line is None:
            # One string: how torch's DataLoader and MindSpore rebuild a worker's error in the parent
            # (exc_type(message)), so the error keeps its type there. The fields are then unknown.
            self.path = None  # type: ignore[assignment]
            super().__init__(path)
            return
        super().__init__(
            f"{path}:{line}: {self.what} at byte offset {offset}: {reason}; line starts {excerpt}"
        )

    what = "invalid JSON record"

    def __reduce__(self):  # keep the fields through pickling (DataLoader workers re-raise in the parent)
        if self.line is None:
            return (type(self), self.args)
        return (type(self), (self.path, self.line, self.offset, self.excerpt, self.reason))


class RecordFieldError(RecordDecodeError):
    """A record is valid JSON but not what was asked for: a field missing (``fields=``,
    ``missing="error"``) or of another type than the ``schema=`` says. ``reason`` names the field."""

    what = "record does not match"


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


class ArtifactWarning(UserWarning):
    """A file sjsonl keeps beside an index (bad lines, schema, seek points) failed its checks — corrupt, cut
    short, edited, or in a place others can write — and was ignored; what it held is recomputed."""


class IndexBuildError(SJSONLError):
    """Some files could not be indexed. ``failures`` maps each to its error; ``index_paths`` maps the
    files that were indexed to their index."""

    def __init__(
        self,
        failures: dict[str, BaseException] | str | None = None,
        index_paths: dict[str, str] | None = None,
        *,
        message: str | None = None,
    ) -> None:
        if message is not None or not isinstance(failures, dict):  # one string: relayed from a worker
            self.failures, self.index_paths = {}, {}
            super().__init__(message if message is not None else str(failures or ""))
            return
        index_paths = index_paths or {}
        self.failures, self.index_paths = failures, index_paths
        total = len(failures) + len(index_paths)
        listed = "; ".join(f"{path}: {exc}" for path, exc in failures.items())
        super().__init__(f"{len(failures)} of {total} files could not be indexed: {listed}")

    def __reduce__(self):
        if not self.failures and not self.index_paths:  # built from one string
            return (type(self), self.args)
        return (type(self), (self.failures, self.index_paths))


class SchemaMismatchError(SJSONLError, ValueError):
    """A row's value does not fit the representation its column was given from the sampled rows."""


class UntrustedIndexPlaceWarning(UserWarning):
    """An index place (directory or file) others can write was skipped for the private cache."""


class UncheckedStateWarning(UserWarning):
    """A resume state with nothing to check it against (torchdata's ``{"yielded": n}``) was taken as the
    loading object's own configuration: a state saved over another dataset, seed or layout cannot be told
    apart."""


class IndexNotSavedWarning(UserWarning):
    """An index could not be written anywhere (read-only places, a full disk, a file size limit): it
    serves this process from memory and is built again by the next one."""


class IndexPlaceWarning(UserWarning):
    """The index directory asked for (``index_dir=``, ``$SJSONL_INDEX_DIR``) could not be written (read-only,
    a full disk or quota, a file size limit): the index went to the private cache instead."""


class BadLineWarning(UserWarning):
    """``on_bad_lines="warn"``: lines were skipped (the message counts them and names the first)."""


class FeaturesMismatchError(SJSONLError, ValueError):
    """A record has a key the given ``features`` do not list (🤗 refuses such data too).

    Example:
        >>> from sjsonl.records.conform import conform_rows
        >>> try:
        ...     conform_rows(features={"a": None})({"a": 1, "b": 2})
        ... except ValueError as exc:
        ...     print(type(exc).__name__, exc)
        FeaturesMismatchError a record has column(s) ['b'] that features do not list (they list ['a'])
    """


class DocumentError(SJSONLError, ValueError):
    """A JSON document that cannot be indexed as rows: it ends inside its array, or ``field`` is
    missing or holds no list.

    Example:
        >>> from sjsonl.index.elements import scan_elements
        >>> scan_elements([b'{"a": 1}'], field="data")
        Traceback (most recent call last):
        ...
        sjsonl.errors.DocumentError: the JSON document has no top-level key 'data' (field='data')
    """
