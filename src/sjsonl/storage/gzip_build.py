"""The index build pass of a gzip file: decompressed by rapidgzip when installed, else by indexed_gzip;
either way it ends with every seek point in the indexed_gzip handle that serves random reads.

Building the index of a ``.gz`` reads it front to back once. rapidgzip inflates faster than zlib — on
this project's 2-core machine the index of 256 MiB of short records (a 57 MB ``.gz``) takes 0.84 s with
rapidgzip on one thread against 1.78 s with indexed_gzip, and ``gzip -dc | wc -l`` 1.62 s
(``benchmarks/bench_gzip.py``; medians) — and it
records seek points on the way, which it exports in indexed_gzip's own format. So when rapidgzip is
installed the build pass runs in rapidgzip, its points are imported into the indexed_gzip handle that
serves random reads (and that handle saves them beside the index, as before), and rapidgzip's reader,
which runs threads of its own, is closed when the pass ends: none outlives the pass, is pickled, or is
used across a fork. Random reads stay with indexed_gzip: from the same seek points rapidgzip read a
random record in 1.34 ms against 1.72 ms, not worth a handle with threads in every DataLoader worker
(rapidgzip aborts the interpreter at exit if one is left open, and a forked child inherits its parent's).

A file rapidgzip refuses but zlib reads (zero padding or other bytes after the last member) is read on by
indexed_gzip from where rapidgzip stopped, so both backends accept the same files with the same records.

Which decompressor builds: ``build_backend(choice)``, ``choice`` (or the ``SJSONL_GZIP_BUILD``
environment variable) being ``"auto"`` (rapidgzip when installed; the default), ``"rapidgzip"`` or
``"indexed_gzip"``. Remote files are always built through indexed_gzip (rapidgzip's threads would wait on
requests through Python file objects).

Example:
    >>> import gzip, io
    >>> build = ParallelPass(io.BytesIO(gzip.compress(b'{"a": 1}\\n' * 3)))
    >>> b"".join(build.chunks(4)), build.size
    (b'{"a": 1}\\n{"a": 1}\\n{"a": 1}\\n', 27)
    >>> build.points[:5]  # an index in indexed_gzip's format
    b'GZIDX'
"""

from __future__ import annotations

import errno
import io
import os
import threading
from collections.abc import Iterator
from typing import Any, Protocol

from sjsonl.errors import DataFileError, MissingDependencyError, StaleDataError, require
from sjsonl.storage.base import Storage
from sjsonl.storage.local import LocalFile


class GzipBeingBuilt(Protocol):
    """What the build pass needs of :class:`sjsonl.storage.compressed.GzipFile` (which calls it: named here
    so that this module, one layer of that class, does not import it back)."""

    path: str
    source: Storage
    build_backend: str
    _size: int | None
    _seek_size: int | None
    _state: Any

    def read(self, start: int, end: int) -> bytes: ...
    def _stored(self) -> int: ...
    def _compressed(self) -> Any: ...
    def _failed(self, exc: BaseException) -> Exception: ...
    def _handle(self) -> tuple[threading.Lock, Any]: ...
    def _new_handle(self) -> Any: ...


#: The environment variable that picks the decompressor of the index build (see :func:`build_backend`).
BUILD_ENV = "SJSONL_GZIP_BUILD"
BACKENDS = ("auto", "rapidgzip", "indexed_gzip")
#: rapidgzip threads for the build: on 2 cores a second thread made the bare pass slower (1.11 s against
#: 0.83 s for 256 MiB of short records, 1.99 s against 0.86 s of long ones), so one.
BUILD_THREADS = 1
#: What rapidgzip raises for data it cannot decompress (a truncated stream is a RuntimeError).
DECODE_ERRORS = (ValueError, RuntimeError, OSError)


def _memory_limited() -> bool:
    """Whether this process has an address-space or data limit (``ulimit -v``): rapidgzip crashes with
    SIGSEGV when an allocation fails there, where indexed_gzip raises MemoryError."""
    try:
        import resource
    except ImportError:
        return False
    for limit in (resource.RLIMIT_AS, resource.RLIMIT_DATA):
        soft = resource.getrlimit(limit)[0]
        if soft != resource.RLIM_INFINITY:
            return True
    return False


def build_backend(choice: str | None = None) -> str:
    """``"rapidgzip"`` or ``"indexed_gzip"``: the decompressor for a gzip index build.

    ``choice`` (else ``$SJSONL_GZIP_BUILD``, else ``"auto"``): ``"auto"`` takes rapidgzip when it is
    installed and the process has no memory limit (``ulimit -v``: rapidgzip crashes when an allocation
    fails, indexed_gzip raises MemoryError); ``"rapidgzip"`` requires it.

    Example:
        >>> build_backend("indexed_gzip")
        'indexed_gzip'
        >>> build_backend("zlib")
        Traceback (most recent call last):
        ...
        ValueError: SJSONL_GZIP_BUILD / build_backend must be auto, rapidgzip or indexed_gzip, not 'zlib'
    """
    chosen = choice or os.environ.get(BUILD_ENV, "") or "auto"
    if chosen not in BACKENDS:
        raise ValueError(
            f"{BUILD_ENV} / build_backend must be auto, rapidgzip or indexed_gzip, not {chosen!r}"
        )
    if chosen == "indexed_gzip" or (chosen == "auto" and _memory_limited()):
        return "indexed_gzip"
    try:
        require("rapidgzip", "compress")
    except MissingDependencyError:
        if chosen == "rapidgzip":
            raise
        return "indexed_gzip"
    return "rapidgzip"


