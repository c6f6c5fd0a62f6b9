"""JSON documents as rows: a ``.json`` file holding one array (``[{"x": 1}, {"x": 2}]``, pretty-printed or
not), or the list under one key of a top-level object (🤗's ``load_dataset("json", field="data")``).

Each element is a record, read at random like a line: the index holds where every element starts (found by
the boundary scan of :mod:`sjsonl.index.elements`, saved and checked like any index), and a record is the
bytes from its start to the next one's, less the ``,`` between them.

Which files are documents:

- with ``field=``, every file (the rows are the list under that top-level key, as 🤗 reads them);
- without it, a ``.json`` file (compressed or not) whose first byte that is not whitespace is ``[`` — unless
  anything but whitespace follows that array (then it is JSON Lines whose records are arrays);
- never a ``.jsonl``/``.ndjson`` file, nor a ``.json`` file that starts with ``{`` (JSON Lines of objects;
  a top-level object is rows only under ``field=``).

Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "d.json")
    >>> _ = open(path, "w").write('[\\n  {"x": 1},\\n  {"x": 2}\\n]\\n')
    >>> f = open_data_file(path)
    >>> len(f), f.record(1), f.raw(0), f.layout
    (2, {'x': 2}, b'{"x": 1}', 'json-array')
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Iterator
from typing import Any

from sjsonl.data.source import Decoder, IndexedFile, iter_blocks
from sjsonl.errors import InvalidArgumentError, RecordDecodeError, SJSONLError
from sjsonl.index import line_number_at
from sjsonl.index.elements import ARRAY, element_bytes, first_byte, layout_tag, records_end
from sjsonl.records.decode import excerpt, loads, second_look
from sjsonl.storage import Storage, byte_view, suffix_of
from sjsonl.storage.atomic import write_batch
from sjsonl.storage.formats import format_of_name
from sjsonl.storage.zip import expand_archives

#: bytes read from the start of a ``.json`` file to see whether it opens an array
_HEAD = 4096


def is_json_name(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is named ``.json`` (under any compression suffix sjsonl reads).

    Example:
        >>> is_json_name("train.json"), is_json_name("s3://b/Train.JSON.gz"), is_json_name("t.jsonl")
        (True, True, False)
    """
    name = suffix_of(os.fspath(path))
    if format_of_name(name) is not None:
        name = os.path.splitext(name)[0]
    return name.endswith(".json")


def is_array_document(head: bytes) -> bool:
    """Whether a ``.json`` file starting with ``head`` (its first MiB) is one JSON array, judged without
    reading it all (for streams; the index decides on the whole file): it opens with ``[``, and its first
    line is not a whole JSON value followed by more (JSON Lines whose records are arrays).

    Example:
        >>> is_array_document(b'[\\n {"a": 1}\\n]'), is_array_document(b"[1]\\n[2]\\n")
        (True, False)
    """
    if first_byte(head) != b"[":
        return False
    line, newline, rest = head.partition(b"\n")
    if not newline or not rest.strip(b" \t\r\n"):
        return True
    try:
        loads(line)
    except ValueError:
        return True
    return False


def layouts_for(storage: Storage, field: str | None = None) -> tuple[str, ...]:
    """What the records of ``storage`` may be, the one to build first: ``""`` (lines), the elements of a
    JSON array (a ``.json`` file that opens with ``[``; it may still turn out to be lines of arrays), or
    the list under ``field``. The one rule :class:`DocumentFile` and :class:`~sjsonl.JSONLIndexer` share.

    Example:
        >>> import os, tempfile
        >>> from sjsonl.storage import open_storage
        >>> path = os.path.join(tempfile.mkdtemp(), "d.json")
        >>> _ = open(path, "w").write("[1, 2]")
        >>> layouts_for(open_storage(path)), layouts_for(open_storage(path), "rows")
        (('json-array', ''), ('json-field-last:rows',))
    """
    if field is not None:
        return (layout_tag(field),)
    if is_json_name(storage.path) and first_byte(storage.read(0, _HEAD)) == b"[":
        return (ARRAY, "")  # "": it may turn out to be lines of arrays
    return ("",)


def open_data_file(path: str | os.PathLike[str], *, field: str | None = None, **kwargs: Any) -> IndexedFile:
    """An :class:`~sjsonl.data.source.IndexedFile` for JSON Lines, a :class:`DocumentFile` for what may be a
    JSON document (a ``.json`` name, or ``field`` given). ``kwargs`` go to
    :class:`~sjsonl.data.source.IndexedFile`.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "d.json")
        >>> _ = open(path, "w").write('{"data": [[1], [2, 3]], "version": 2}')
        >>> open_data_file(path, field="data").record(1)
        [2, 3]
    """
    if field is None and not is_json_name(path):
        return IndexedFile(path, **kwargs)
    return DocumentFile(path, field=field, **kwargs)


