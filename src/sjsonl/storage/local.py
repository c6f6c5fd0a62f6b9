"""Local files, pinned: a storage reads the file it opened first, whatever the path names later.

:class:`LocalFile` opens the file once, on construction, and keeps the descriptor: reads use ``pread``
on it (no shared file offset, so it is fork-safe), so a file replaced under the same name (``os.replace``
of a new version, an editor's save) goes on being read as the version that was indexed. :class:`MappedFile`
adds a read-only memory map of that descriptor for zero-copy slicing — the fast path for ``ds[i]``.

A pickled copy (what a spawned DataLoader or MindSpore worker gets) carries the path, the file's identity
(device, inode) and the stamp of the indexed version; the receiving process opens the path and checks
them before its first read. Another file at the path, or the same file truncated or rewritten, is a
:class:`~sjsonl.errors.StaleDataError` there — a worker never reads other data than its parent. A file
that only grew (appended to) is the same version for the records indexed.

Changes *in place* (truncation, rewriting the same file) cannot be pinned away. :class:`LocalFile` checks
after every read that the file still holds the indexed bytes (one ``fstat``; on a change, the head/tail
fingerprint tells an append from a rewrite, and the content hash an edit from a ``touch``) and raises
:class:`~sjsonl.errors.StaleDataError` otherwise, so such bytes are never returned. :class:`MappedFile`
(the default where the C extension was built) copies slices out of its map under a guard, so a page lost
to a truncation raises :class:`~sjsonl.errors.StaleDataError` instead of SIGBUS, and checks the version at
most every :data:`CHECK_SECONDS` (and at the start of every batch and block of iteration): an in-place
rewrite that keeps the size can be read for at most that long before it is noticed.

Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "wb").write(b'{"a": 1}\\n')
    >>> f = LocalFile(path)
    >>> f.size, f.read(0, 8)
    (9, b'{"a": 1}')
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import stat as stat_module
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from sjsonl.errors import DataFileError, StaleDataError
from sjsonl.storage.base import (
    DataStamp,
    data_file_error,
    fingerprint_of,
    iter_ranges,
    read_sequentially,
    resolve_path,
    stat_data_file,
)
from sjsonl.storage.content import content_hash
from sjsonl.storage.descriptors import BUDGET
from sjsonl.storage.pinned import PinnedReader

if TYPE_CHECKING:
    from sjsonl.storage._guarded import GuardedMap


def _compiled() -> Any:
    """The small C extension of guarded and descriptor-free maps, built where a C compiler was at install
    time (without it, data files are read with ``pread`` and index files mapped by Python's ``mmap``)."""
    try:
        from sjsonl.storage import _guarded
    except ImportError:
        return None
    return _guarded


_MAPS = _compiled()
#: Memory-mapped reads that raise instead of SIGBUS (:class:`MappedFile`), or None where not built.
GUARDED: type[GuardedMap] | None = None if _MAPS is None else _MAPS.GuardedMap


def map_readonly(fd: int, size: int) -> Any:
    """A read-only map of the first ``size`` bytes of ``fd`` with the buffer protocol (numpy views it in
    place), for index files. It keeps no descriptor (Python's ``mmap`` keeps a duplicate, so a thousand
    mapped indexes would hold a thousand open files): ``fd`` may be closed at once.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "x")
        >>> _ = open(path, "wb").write(b"abc")
        >>> fd = os.open(path, os.O_RDONLY); m = map_readonly(fd, 3); os.close(fd)
        >>> bytes(memoryview(m))
        b'abc'
    """
    if _MAPS is not None:
        return _MAPS.FileMap(fd, size)
    return mmap.mmap(fd, 0, access=mmap.ACCESS_READ) if size else b""


#: Seconds between version checks of a memory-mapped file while it is read (one fstat each): the longest
#: an in-place rewrite that keeps the file's size can go unnoticed by reads of single records.
CHECK_SECONDS = 0.1

_SPECIAL_TREES = ("/proc/", "/sys/")


def open_regular_file(path: str) -> tuple[int, os.stat_result]:
    """``(fd, fstat)`` of ``path`` opened read-only, refusing anything but a regular file — without
    blocking on a FIFO (checked before opening, and opened non-blocking in case it changes meanwhile).

    Example:
        >>> open_regular_file("/dev/zero")
        Traceback (most recent call last):
        ...
        sjsonl.errors.DataFileError: not a regular file (a character device): /dev/zero
    """
    st = stat_data_file(path)
    _require_regular(path, st)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except PermissionError:
        raise data_file_error(errno.EACCES, path) from None
    except FileNotFoundError:
        raise data_file_error(errno.ENOENT, path) from None
    try:
        st = os.fstat(fd)
        _require_regular(path, st)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def _special_devices() -> dict[int, str]:
    """The devices of the pseudo-file trees (procfs, sysfs), stat'ed once: a file on one of them is known
    by its ``st_dev`` whatever path (or link) led there, without resolving the path."""
    global _SPECIAL_DEVICES
    if _SPECIAL_DEVICES is None:
        found = {}
        for tree in _SPECIAL_TREES:
            try:
                found[os.stat(tree).st_dev] = tree
            except OSError:  # no /proc here (another OS): nothing to refuse
                pass
        _SPECIAL_DEVICES = found
    return _SPECIAL_DEVICES


_SPECIAL_DEVICES: dict[int, str] | None = None


def _require_regular(path: str, st: os.stat_result) -> None:
    mode = st.st_mode
    if stat_module.S_ISREG(mode):
        tree = _special_devices().get(st.st_dev)
        if tree is None and os.path.abspath(path).startswith(_SPECIAL_TREES):
            tree = next(t for t in _SPECIAL_TREES if os.path.abspath(path).startswith(t))  # e.g. cgroupfs
        if tree is not None:  # sizes there are 0 or made up: not data to index
            raise DataFileError(errno.EINVAL, f"not a regular file (a {tree[:-1]} pseudo-file): {path}")
        return
    kind = (
        "a FIFO"
        if stat_module.S_ISFIFO(mode)
        else "a character device"
        if stat_module.S_ISCHR(mode)
        else "a block device"
        if stat_module.S_ISBLK(mode)
        else "a socket"
        if stat_module.S_ISSOCK(mode)
        else "not a file"
    )
    raise DataFileError(errno.EINVAL, f"not a regular file ({kind}): {path}")


class LocalFile:
    """A local file, opened once and read with ``pread`` from that open file.

    ``pinned`` is the stamp of the version the index describes (set by the index layer); it is what a
    pickled copy checks the file against, and the size past which a short read is not a truncation.

    The descriptor is drawn from a budget (:mod:`.descriptors`): among thousands of files, the least
    recently used give theirs up and reopen by path on their next use, checked to be the same file and
    version. Code that reads the descriptor itself holds it (:meth:`holding`).

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
        >>> _ = open(path, "wb").write(b'[1]\\n[2]\\n')
        >>> f = LocalFile(path)
        >>> os.replace(f.path, f.path + ".old")      # the path no longer names this file ...
        >>> f.read(4, 7)                             # ... but it is still the file that is read
        b'[2]'
    """

    #: a read costs a syscall and a check: reading through a small gap is cheaper than a second read
    coalesce_gap = 64 << 10

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = resolve_path(path)
        self.pinned: DataStamp | None = None
        self._accepted: tuple[int, int, int] | None = None  # (size, mtime, ctime) seen to hold them
        self._identity: tuple[int, int] | None = None
        self._fd: int | None = None
        self._lock, self._holds = threading.Lock(), 0
        _ALL_FILES.add(self)
        self._open()

    def _open(self) -> int:
        """Open the path (first use, in a copy, or after the budget took the descriptor): it must be the
        file opened before, unchanged. The caller holds ``_lock`` (or owns the object alone)."""
        fd, st = open_regular_file(self.path)
        identity = (st.st_dev, st.st_ino)
        if self._identity is not None:  # reopened: the same file, and unchanged?
            try:
                self._check_same_version(identity, st, fd)
            except BaseException:
                os.close(fd)
                raise
        self._identity, self._fd = identity, fd
        BUDGET.opened(self)
        return fd

    @contextlib.contextmanager
    def holding(self) -> Iterator[int]:
        """The open descriptor, kept from the budget until the block ends (reopened first if it was given
        up): for code that reads it directly, such as the index scan's threads."""
        fd = self._hold()
        try:
            yield fd
        finally:
            self._release()

    def _hold(self) -> int:
        with self._lock:
            fd = self._fd if self._fd is not None else self._open()
            self._holds += 1
        return fd

    def _release(self) -> None:
        with self._lock:
            self._holds -= 1
        BUDGET.used(self)

    def give_up_descriptor(self) -> bool:
        """Close the descriptor for the budget, unless it is in use; whether it is closed now."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if self._holds:
                return False
            self._close_fd()
            return True
        finally:
            self._lock.release()

    def _check_same_version(self, identity: tuple[int, int], st: os.stat_result, fd: int) -> None:
        if identity != self._identity:
            raise self._stale("another file now has its name (replaced)")
        self._check_unchanged(st, fd)

    def _check_unchanged(self, st: os.stat_result, fd: int) -> None:
        """Raise unless the open file still holds the pinned version's bytes. Accepted states (size, mtime,
        ctime) are remembered, so the common case is one ``fstat`` and a comparison.

        - same size, mtime and ctime: unchanged;
        - grown: appended to, if the indexed bytes' head and tail are unchanged (checked again at each new
          size: a file under a writer is read while it grows);
        - same size, but another mtime or ctime (a ``touch``, ``chmod``, a rename, or an edit in place with
          its mtime set back): the content hash of the indexed bytes decides, where the index has one."""
        pinned = self.pinned
        state = (st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        if pinned is None or state == self._accepted:
            return
        if st.st_size < pinned.stored:
            raise self._stale(f"truncated ({pinned.stored} -> {st.st_size} bytes)")
        if state == (pinned.stored, pinned.mtime_ns, pinned.ctime_ns):
            self._accepted = state
            return
        if not pinned.fingerprint:  # pinned for a scan, before the bytes were hashed: any change counts
            raise self._stale("modified while it was read")
        reader = lambda lo, hi: os.pread(fd, hi - lo, lo)  # noqa: E731
        if (
            fingerprint_of(lambda ranges: [reader(lo, hi) for lo, hi in ranges], pinned.stored)
            != pinned.fingerprint
        ):
            raise self._stale("rewritten (the indexed bytes differ)")
        if st.st_size == pinned.stored:  # the same size, touched: only the bytes can say whether they changed
            if not pinned.content:
                raise self._stale("modified in place (its mtime or ctime changed, its size did not)")
            if content_hash(reader, pinned.stored) != pinned.content:
                raise self._stale("rewritten in place (the indexed bytes differ)")
        elif pinned.stored_size is None and _continues_last_line(reader, pinned.stored, st.st_size):
            raise self._stale("appended to, continuing its last line (indexed without a line ending)")
        self._accepted = state  # appended to, or only its status changed: the indexed records are intact

    def check_content(self) -> None:
        """:meth:`check_unchanged`, then the indexed bytes hashed again. A rewrite in place within the clock
        tick of the stamp keeps size, mtime and ctime alike, so before bytes that do not fit the index are
        blamed on it, the bytes themselves are compared (an error path: one pass over the file)."""
        self.check_unchanged()
        pinned = self.pinned
        if pinned is None or not pinned.content:
            return
        if self.content_hash(pinned.stored) != pinned.content:
            raise self._stale("rewritten in place (the indexed bytes differ)")

    def _stale(self, why: str) -> StaleDataError:
        return StaleDataError(f"{self.path} changed after it was indexed: {why}; reopen the dataset")

    def check_unchanged(self) -> None:
        """Raise :class:`~sjsonl.errors.StaleDataError` if the file was truncated or rewritten in place
        since it was indexed (one ``fstat`` when nothing changed). A replaced file cannot be seen here:
        this object goes on reading the version it opened (unless the budget took its descriptor)."""
        with self.holding() as fd:
            self._check_unchanged(os.fstat(fd), fd)

    def pin(self, stamp: DataStamp) -> None:
        """Record that the index describes ``stamp``'s version of this open file."""
        self.pinned = stamp
        self._accepted = None

    def stat(self) -> os.stat_result:
        with self.holding() as fd:
            return os.fstat(fd)

    @property
    def size(self) -> int:
        return self.stat().st_size

    def read(self, start: int, end: int) -> bytes:
        """``bytes[start:end]`` of the pinned version — checked after the read (one ``fstat``), so bytes
        of a file truncated or rewritten in place are never returned. The state the check finds must be
        one already accepted before the read, or one grown from it (appended to): a file rewritten and
        rewritten back passes the check with new times, and the bytes read while it changed are read again
        under the state just accepted (up to three times, then :class:`~sjsonl.errors.StaleDataError`)."""
        fd = self._hold()  # (not `holding()`: a generator context costs more than the read)
        try:
            for _ in range(3):
                data = os.pread(fd, end - start, start) if end > start else b""
                if self.pinned is None:
                    return data
                pinned = self.pinned
                known = self._accepted or (pinned.stored, pinned.mtime_ns, pinned.ctime_ns)
                st = os.fstat(fd)
                self._check_unchanged(st, fd)
                if (st.st_size, st.st_mtime_ns, st.st_ctime_ns) == known or st.st_size > known[0]:
                    return data  # (grown since: appended to, as _check_unchanged allows)
            raise self._stale("rewritten again and again while it was read")
        finally:
            self._release()

    def read_unchecked(self, start: int, end: int) -> bytes:
        """``bytes[start:end]`` as the file holds them now, with no version check (for the code that
        establishes the version: hashing, the index scan)."""
        with self.holding() as fd:
            return os.pread(fd, end - start, start) if end > start else b""

    def chunks(self, chunk_bytes: int) -> Iterator[bytes]:
        """The pinned version front to back, read with ``pread`` even when mapped (a scan of a file
        truncated under it gets an error, never SIGBUS)."""
        pinned = self.pinned
        for lo, hi in iter_ranges(pinned.stored if pinned is not None else self.size, chunk_bytes):
            yield LocalFile.read(self, lo, hi)

    def read_many(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        return read_sequentially(self, ranges)

    def fingerprint(self, size: int) -> str:
        """Hash of the first and last :data:`FINGERPRINT_SPAN` bytes of ``[0, size)`` (all of it if small)."""
        # read, not mapped: a map made now would not see the file grow
        return fingerprint_of(lambda ranges: [self.read_unchecked(lo, hi) for lo, hi in ranges], size)

    def stamp(self, *, fingerprint: bool = True) -> DataStamp:
        """Size, mtime and (unless ``fingerprint=False``) the head/tail hash of the open file as it is now."""
        st = self.stat()
        fp = self.fingerprint(st.st_size) if fingerprint else ""
        return DataStamp(
            st.st_size, st.st_mtime_ns, fp, ctime_ns=st.st_ctime_ns, file_id=f"{st.st_dev}:{st.st_ino}"
        )

    def content_hash(self, size: int) -> str:
        """The content hash (:mod:`sjsonl.storage.content`) of the first ``size`` bytes of the open file."""
        return content_hash(self.read_unchecked, size)

    def open_reader(self) -> PinnedReader:
        """A file object over the open file with a position of its own (for decompressors)."""
        return PinnedReader(self)

    def reopen(self) -> LocalFile:
        """The file the path names now (a new version after a replace), opened afresh."""
        return type(self)(self.path)

    def close(self) -> None:
        with self._lock:
            self._close_fd()

    def _close_fd(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
            BUDGET.closed(self)

    def __del__(self) -> None:
        # only the descriptor: a map (which holds its own) stays valid for slices still in use
        try:
            self._close_fd()
        except Exception:  # interpreter shutdown: os may be gone already
            pass

    # Pickling carries the path and what identifies the version; the receiving process reopens and checks.
    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "pinned": self.pinned, "_identity": self._identity}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._fd, self._accepted = None, None
        self._lock, self._holds = threading.Lock(), 0
        _ALL_FILES.add(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r})"