class ParallelPass:
    """One front-to-back decompression of a gzip stream by rapidgzip that also records seek points.

    :meth:`chunks` yields the decompressed bytes; once it is exhausted, :attr:`size` is their total and
    :attr:`points` the seek points (about one per ``spacing`` decompressed bytes, each with its 32 KiB
    window) in indexed_gzip's export format. A decode error propagates from :meth:`chunks` as rapidgzip
    raised it (see :data:`DECODE_ERRORS`); an error of the file object (a
    :class:`~sjsonl.errors.StaleDataError`) propagates as it is.

    Example:
        >>> import gzip, io
        >>> build = ParallelPass(io.BytesIO(gzip.compress(b"[1]\\n") + gzip.compress(b"[2]\\n")))
        >>> list(build.chunks(1 << 20)), build.size
        ([b'[1]\\n[2]\\n'], 8)
    """

    def __init__(self, fileobj: Any, spacing: int = 1 << 20, threads: int = BUILD_THREADS) -> None:
        self._rapidgzip = require("rapidgzip", "compress")
        self.fileobj, self.spacing, self.threads = fileobj, spacing, threads
        self.size: int | None = None
        self.points: bytes | None = None

    def chunks(self, chunk_bytes: int) -> Iterator[bytes]:
        # chunk_size is rapidgzip's unit of work and its seek-point spacing in decompressed bytes
        reader = self._rapidgzip.RapidgzipFile(
            self.fileobj, parallelization=self.threads, chunk_size=self.spacing
        )
        opened_in = os.getpid()
        try:
            pos = 0
            while data := reader.read(chunk_bytes):
                pos += len(data)
                yield data
            buf = io.BytesIO()
            reader.export_index(buf, self._rapidgzip.IndexFormat.INDEXED_GZIP)
            self.size, self.points = pos, buf.getvalue()
        finally:
            # rapidgzip aborts the interpreter at exit when a reader is left open, so close it now; but
            # never in a forked child (its threads live only in the parent: joining them would hang)
            if os.getpid() == opened_in:
                reader.close()


def build_pass(gz: GzipBeingBuilt, chunk_bytes: int, spacing: int) -> Iterator[bytes]:
    """``gz``'s decompressed bytes front to back, ``chunk_bytes`` at a time (what
    :meth:`GzipFile.chunks <sjsonl.storage.compressed.GzipFile.chunks>` yields). The pass leaves ``gz``
    knowing its decompressed size and holding every seek point (about one per ``spacing`` bytes); it refuses a
    truncated file.

    Example:
        >>> import gzip, os, tempfile
        >>> from sjsonl.storage.compressed import GzipFile
        >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl.gz")
        >>> _ = open(path, "wb").write(gzip.compress(b"[1]\\n[2]\\n"))
        >>> for backend in ("rapidgzip", "indexed_gzip"):
        ...     f = GzipFile(LocalFile(path), build_backend=backend)
        ...     print(backend, b"".join(build_pass(f, 1 << 20, 1 << 20)), f.size)
        rapidgzip b'[1]\\n[2]\\n' 8
        indexed_gzip b'[1]\\n[2]\\n' 8
    """
    pos = 0
    if gz.build_backend == "rapidgzip" and isinstance(gz.source, LocalFile) and gz._stored():
        build = ParallelPass(gz._compressed(), spacing)
        try:
            for data in build.chunks(chunk_bytes):
                pos += len(data)
                yield data
        except DECODE_ERRORS as exc:
            if isinstance(failed := gz._failed(exc), StaleDataError):
                raise failed from None
            # rapidgzip refuses what zlib may read (bytes after the last member): indexed_gzip decides,
            # going on from here (it decompresses up to here again, making its own points on the way)
        if build.points is not None and _adopt_points(gz, build.points):
            gz._size = gz._seek_size = pos
            return _check_trailer(gz, pos)
    while data := gz.read(pos, pos + chunk_bytes):
        pos += len(data)
        yield data
    gz._size = gz._seek_size = pos
    lock, handle = gz._handle()
    if handle is not None and pos:
        try:
            with lock:  # zran adds points up to where reads start; a seek to the end covers the rest
                handle.raw.seek(pos - 1)
        except (OSError, ValueError) as exc:
            raise gz._failed(exc) from None
        _check_trailer(gz, pos)


def _adopt_points(gz: GzipBeingBuilt, points: bytes) -> bool:
    """Give ``gz`` a handle for this process that starts from ``points`` (a whole pass's, in indexed_gzip's
    format); ``False`` if indexed_gzip will not import them (then it makes the points itself)."""
    handle = gz._new_handle()
    try:
        handle.import_index(fileobj=io.BytesIO(points))
    except Exception:  # slower, never wrong: the caller reads the file through indexed_gzip instead
        return False
    gz._state = (os.getpid(), threading.Lock(), handle)
    return True


def _check_trailer(gz: GzipBeingBuilt, size: int) -> None:
    """Refuse a gzip file cut short (a partial download): zran reads it without complaint, and rapidgzip
    only with a warning on stderr.

    A complete file ends with its last member's length mod 2**32, which cannot exceed the total;
    the last 4 bytes of a cut deflate stream are arbitrary, so they almost always do (unless the
    data passes 4 GiB, where this check gives up)."""
    stored = gz.source.stamp(fingerprint=False).size
    isize = int.from_bytes(gz.source.read(stored - 4, stored), "little") if stored >= 4 else 0
    if size < 2**32 and isize > size:
        raise DataFileError(errno.EIO, f"{gz.path} looks truncated: its gzip trailer is missing")