def open_data_files(paths: Iterable[str | os.PathLike[str]], **kwargs: Any) -> list[IndexedFile]:
    """:func:`open_data_file` for each of ``paths``, a ``.zip`` standing for its data members (see
    :mod:`sjsonl.storage.zip`); ``kwargs`` as there (``index_path`` only for a single file).

    Example:
        >>> import os, tempfile, zipfile
        >>> path = os.path.join(tempfile.mkdtemp(), "d.zip")
        >>> with zipfile.ZipFile(path, "w") as z:
        ...     z.writestr("a.jsonl", "[1]\\n")
        ...     z.writestr("b.json", "[2, 3]")
        >>> [len(f) for f in open_data_files([path])]
        [1, 2]
    """
    expanded = expand_archives(paths)
    if kwargs.get("index_path") is not None and len(expanded) != 1:
        raise InvalidArgumentError("index_path names one index; it cannot serve several files")
    # The O(records) checks of each index are not made at open: opening costs O(files), not O(records).
    # One file: they run on a thread from the open, the first read waiting for them (an index that fails
    # them is rebuilt then) — unless the caller said not to build one: an unusable index is an error at
    # open then. Many files: each index is checked at the first read of its file. (Opening many on
    # threads measured slower: the work is mostly Python, under the GIL.) Their new indexes are written as
    # one batch: each directory is swept of killed writers' temp files once, not once per index.
    if len(expanded) > 1:
        with write_batch():
            return [open_data_file(p, defer_verify=True, **kwargs) for p in expanded]
    background = kwargs.get("build_index_on_load", True)
    return [open_data_file(expanded[0], defer_verify=background, verify_in_background=background, **kwargs)]


class _ElementView:
    """A byte view whose slices are elements: the ``,`` and whitespace after each dropped."""

    __slots__ = ("inner",)

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getitem__(self, key: slice) -> bytes:
        return element_bytes(self.inner[key])


class DocumentFile(IndexedFile):
    """A data file that may be a JSON document: its elements are the records (or its lines, when it is
    JSON Lines after all — ``layout`` says which: ``""`` for lines).

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "d.json")
        >>> _ = open(path, "w").write('[1, "two", {"three": 3}]')
        >>> list(DocumentFile(path).iter_records())
        [1, 'two', {'three': 3}]
    """

    def __init__(self, path: str | os.PathLike[str], *, field: str | None = None, **kwargs: Any) -> None:
        self.field = field
        super().__init__(path, layouts=self._layouts, **kwargs)
        self.end = records_end(self.storage.read, self.offsets, self.layout, self.end)

    def _layouts(self, storage: Storage) -> tuple[str, ...]:
        return layouts_for(storage, self.field)

    # ---- the read paths of IndexedFile, on elements (each defers to it for lines)
    def raw(self, i: int) -> bytes:
        data = super().raw(i)
        return element_bytes(data) if self.layout else data

    def hot_state(self) -> tuple[Any, memoryview, int, int]:
        hot = super().hot_state()
        if self.layout and not isinstance(hot[0], _ElementView):
            hot = self._hot = (_ElementView(hot[0]), *hot[1:])
        return hot

    def decode_spans(
        self,
        spans: Iterable[tuple[int, int]],
        decode: Decoder | None = None,
        *,
        buf: Any = None,
        base: int = 0,
    ) -> Iterator[Any]:
        if self.layout:
            buf = _ElementView(byte_view(self.storage) if buf is None else buf)
        return super().decode_spans(spans, decode, buf=buf, base=base)

    def iter_records(
        self, lo: int = 0, hi: int | None = None, decode: Decoder | None = None
    ) -> Iterator[Any]:
        if not self.layout:
            yield from super().iter_records(lo, hi, decode)
            return
        hi = self.n if hi is None else hi
        for buf, base, bounds in iter_blocks(self.storage, self.offsets, self.end, lo, hi):
            yield from self.decode_spans(itertools.pairwise(bounds), decode, buf=buf, base=base)

    def _slow_decode(self, start: int, end: int) -> Any:
        if not self.layout:
            return super()._slow_decode(start, end)
        data = element_bytes(byte_view(self.storage)[start:end])
        try:
            return second_look(data, self.allow_nan)
        except ValueError as exc:
            raise self.decode_error(start, data, str(exc)) from None

    def decode_error(
        self, start: int, data: bytes, reason: str, error: type = RecordDecodeError
    ) -> SJSONLError:
        if not self.layout:
            return super().decode_error(start, data, str(reason), error)
        line = line_number_at(self.storage, start)
        what = "invalid JSON element: " if error is RecordDecodeError else ""
        return error(self.path, line, start, excerpt(data), what + reason)