def _continues_last_line(read: Callable[[int, int], bytes], end: int, size: int) -> bool:
    """Whether bytes appended at ``end`` change the last line before it: it had no line ending, and what
    follows is more than the whitespace and ``\\n`` that would end it unchanged."""
    if end == 0 or read(end - 1, end) == b"\n":
        return False
    after = read(end, min(size, end + 4096)).lstrip(b" \t\r")
    return bool(after) and after[:1] != b"\n"


_ALL_FILES: weakref.WeakSet[LocalFile] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    # a lock or hold of a parent thread (a scan, a prefetch read) means nothing in the child
    for f in list(_ALL_FILES):
        f._lock, f._holds = threading.Lock(), 0


os.register_at_fork(after_in_child=_after_fork_in_child)


class MappedFile(LocalFile):
    """A :class:`LocalFile` also mapped read-only into memory: ``buffer()`` slices it, each slice a copy
    made under a guard (:class:`GUARDED`, a small C extension), so a page lost to a truncation in place
    raises :class:`~sjsonl.errors.StaleDataError` instead of killing the process with SIGBUS. The map also
    checks the file's version (one ``fstat``) at most every :data:`CHECK_SECONDS` while it is read, so an
    in-place rewrite that keeps the size is noticed within that time; batches and blocks of iteration
    check at their start as well. Made only where the extension was built (:func:`open_storage` falls
    back to :class:`LocalFile`, whose every read is checked).

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
        >>> _ = open(path, "wb").write(b'[1]\\n[2]\\n')
        >>> MappedFile(path).buffer()[4:7]
        b'[2]'
    """

    coalesce_gap = 0  # slicing a map costs nothing per range: never read through gaps

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._mm: Any = None
        super().__init__(path)

    def buffer(self) -> Any:
        """The file as a sliceable buffer: ``buf[a:b]`` is a copy of those bytes, made under the guard.

        The map covers the file as it was when first mapped; ``reopen()`` maps it again."""
        mm = self._mm
        if mm is None:
            if GUARDED is None:
                raise RuntimeError("MappedFile needs the compiled sjsonl.storage._guarded extension")
            with self.holding() as fd:  # the map outlives the descriptor, which the budget may take
                size = os.fstat(fd).st_size
                if self.pinned is not None and size < self.pinned.stored:  # cut short before we mapped it
                    raise self._stale(f"truncated ({self.pinned.stored} -> {size} bytes)")
                mm = self._mm = GUARDED(fd, size, version_check(self), CHECK_SECONDS)
        return mm

    def read(self, start: int, end: int) -> bytes:
        return self.buffer()[start:end]

    def close(self) -> None:
        self._mm = None  # unmapped when the last slice user lets go of it (views may hold it)
        super().close()

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._mm = None


def version_check(file: Any) -> Callable[[], None]:
    """``file.check_unchanged`` without a strong reference (the map it is given to is held by ``file``):
    a map's version check, for a local file or a remote one's sealed cache."""
    ref = weakref.ref(file)

    def check() -> None:
        alive = ref()
        if alive is not None:
            alive.check_unchanged()

    return check
