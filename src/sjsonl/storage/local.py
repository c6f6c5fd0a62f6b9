"""Local uncompressed files: a read-only memory map.

:class:`LocalFile` maps the file lazily (no shared file offset, so it is fork-safe) and drops the map on
pickling, so each process that unpickles a dataset maps the file for itself. It is the one storage with
``buffer()``: the index scan and the hot read path slice the map directly.

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
import mmap
import os
from collections.abc import Sequence

from .base import (
    DataStamp,
    data_file_error,
    fingerprint_of,
    read_sequentially,
    resolve_path,
    stat_data_file,
)


class LocalFile:
    """A local file read through a lazily opened, read-only memory map.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
        >>> _ = open(path, "wb").write(b'[1]\\n[2]\\n')
        >>> LocalFile(path).buffer()[4:7]
        b'[2]'
    """

    __slots__ = ("_mm", "path")
    coalesce_gap = 0  # slicing a map costs nothing per range: never read through gaps

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
            raise data_file_error(errno.EACCES, self.path) from None
        except FileNotFoundError:
            raise data_file_error(errno.ENOENT, self.path) from None
        try:
            if os.fstat(fd).st_size == 0:
                return b""  # mmap refuses empty files
            return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)  # the map keeps its own reference

    def read(self, start: int, end: int) -> bytes:
        return self.buffer()[start:end]

    def read_many(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        return read_sequentially(self, ranges)

    def fingerprint(self, size: int) -> str:
        """Hash of the first and last :data:`FINGERPRINT_SPAN` bytes of ``[0, size)`` (all of it if small)."""
        buf = self.buffer()
        return fingerprint_of(lambda ranges: [buf[lo:hi] for lo, hi in ranges], size)

    def stamp(self, *, fingerprint: bool = True) -> DataStamp:
        """Size, mtime and (unless ``fingerprint=False``) the head/tail hash of the file as it is now."""
        st = self.stat()
        return DataStamp(st.st_size, st.st_mtime_ns, self.fingerprint(st.st_size) if fingerprint else "")

    def reopen(self) -> LocalFile:
        """A new map of the file as it is now (an existing map does not see the file grow)."""
        return LocalFile(self.path)

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
