"""What every storage shares: the :class:`Storage` interface, :class:`DataStamp`, path helpers, byte views.

Example:
    >>> view = RangeView(MemoryFile(b'{"a": 1}\\n'))
    >>> view[0:8]
    b'{"a": 1}'
    >>> DataStamp(9, 0, "f").describe_change(DataStamp(12, 0, "f"))
    'data file was appended to (9 -> 12 bytes)'
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat as stat_module
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

from sjsonl.errors import (
    DataFileError,
    DataFileIsADirectoryError,
    DataFileNotFoundError,
    DataFilePermissionError,
)

#: Bytes hashed at each end of a file for its fingerprint (small files are hashed whole).
FINGERPRINT_SPAN = 1 << 16


@dataclass(frozen=True)
class DataStamp:
    """What an index remembers of its data, to tell whether it still matches.

    ``size`` is the number of bytes the offsets address — the *decompressed* size for ``.gz``/``.zst``
    (``-1`` in a stamp taken without decompressing). ``stored_size`` is set only when the stored bytes
    differ from those (compressed files); ``etag`` only for remote objects that report one. ``mtime_ns``
    is ``0`` where the storage reports no modification time.

    For local files, ``ctime_ns`` and ``file_id`` (device and inode) are what ``os.utime`` cannot set back:
    an edit whose mtime was restored still changes the ctime. ``content`` is the hash of all ``size``
    bytes (:mod:`sjsonl.storage.content`) where the index build computed it (plain local files): it tells
    a status change that kept the bytes (``chmod``, a hard link, a rename) from an edit, and proves that
    the indexed bytes of a file that grew are untouched.

    Example:
        >>> old = DataStamp(100, 5, "ab", stored_size=40)
        >>> old.describe_change(DataStamp(-1, 5, "ab", stored_size=40)) is None  # same compressed file
        True
        >>> DataStamp(9, 5, "ab", ctime_ns=7).describe_change(DataStamp(9, 5, "ab", ctime_ns=8))
        "data file's status changed (ctime): permissions, links, a rename, or an edit with its mtime set back"
    """

    size: int
    mtime_ns: int
    fingerprint: str
    stored_size: int | None = None
    etag: str = ""
    ctime_ns: int = 0
    file_id: str = ""
    content: str = ""

    @property
    def stored(self) -> int:
        """Bytes as stored (compressed size for compressed files)."""
        return self.size if self.stored_size is None else self.stored_size

    def describe_change(self, other: DataStamp, *, content: bool = True) -> str | None:
        """Why ``other`` (the data now) differs from this stamp (the data indexed), or ``None``.

        With ``content=False`` the fingerprint is not compared (``other`` was taken without one). The
        content hash is never compared here (a stamp of the data now has none): see :meth:`status_only`."""
        if other.stored != self.stored:
            verb = "appended to" if other.stored > self.stored else "truncated"
            return f"data file was {verb} ({self.stored} -> {other.stored} bytes)"
        if other.mtime_ns != self.mtime_ns:
            return "data file was modified (mtime changed)"
        if other.etag != self.etag:
            return f"data object was replaced (ETag {self.etag} -> {other.etag})"
        if content and other.fingerprint != self.fingerprint:
            return "data file content changed (fingerprint differs)"
        if other.file_id != self.file_id:
            return "data file was replaced (another file now has its name)"
        if other.ctime_ns != self.ctime_ns:
            return (
                "data file's status changed (ctime): permissions, links, a rename, or an edit with its "
                "mtime set back"
            )
        return None

    def status_only(self, other: DataStamp) -> bool:
        """Whether ``other`` differs from this stamp only where a change of status (``chmod``, a link, a
        rename, a copy with its times kept) shows, not its bytes: the content hash decides.

        Example:
            >>> DataStamp(9, 5, "ab", ctime_ns=7).status_only(DataStamp(9, 5, "ab", ctime_ns=8))
            True
        """
        same_bytes = (other.stored, other.mtime_ns, other.etag) == (self.stored, self.mtime_ns, self.etag)
        return same_bytes and (other.ctime_ns, other.file_id) != (self.ctime_ns, self.file_id)

    def same_bytes(self, other: DataStamp) -> bool:
        """Whether both stamps describe the same bytes (whatever their file's ctime or inode now).

        Example:
            >>> DataStamp(9, 5, "ab", ctime_ns=7).same_bytes(DataStamp(9, 5, "ab", ctime_ns=8))
            True
        """
        return replace(self, ctime_ns=0, file_id="") == replace(other, ctime_ns=0, file_id="")

    def without_fingerprint(self) -> DataStamp:
        return replace(self, fingerprint="", content="")

    def to_dict(self) -> dict[str, Any]:
        # Fields at their defaults are left out (remote and in-memory data have no ctime or inode).
        d = asdict(self)
        defaults = {"stored_size": None, "etag": "", "ctime_ns": 0, "file_id": "", "content": ""}
        for key, default in defaults.items():
            if d[key] == default:
                del d[key]
        return d


@runtime_checkable
class Storage(Protocol):
    """What every storage backend offers the layers above it.

    ``path`` names the data (absolute local path or URL); ``size`` is the number of logical bytes;
    ``read(start, end)`` returns ``bytes[start:end]`` of them. ``pin(stamp)`` ties every later read to
    the version ``stamp`` describes (the one the index was built from): a read that would return bytes
    of another version raises :class:`~sjsonl.errors.StaleDataError` instead. Backends that can be
    memory-mapped also offer ``buffer()`` (zero-copy slicing); the others offer ``chunks()`` for a
    sequential scan.
    ``coalesce_gap`` is the largest gap between two wanted ranges that is cheaper to read through than to
    skip with a second read (0: never merge). ``read_many`` may fetch several ranges concurrently; a storage
    whose ``reads_in_windows`` is true (remote objects) is read in windows when an order is iterated, and
    where ``fetches_ahead`` is true too, the next windows are fetched while one is decoded
    (:mod:`sjsonl.storage.ahead`).

    Example:
        >>> isinstance(MemoryFile(b"[1]\\n"), Storage)
        True
    """

    path: str
    coalesce_gap: int

    @property
    def size(self) -> int: ...

    def read(self, start: int, end: int) -> bytes: ...

    def read_many(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]: ...

    def stamp(self, *, fingerprint: bool = True) -> DataStamp: ...

    def pin(self, stamp: DataStamp) -> None: ...

    def reopen(self) -> Storage: ...

    def close(self) -> None: ...


#: between a zip archive's path and a member's name (``train.zip::part/1.jsonl``, :mod:`sjsonl.storage.zip`)
MEMBER_SEP = "::"


def split_member(path: str) -> tuple[str, str | None]:
    """``(archive, member)`` for ``a.zip::m.jsonl``; ``(path, None)`` for anything else.

    Example:
        >>> split_member("/d/train.zip::part/1.jsonl"), split_member("/d/x.jsonl")
        (('/d/train.zip', 'part/1.jsonl'), ('/d/x.jsonl', None))
        >>> split_member("/d/T.Zip::a.jsonl")
        ('/d/T.Zip', 'a.jsonl')
    """
    cut = path.lower().find(".zip" + MEMBER_SEP)
    if cut < 0:
        return path, None
    return path[: cut + 4], path[cut + 4 + len(MEMBER_SEP) :]


def resolve_path(path: str | os.PathLike[str]) -> str:
    """Absolute path with ``~`` expanded; of a zip member, the archive's path is, and the member's name is
    kept as it is (a name, not a path: ``a.zip::../x.jsonl`` is not ``x.jsonl`` beside the archive).

    Example:
        >>> resolve_path("/data/../data/x.jsonl"), resolve_path("/data/../d/a.zip::../x.jsonl")
        ('/data/x.jsonl', '/d/a.zip::../x.jsonl')
    """
    archive, member = split_member(os.path.expanduser(os.fspath(path)))
    if member is None:
        return os.path.abspath(archive)
    return f"{os.path.abspath(archive)}{MEMBER_SEP}{member}"


def has_glob_magic(pattern: str) -> bool:
    """Whether ``pattern`` is a glob (``*``, ``?`` or ``[``) rather than one path.

    Example:
        >>> has_glob_magic("data/*.jsonl"), has_glob_magic("data/train.jsonl")
        (True, False)
    """
    return any(c in pattern for c in "*?[")


def is_url(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a URL (``protocol://…``) rather than a local path.

    Example:
        >>> is_url("s3://bucket/train.jsonl"), is_url("/data/train.jsonl")
        (True, False)
    """
    return isinstance(path, str) and "://" in path


def suffix_of(path: str) -> str:
    """The lower-cased name of ``path`` without a URL's query string (for picking a codec).

    Example:
        >>> suffix_of("https://host/Train.JSONL.GZ?token=1")
        '/train.jsonl.gz'
    """
    return (urlsplit(path).path if is_url(path) else path).lower()


_FILE_ERRORS = {
    errno.ENOENT: "no such data file: {path}",
    errno.EACCES: "permission denied reading data file: {path}",
    errno.EISDIR: "expected a JSONL file, got a directory: {path}",
}


_FILE_ERROR_TYPES = {
    errno.ENOENT: DataFileNotFoundError,
    errno.EACCES: DataFilePermissionError,
    errno.EISDIR: DataFileIsADirectoryError,
}


def data_file_error(code: int, path: str) -> DataFileError:
    """The one-line error for a data file that is missing (``ENOENT``), unreadable (``EACCES``) or a
    directory (``EISDIR``) — the same words for every storage, and the matching built-in type too
    (``FileNotFoundError``, ``PermissionError``, ``IsADirectoryError``; all are :class:`DataFileError`).

    Example:
        >>> import errno
        >>> exc = data_file_error(errno.ENOENT, "/x.jsonl")
        >>> str(exc), isinstance(exc, FileNotFoundError), exc.errno == errno.ENOENT
        ('no such data file: /x.jsonl', True, True)
    """
    return _FILE_ERROR_TYPES.get(code, DataFileError)(code, _FILE_ERRORS[code].format(path=path))


def stat_data_file(path: str) -> os.stat_result:
    """``os.stat`` of a data file, with one-line errors for the usual mistakes.

    Example:
        >>> stat_data_file("/no/such/file.jsonl")
        Traceback (most recent call last):
        ...
        sjsonl.errors.DataFileNotFoundError: no such data file: /no/such/file.jsonl
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise data_file_error(errno.ENOENT, path) from None
    except PermissionError:
        raise data_file_error(errno.EACCES, path) from None
    if stat_module.S_ISDIR(st.st_mode):
        raise data_file_error(errno.EISDIR, path)
    return st


def fingerprint_of(read_many: Callable[[Sequence[tuple[int, int]]], list[bytes]], size: int) -> str:
    """Hash of the first and last :data:`FINGERPRINT_SPAN` bytes of ``[0, size)`` (all of it if small).

    ``read_many`` fetches both ends in one call (concurrently, for remote storage).

    Example:
        >>> fingerprint_of(MemoryFile(b"abc").read_many, 3) == fingerprint_of(MemoryFile(b"abd").read_many, 3)
        False
    """
    h = hashlib.blake2b(digest_size=16)
    h.update(size.to_bytes(8, "little"))
    if size <= 2 * FINGERPRINT_SPAN:
        ranges = [(0, size)]
    else:
        ranges = [(0, FINGERPRINT_SPAN), (size - FINGERPRINT_SPAN, size)]
    for part in read_many(ranges):
        h.update(part)
    return h.hexdigest()


class RangeView:
    """A storage seen as a sliceable buffer: ``view[start:end]`` is ``storage.read(start, end)``.

    Lets the read paths written for a memory map (``buf[start:end]``) serve every other storage too.

    Example:
        >>> RangeView(MemoryFile(b"hello"))[1:4]
        b'ell'
    """

    __slots__ = ("read",)

    def __init__(self, storage: Storage) -> None:
        self.read = storage.read

    def __getitem__(self, key: slice) -> bytes:
        return self.read(key.start, key.stop)


def byte_view(storage: Storage) -> Any:
    """``storage.buffer()`` where the storage has one (a memory map), else a :class:`RangeView`.

    Example:
        >>> type(byte_view(MemoryFile(b"x"))).__name__
        'RangeView'
    """
    buffer = getattr(storage, "buffer", None)
    return buffer() if buffer is not None else RangeView(storage)


def count_newlines(storage: Storage, lo: int, hi: int) -> int:
    """How many ``\\n`` bytes ``[lo, hi)`` of ``storage`` holds: counted in place in a memory map (under its
    guard), else read in pieces (for compressed or remote data that is a pass over the range).

    Example:
        >>> count_newlines(MemoryFile(b"1\\n\\n2\\n"), 0, 3)
        2
    """
    buffer = getattr(storage, "buffer", None)
    if buffer is not None:
        return int(buffer().count_newlines(lo, hi))
    step = 8 << 20
    return sum(storage.read(a, min(hi, a + step)).count(b"\n") for a in range(lo, hi, step))


def read_sequentially(storage: Storage, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
    """``read_many`` for storages without concurrent reads.

    Example:
        >>> read_sequentially(MemoryFile(b"abcdef"), [(0, 2), (4, 6)])
        [b'ab', b'ef']
    """
    return [storage.read(start, end) for start, end in ranges]


def iter_ranges(size: int, step: int) -> Iterator[tuple[int, int]]:
    """``[lo, hi)`` pieces of ``[0, size)``, ``step`` bytes each (the last may be shorter).

    Example:
        >>> list(iter_ranges(10, 4))
        [(0, 4), (4, 8), (8, 10)]
    """
    for lo in range(0, size, step):
        yield lo, min(size, lo + step)


class MemoryFile:
    """An in-memory storage for examples and tests of the layers above (not mappable).

    Example:
        >>> MemoryFile(b"abc").read(1, 3)
        b'bc'
    """

    coalesce_gap = 0

    def __init__(self, data: bytes, path: str = "memory://data.jsonl") -> None:
        self.data, self.path = data, path

    @property
    def size(self) -> int:
        return len(self.data)

    def read(self, start: int, end: int) -> bytes:
        return self.data[start:end]

    def read_many(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        return read_sequentially(self, ranges)

    def chunks(self, chunk_bytes: int) -> Iterator[bytes]:
        for lo, hi in iter_ranges(len(self.data), chunk_bytes):
            yield self.data[lo:hi]

    def stamp(self, *, fingerprint: bool = True) -> DataStamp:
        fp = fingerprint_of(self.read_many, self.size) if fingerprint else ""
        return DataStamp(self.size, 0, fp)

    def pin(self, stamp: DataStamp) -> None:
        pass  # bytes in memory cannot change

    def reopen(self) -> MemoryFile:
        return self

    def close(self) -> None:
        pass
