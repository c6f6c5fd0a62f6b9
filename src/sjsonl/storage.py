"""Storage layer: a data file as byte ranges.

One small interface, :class:`Storage` — ``size``, ``read(start, end)`` and, where the bytes can be mapped,
``buffer()`` for zero-copy slicing. :class:`LocalFile` is the local implementation: a read-only memory map
(no shared file offset, so it is fork-safe) opened lazily and dropped on pickling, so each process that
unpickles a dataset maps the file for itself.

Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "wb").write(b'{"a": 1}\\n')
    >>> f = LocalFile(path)
    >>> f.size, f.read(0, 8)
    (9, b'{"a": 1}')
"""

from __future__ import annotations

import errno
import hashlib
import mmap
import os
import stat as stat_module
from typing import Protocol

from .errors import DataFileError

#: Bytes hashed at each end of a file for its fingerprint (small files are hashed whole).
FINGERPRINT_SPAN = 1 << 16


class Storage(Protocol):
    """What every storage backend offers the layers above it."""

    path: str

    @property
    def size(self) -> int: ...

    def read(self, start: int, end: int) -> bytes: ...


def resolve_path(path: str | os.PathLike[str]) -> str:
    """Absolute path with ``~`` expanded."""
    return os.path.abspath(os.path.expanduser(os.fspath(path)))


def stat_data_file(path: str) -> os.stat_result:
    """``os.stat`` of a data file, with one-line errors for the usual mistakes."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise DataFileError(errno.ENOENT, f"no such data file: {path}") from None
    except PermissionError:
        raise DataFileError(errno.EACCES, f"permission denied reading data file: {path}") from None
    if stat_module.S_ISDIR(st.st_mode):
        raise DataFileError(errno.EISDIR, f"expected a JSONL file, got a directory: {path}")
    return st


class LocalFile:
    """A local file read through a lazily opened, read-only memory map."""

    __slots__ = ("_mm", "path")

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = resolve_path(path)
        self._mm: mmap.mmap | bytes | None = None
        stat_data_file(self.path)

    def stat(self) -> os.stat_result:
        return stat_data_file(self.path)

    @property
    def size(self) -> int:
        return len(self.buffer())

    def buffer(self) -> mmap.mmap | bytes:
        """The whole file as a sliceable buffer (a memory map; ``b""`` for an empty file)."""
        mm = self._mm
        if mm is None:
            mm = self._mm = self._open()
        return mm

    def _open(self) -> mmap.mmap | bytes:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except PermissionError:
            raise DataFileError(errno.EACCES, f"permission denied reading data file: {self.path}") from None
        except FileNotFoundError:
            raise DataFileError(errno.ENOENT, f"no such data file: {self.path}") from None
        try:
            if os.fstat(fd).st_size == 0:
                return b""  # mmap refuses empty files
            return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)  # the map keeps its own reference

    def read(self, start: int, end: int) -> bytes:
        return self.buffer()[start:end]

    def fingerprint(self, size: int) -> str:
        """Hash of the first and last :data:`FINGERPRINT_SPAN` bytes of ``[0, size)`` (all of it if small)."""
        buf = self.buffer()
        h = hashlib.blake2b(digest_size=16)
        h.update(size.to_bytes(8, "little"))
        if size <= 2 * FINGERPRINT_SPAN:
            h.update(buf[:size])
        else:
            h.update(buf[:FINGERPRINT_SPAN])
            h.update(buf[size - FINGERPRINT_SPAN : size])
        return h.hexdigest()

    def close(self) -> None:
        mm, self._mm = self._mm, None
        if isinstance(mm, mmap.mmap):
            try:
                mm.close()
            except BufferError:  # a caller still holds a view; the map goes when they do
                pass

    # Pickling carries the path only; the receiving process maps the file itself.
    def __getstate__(self) -> dict:
        return {"path": self.path}

    def __setstate__(self, state: dict) -> None:
        self.path = state["path"]
        self._mm = None

    def __repr__(self) -> str:
        return f"LocalFile({self.path!r})"
