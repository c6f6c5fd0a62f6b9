"""Compressed data files read at random offsets: gzip through seek points, zstd in the seekable format.

Offsets are positions in the *decompressed* stream. Reaching one costs decompressing from the nearest
point where decompression can restart: for gzip, a seek point (indexed_gzip keeps one every
:data:`GZIP_SPACING` decompressed bytes, with the 32 KiB of history it needs); for seekable zstd, the start
of the frame (frames are independent; the seek table at the end of the file lists them).

The decompressor handles carry a position, so each process opens its own, lazily; pickling drops them and
a forked child reopens them (it never shares one with its parent). A gzip handle rebuilt in a new process
starts from the seek points already known — copied from the inherited handle after a fork, or read from
the ``.seekpoints`` file saved beside the index — instead of decompressing the file again.

Example:
    >>> import gzip, os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl.gz")
    >>> _ = open(path, "wb").write(gzip.compress(b'{"a": 1}\\n{"a": 2}\\n'))
    >>> f = GzipFile(LocalFile(path))
    >>> f.read(9, 17), f.size
    (b'{"a": 2}', 18)
"""

from __future__ import annotations

import atexit
import errno
import io
import os
import shutil
import threading
import weakref
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from sjsonl.errors import DataFileError, StaleDataError, require
from sjsonl.storage import gzip_build
from sjsonl.storage.base import DataStamp, read_sequentially
from sjsonl.storage.local import LocalFile
from sjsonl.storage.seekpoints import GZIP_SEEK_MAGIC, SavedPoints, check_gzip_points, seek_key
from sjsonl.storage.sidecar import encode_sidecar, warn_ignored

#: Decompressed bytes between gzip seek points. A random read decompresses half of this on average
#: (measured here: ~2 ms at 1 MiB, ~0.8 ms at 256 KiB), and every point keeps 32 KiB of history in memory
#: (3% of the data at 1 MiB, 12.5% at 256 KiB); 1 MiB keeps a large file's points affordable.
GZIP_SPACING = 1 << 20
#: Frame size :func:`to_seekable_zstd` writes: a random read decompresses up to one frame.
ZSTD_FRAME_BYTES = 256 << 10

NOT_SEEKABLE = (
    "{path} is not in the seekable zstd format (it has no seek table at its end): a plain zstd file, or a "
    "seekable one cut short (a partial copy — then copy it again). A plain file's records cannot be reached "
    "without decompressing everything before them, so sjsonl reads zstd only in the seekable format. "
    'Recompress it once, e.g. python -c "from sjsonl.storage.compressed import to_seekable_zstd; '
    "to_seekable_zstd('{path}', 'seekable.jsonl.zst')\" (pyzstd's SeekableZstdFile writer), or decompress "
    "it (zstd -d)."
)


#: Storages with an open decompressor in this process: closed at exit, before the interpreter finalizes —
#: a native reader (rapidgzip's, indexed_bzip2's) whose threads outlive finalization aborts the process.
_LIVE: weakref.WeakSet[_PerProcessHandle] = weakref.WeakSet()


@atexit.register
def _close_decompressors() -> None:
    for storage in list(_LIVE):
        storage.close_handle()


