"""A read-only file object over a pinned local file, for the decompressors (indexed_gzip, zstd, bzip2, xz)
that want one: :class:`PinnedReader`, what ``LocalFile.open_reader()`` returns.
"""

from __future__ import annotations

import errno
import io
import os
from typing import Any, Protocol

from sjsonl.storage.base import DataStamp


class PinnedSource(Protocol):
    """What a :class:`PinnedReader` reads through (:class:`sjsonl.storage.local.LocalFile`, which opens it:
    named here so that this module does not import that one back)."""

    path: str
    pinned: DataStamp | None

    @property
    def size(self) -> int: ...
    def read(self, start: int, end: int) -> bytes: ...


#: Reads at the end of the pinned bytes a decompressor may make in a row before the end is an error.
MAX_EMPTY_READS = 64


class PinnedReader:
    """A read-only file object over a :class:`LocalFile`'s open file, with its own position.

    Decompressors read through it, so they too read the pinned version (never the path again), and two
    processes sharing the descriptor after a fork never move each other's offset. A read that comes up
    short of the indexed size means the file was truncated under us: an error, never an endless retry.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "d.bin")
        >>> _ = open(path, "wb").write(b"abcdef")
        >>> from sjsonl.storage.local import LocalFile
        >>> r = LocalFile(path).open_reader()
        >>> r.seek(2), r.read(3), r.tell()
        (2, b'cde', 5)
    """

    def __init__(self, source: PinnedSource) -> None:
        self.source, self.pos, self.closed = source, 0, False
        self.name = source.path
        self._empty_reads = 0

    def read(self, n: int = -1) -> bytes:
        pinned = self.source.pinned
        end = pinned.stored if pinned is not None else self.source.size  # bytes appended are not ours
        n = end - self.pos if n is None or n < 0 else min(n, end - self.pos)
        if n <= 0:
            # indexed_gzip asks again and again at the end of a stream cut mid-member (a gzip file pinned
            # while a writer appended to it) and would spin forever: after a few asks, the end is an error
            self._empty_reads += 1
            if self._empty_reads > MAX_EMPTY_READS:
                self._empty_reads = 0
                raise OSError(errno.EIO, f"{self.name} ends at byte {end} before its compressed stream does")
            return b""
        self._empty_reads = 0
        data = self.source.read(self.pos, self.pos + n)
        self.pos += len(data)
        return data

    def readinto(self, buf: Any) -> int:
        data = self.read(len(memoryview(buf)))
        memoryview(buf)[: len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        pinned = self.source.pinned
        size = pinned.stored if pinned is not None else self.source.size
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self.pos, os.SEEK_END: size}[whence]
        self.pos = max(0, base + offset)
        # a seek starts a new request: indexed_bzip2 seeks to the end and reads nothing there once per
        # request, which must not add up to the limit (zran's endless asks come without a seek)
        self._empty_reads = 0
        return self.pos

    def tell(self) -> int:
        return self.pos

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    def write(self, data: Any) -> int:  # present because some readers (indexed_bzip2) look it up
        raise io.UnsupportedOperation(f"{self.name} is read-only: sjsonl never writes data files")

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        raise OSError(errno.EBADF, "a pinned reader has no descriptor of its own")

    def close(self) -> None:
        self.closed = True

    def __enter__(self) -> PinnedReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