class _PerProcessHandle:
    """A reader handle per process, behind a lock: opened lazily, dropped on pickling, reopened after fork.

    The lock and handle are created together per process id, so a child never inherits a lock that some
    parent thread held at fork time, nor a handle whose position the parent moves."""

    source: Any
    path: str
    _state: tuple[int, threading.Lock, Any] | None
    _size: int | None  # decompressed size, once known

    def _handle(self) -> tuple[threading.Lock, Any]:
        state = self._state
        if state is None or state[0] != os.getpid():
            handle = self._open_handle(None if state is None else state[1:])
            state = self._state = (os.getpid(), threading.Lock(), handle)
            _LIVE.add(self)
        return state[1], state[2]

    def close_handle(self) -> None:
        """Close this process's decompressor now (its native threads with it); the next read opens one."""
        state, self._state = self._state, None
        if state is not None and state[0] == os.getpid():
            close = getattr(state[2], "close", None)
            if close is not None:
                try:
                    close()
                except Exception:  # closing is best effort: at exit, or after a failed read
                    pass

    def _open_handle(self, inherited: tuple[threading.Lock, Any] | None) -> Any:
        """A new handle for this process; ``inherited`` is the (lock, handle) of the parent, after a fork."""
        raise NotImplementedError

    def _compressed(self) -> Any:
        """What the decompressor reads: a file object of its own over the pinned local file (never the
        path again: a replaced file is not read) or over the remote object."""
        return self.source.open_reader() if isinstance(self.source, LocalFile) else self.source.open_file()

    def _failed(self, exc: BaseException) -> Exception:
        """The error for a failed decompression: stale data when the file changed under us (the
        decompressor may have wrapped our own error), else a corrupt-file error."""
        if isinstance(exc, StaleDataError):
            return exc
        check = getattr(self.source, "check_unchanged", None)
        if check is not None:
            try:
                check()
            except StaleDataError as stale:
                return stale
        return DataFileError(errno.EIO, f"cannot decompress {self.path}: {exc}")

    def pin(self, stamp: DataStamp) -> None:
        """Tie reads to the compressed bytes ``stamp`` describes (see :meth:`LocalFile.pin`)."""
        # stored_size stays set: the source holds the stored form of the data, not its lines
        self.source.pin(replace(stamp, size=stamp.stored, stored_size=stamp.stored))

    def read_many(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        return read_sequentially(self, ranges)  # type: ignore[arg-type]

    def chunks(self, chunk_bytes: int) -> Iterator[bytes]:
        """The decompressed data front to back, ``chunk_bytes`` at a time; a whole pass learns the size."""
        pos = 0
        while data := self.read(pos, pos + chunk_bytes):  # type: ignore[attr-defined]
            pos += len(data)
            yield data
        self._size = pos

    def stamp(self, *, fingerprint: bool = True) -> DataStamp:
        """The compressed bytes' stamp; ``size`` is ``-1``: the decompressed size is the index's to know."""
        s = self.source.stamp(fingerprint=fingerprint)
        return replace(s, size=-1, stored_size=s.size)

    def reset_handles(self) -> None:
        """Forget this process's decompressor (and what it learnt of the bytes), keeping the pinned file:
        after a scan that saw the file change, the next pass starts clean."""
        self.close_handle()

    def refresh(self) -> None:
        """Forget handles and sizes: the next read sees the file as it is now."""
        self.close_handle()
        self.source = self.source.reopen()

    def reopen(self) -> Any:
        self.refresh()
        return self

    def close(self) -> None:
        self.close_handle()
        self.source.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r})"


class GzipFile(_PerProcessHandle):
    """A gzip file (one or several members) read at random offsets through indexed_gzip seek points.

    Example:
        >>> import gzip, os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl.gz")
        >>> _ = open(path, "wb").write(gzip.compress(b"[1]\\n[2]\\n"))
        >>> GzipFile(LocalFile(path)).read(4, 7)
        b'[2]'
    """

    #: Reading through a gap costs decompressing it; a separate read costs half a spacing on average.
    coalesce_gap = GZIP_SPACING // 2

    def __init__(self, source: Any, *, build_backend: str | None = None) -> None:
        self._igz = require("indexed_gzip", "compress")
        self.source, self.path = source, source.path
        # who decompresses the index build (reads are always indexed_gzip's): see gzip_build
        self.build_backend = gzip_build.build_backend(build_backend)
        self._state = None
        self._size: int | None = None  # decompressed size, once known
        self._saved: SavedPoints | None = None  # seek points saved beside the index, for this data and index
        self._primed: int | None = None  # the process whose handle started from the saved points
        self._seek_size: int | None = None  # the decompressed size the index vouches for

    @property
    def size(self) -> int:
        if self._size is None:  # costs one full decompression (the index build learns it for free)
            lock, handle = self._handle()
            if handle is None:
                return 0
            try:
                with lock:
                    handle.build_full_index()
                    handle.raw.seek(0, os.SEEK_END)
                    self._size = handle.raw.tell()
            except (OSError, ValueError) as exc:
                raise self._failed(exc) from None
        return self._size

    def _new_handle(self) -> Any:
        # Reads go to .raw, straight to the decompressor: the BufferedReader around it would decompress
        # a whole buffer ahead of every small read; it is kept only because closing it closes .raw.
        return self._igz.IndexedGzipFile(
            fileobj=self._compressed(), spacing=GZIP_SPACING, drop_handles=False, buffer_size=4096
        )

    def _open_handle(self, inherited: tuple[threading.Lock, Any] | None) -> Any:
        if not self._stored():
            return None  # an empty file: no gzip stream to open
        handle = self._new_handle()
        points = self._inherited_points(inherited) if inherited is not None else None
        saved = points is None and self._saved is not None
        if saved:
            points = self._load_seek_file()
        if points:
            try:
                handle.import_index(fileobj=io.BytesIO(points))
            except Exception:  # unusable points only cost speed: they are rebuilt as reads go
                handle = self._new_handle()
            else:
                self._primed = os.getpid() if saved else None
        return handle

    @staticmethod
    def _inherited_points(inherited: tuple[threading.Lock, Any]) -> bytes | None:
        """The parent's seek points, copied after a fork — unless a parent thread was inside the handle
        when the process forked (its lock is then held for good here, and the points may be half-made)."""
        lock, handle = inherited
        if handle is None or not handle.raw.npoints or not lock.acquire(blocking=False):
            return None
        try:
            buf = io.BytesIO()
            handle.export_index(fileobj=buf)
            return buf.getvalue()
        finally:
            lock.release()

    def read(self, start: int, end: int) -> bytes:
        if end <= start:
            return b""
        try:
            return self._read(start, end)
        except DataFileError as exc:
            if not self.distrust_saved_state(f"decompressing from them failed: {exc}"):
                raise
        return self._read(start, end)  # from the start of the stream, as if no points had been saved

    def _read(self, start: int, end: int) -> bytes:
        try:
            for attempt in range(2):
                lock, handle = self._handle()
                if handle is None:
                    return b""
                with lock:
                    data = handle.raw.pread(end - start, start)
                if len(data) == end - start or self._size is None or start + len(data) >= self._size:
                    return data
                # Short of a size the index vouches for: zran's state went bad (a read of ours failed
                # inside it while the file changed). Check the file, then retry once with a new handle.
                check = getattr(self.source, "check_unchanged", None)
                if check is not None:
                    check()
                if attempt == 0:
                    self.reset_handles()
                    self._size = self._seek_size
            raise DataFileError(errno.EIO, f"cannot decompress {self.path}: it ends before byte {end}")
        except (OSError, ValueError) as exc:  # zran errors: not gzip, corrupt or truncated data
            raise self._failed(exc) from None

    def distrust_saved_state(self, why: str) -> bool:
        """After a failed read, or bytes that do not end lines where the index says records end: if this
        process's handle started from the saved points, stop using them (one warning) and say so — the
        caller reads again from the stream's start. Else ``False``."""
        if self._primed != os.getpid() or self._saved is None:
            return False
        warn_ignored(self._saved.path, why, self._saved.identity or why)  # once per version of the file
        self._saved = self._primed = None
        self.reset_handles()
        self._size = self._seek_size
        return True

    def chunks(self, chunk_bytes: int) -> Iterator[bytes]:
        """The decompressed data front to back; the pass also builds every seek point (kept for reads)."""
        return gzip_build.build_pass(self, chunk_bytes, GZIP_SPACING)  # read now: tests make points denser

    def _stored(self) -> int:
        """The compressed size this storage reads: the size pinned, not the size now."""
        pinned = getattr(self.source, "pinned", None)
        return pinned.stored if pinned is not None else self.source.stamp(fingerprint=False).size

    # ---- seek points saved beside the index (called by the index layer; format: .seekpoints)
    def export_seek_state(self, stamp: DataStamp, index_checksum: int = 0) -> bytes | None:
        """This process's seek points as a ``.seekpoints`` file for ``stamp`` and the index with CRC-32
        ``index_checksum`` (``None`` unless they cover the file)."""
        state = self._state
        if self._size is None or state is None or state[0] != os.getpid() or state[2] is None:
            return None
        buf = io.BytesIO()
        with state[1]:
            state[2].export_index(fileobj=buf)
        # the 32 KiB windows are text history: zlib level 1 shrinks them ~4x for ~15 ms per 64 MiB of data
        body = zlib.compress(buf.getvalue(), 1)
        return b"".join(encode_sidecar(GZIP_SEEK_MAGIC, seek_key("gzip", stamp, index_checksum), body))

    def attach_seek_state(
        self, path: str, stamp: DataStamp, index_checksum: int = 0, line_starts: Any = None
    ) -> None:
        """Use the seek points in ``path`` (if saved for ``stamp`` and this index, and they pass their
        checks) when a handle is opened. ``line_starts``, the index's record starts (of lines): check
        the points against them now — a process that opens a handle later uses that file only as it was
        then."""
        self._saved = SavedPoints(path, GZIP_SEEK_MAGIC, "gzip", stamp, index_checksum)
        self._size = self._seek_size = stamp.size
        if line_starts is not None and not self._saved.verify(self._points_check(stamp, line_starts)):
            self._saved = None

    @staticmethod
    def _points_check(stamp: DataStamp, line_starts: Any = None) -> Any:
        return lambda body: check_gzip_points(body, stamp.stored, stamp.size, line_starts)

    def _load_seek_file(self) -> bytes | None:
        """The saved points, or ``None`` when they are missing or not provably these data's: any
        doubt costs only speed (points are rebuilt as reads go), never a wrong record."""
        saved = self._saved
        return None if saved is None else saved.load(self._points_check(saved.stamp))

    def reset_handles(self) -> None:
        super().reset_handles()
        self._size = None

    def refresh(self) -> None:
        super().refresh()
        self._size = None
        self._saved = None

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("_state", "_igz")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._state = None
        self._igz = require("indexed_gzip", "compress")


class SeekableZstdFile(_PerProcessHandle):
    """A zstd file in the seekable format, read at random offsets frame by frame (pyzstd).

    A plain single-frame ``.zst`` is refused with a :class:`~sjsonl.errors.DataFileError` that says how
    to recompress it (:func:`to_seekable_zstd`).

    Example:
        >>> import os, tempfile
        >>> src = os.path.join(tempfile.mkdtemp(), "d.jsonl")
        >>> _ = open(src, "wb").write(b"[1]\\n[2]\\n")
        >>> to_seekable_zstd(src, src + ".zst")
        >>> f = SeekableZstdFile(LocalFile(src + ".zst"))
        >>> f.read(4, 7), f.size
        (b'[2]', 8)
    """

    _size: int  # from the seek table, known on open

    def __init__(self, source: Any) -> None:
        self._zstd = require("pyzstd", "compress")
        self.source, self.path = source, source.path
        self._state = None
        self._size = 0
        self.coalesce_gap = 0
        if source.stamp(fingerprint=False).size:  # empty: an empty dataset (the reader calls it truncated)
            _lock, handle = self._handle()
            frames, _stored, self._size = handle.seek_table_info
            # through a gap inside a frame costs nothing more: the read decompresses the frame anyway
            self.coalesce_gap = self._size // max(frames, 1) // 2

    @property
    def size(self) -> int:
        return self._size

    def _open_handle(self, inherited: tuple[threading.Lock, Any] | None) -> Any:
        compressed = self._compressed()
        if not self._zstd.SeekableZstdFile.is_seekable_format_file(compressed):
            raise DataFileError(errno.EINVAL, NOT_SEEKABLE.format(path=self.path))
        if not isinstance(compressed, str):
            compressed.seek(0)
        return self._zstd.SeekableZstdFile(compressed, "r")

    def read(self, start: int, end: int) -> bytes:
        end = min(end, self._size)
        if end <= start:
            return b""
        lock, handle = self._handle()
        try:
            with lock:
                handle.seek(start)
                return handle.read(end - start)
        except (OSError, ValueError, self._zstd.ZstdError) as exc:
            raise self._failed(exc) from None

    def reset_handles(self) -> None:
        self.__init__(self.source)  # type: ignore[misc]  # re-read the seek table too

    def refresh(self) -> None:
        super().refresh()
        self.__init__(self.source)  # type: ignore[misc]  # re-read the seek table

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("_state", "_zstd")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._state = None
        self._zstd = require("pyzstd", "compress")


def to_seekable_zstd(
    src: str | os.PathLike[str], dst: str | os.PathLike[str], *, frame_bytes: int = ZSTD_FRAME_BYTES
) -> None:
    """Write ``src`` (plain, ``.gz`` or any ``.zst``) to ``dst`` in the seekable zstd format.

    ``frame_bytes`` trades compression ratio for random-access speed:
    a read decompresses up to one frame.

    Example:
        >>> import os, tempfile
        >>> src = os.path.join(tempfile.mkdtemp(), "d.jsonl")
        >>> _ = open(src, "wb").write(b'{"a": 1}\\n')
        >>> to_seekable_zstd(src, src + ".zst")
        >>> SeekableZstdFile(LocalFile(src + ".zst")).read(0, 8)
        b'{"a": 1}'
    """
    pyzstd = require("pyzstd", "compress")
    name = os.fspath(src).lower()
    if name.endswith((".zst", ".zstd")):
        reader: Any = pyzstd.ZstdFile(src, "r")
    elif name.endswith((".gz", ".gzip")):
        import gzip

        reader = gzip.GzipFile(src, "rb")
    else:
        reader = open(src, "rb")  # noqa: SIM115  # closed by the with below
    with reader, pyzstd.SeekableZstdFile(dst, "w", max_frame_content_size=frame_bytes) as writer:
        shutil.copyfileobj(reader, writer, 1 << 20)
