"""Find where every record starts: a vectorised newline scan in fixed-size chunks, run on several threads.

A record is a non-blank line. Only the byte ``\\n`` ends a line; a line holding nothing but JSON whitespace
(space, tab, ``\\r``) is blank and is not a record. A UTF-8 BOM at the start of the file is skipped.

Each chunk's newlines are found by a small C extension (``_newlines.c``: one vector pass, offsets
written straight into the result in their final width, the GIL released; it also counts the lines that
open with whitespace or a newline, so a chunk with none skips the blank-line check) when it was built,
else by numpy (``np.equal`` and ``np.flatnonzero``, which release the GIL too); ``$SJSONL_SCAN=numpy``
forces the numpy scan. Both give the same offsets. Threads scale either way; measured on this machine
they beat processes (no result pickling, no second map), see ``benchmarks/``.

Three drivers share one chunk routine (:meth:`_ChunkScanner.scan`): :func:`scan_file` over an open file
(chunks read with ``pread`` in parallel threads — a file is never mapped for the scan, so one truncated
under it gives a short read, not SIGBUS), :func:`scan_record_starts` over a buffer, and
:func:`scan_stream` over a sequence of chunks read in order (compressed and remote data, where the bytes
exist only as they are read). What a chunk cannot
decide alone — the first byte of a line that starts just past its end, whether a line that opens with
whitespace is blank — it looks up with small reads, or, for a stream, in chunks read ahead. Lines that
open with whitespace are checked a few bytes at a time for all of them at once (vectorised), so blank
``\\r\\n`` lines or indented records cost no per-line Python work.

Example:
    >>> import numpy as np
    >>> scan_record_starts(b'{"a":1}\\n\\n  \\r\\n[2]\\n"x"').tolist()
    [0, 13, 17]
    >>> offsets, size = scan_stream([b'{"a":1}\\n\\n  ', b'\\r\\n[2]\\n"x"'])
    >>> offsets.tolist(), size
    ([0, 13, 17], 20)
"""

from __future__ import annotations

import collections
import mmap
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import overload

import numpy as np

from sjsonl.storage.content import LEAF_BYTES, leaf_digest, leaf_digests


def _native():
    """The compiled newline scan (``sjsonl.index._newlines``), unless ``$SJSONL_SCAN=numpy`` asks for the
    numpy scan or the extension was not built (no C compiler at install time)."""
    if os.environ.get("SJSONL_SCAN", "").lower() == "numpy":
        return None
    try:
        from sjsonl.index import _newlines  # type: ignore[attr-defined]
    except ImportError:
        return None
    return _newlines


#: The compiled scan in use, or None for the numpy one; both give the same offsets.
NATIVE = _native()

CHUNK_BYTES = 4 << 20  # page-aligned; large enough to amortise per-chunk overhead, small enough for cache
#: Chunk size when a file is read for the scan: the copy then stays in cache for the passes over it
#: (measured here: 2 MiB as fast as scanning a memory map; 4 MiB ~20% slower).
FILE_CHUNK_BYTES = 2 << 20
_BOM = b"\xef\xbb\xbf"
_BLANK_BYTES = b" \t\r"
#: A line's first byte that makes it a suspect: blank, or whitespace-led (checked further).
_SUSPECTS = (b"\n", b" ", b"\t", b"\r")


def offset_dtype(size: int) -> np.dtype:
    """Smallest unsigned dtype that holds every offset of a ``size``-byte file (uint32 below 4 GiB)."""
    return np.min_scalar_type(max(size, 1))


def default_workers() -> int:
    return max(1, min(8, os.cpu_count() or 1))


def _line_is_blank(peek: Callable[[int, int], bytes], start: int, size: int) -> bool:
    """Slow path for a line that begins with a long run of whitespace: is it whitespace up to ``\\n``?"""
    pos = start
    step = 256
    while pos < size:
        block = peek(pos, min(pos + step, size))
        if not block:  # the end of a stream whose size was not known yet
            break
        rest = block.lstrip(_BLANK_BYTES)
        if rest:
            return rest[0] == 0x0A
        pos += len(block)
        step = min(step * 4, 1 << 20)
    return True


class _FileChunks:
    """Chunks of an open file read with ``pread`` into per-thread scratch buffers (no memory map: a file
    truncated during the scan gives a short read and a clear error, never SIGBUS).

    ``digests``: a dict that gets each chunk's content-hash leaf digest (:mod:`sjsonl.storage.content`),
    by leaf number, while the chunk is in the cache — chunks must then be the leaves."""

    def __init__(self, fd: int, size: int, chunk_bytes: int, digests: dict[int, int] | None = None) -> None:
        self.fd, self.size, self.chunk_bytes = fd, size, chunk_bytes
        self.digests = digests
        self._local = threading.local()

    def __call__(self, lo: int, hi: int) -> np.ndarray:
        scratch = getattr(self._local, "scratch", None)
        if scratch is None or len(scratch) < hi - lo:  # no larger than the file: zeroing 2 MiB was
            # three quarters of a small file's scan
            scratch = self._local.scratch = bytearray(max(hi - lo, min(self.chunk_bytes, self.size)))
        view = memoryview(scratch)[: hi - lo]
        got = 0
        while got < hi - lo:
            n = os.preadv(self.fd, [view[got:]], lo + got)
            if n <= 0:
                raise DataChangedWhileScanning(f"data file shrank to {lo + got} bytes while it was indexed")
            got += n
        if self.digests is not None:
            self.digests[lo // LEAF_BYTES] = leaf_digest(view)
        return np.frombuffer(scratch, dtype=np.uint8, count=hi - lo)

    def peek(self, lo: int, hi: int) -> bytes:
        return os.pread(self.fd, hi - lo, lo)


class DataChangedWhileScanning(Exception):
    """The bytes being scanned changed under the scan (a short read): the caller scans again."""


#: How many bytes of a whitespace-led line the vectorised check looks at before the slow path takes over.
_WS_STEPS = 32


class _ChunkScanner:
    """Scans one chunk at a time; per-thread scratch (the numpy scan's masks, the compiled scan's offsets,
    which are then copied out at their exact count) avoids a fresh allocation and a counting pass per chunk.

    ``peek(lo, hi)`` returns bytes of the data outside the chunk at hand (the next chunk's first byte,
    the rest of a whitespace-led line); ``load(lo, hi)`` returns a chunk as a uint8 array (zero-copy
    from a buffer, or read into scratch memory)."""

    def __init__(
        self,
        peek: Callable[[int, int], bytes],
        size: int,
        dtype: np.dtype,
        chunk_bytes: int,
        load: Callable[[int, int], np.ndarray] | None = None,
    ) -> None:
        self.peek, self.size, self.dtype, self.chunk_bytes = peek, size, dtype, chunk_bytes
        self.load = load
        self.first = 3 if peek(0, 3) == _BOM else 0
        #: what the compiled scan writes: the final dtype when it is 4 or 8 bytes wide (no conversion)
        self._native_dtype = np.dtype(np.uint64 if dtype.itemsize > 4 else np.uint32)
        self._local = threading.local()

    def _room(self, n: int | None = None) -> np.ndarray:
        """This thread's scratch for the compiled scan's offsets: exactly ``n`` long when ``n`` is given
        (kept, if larger than before, for the next chunks), else the whole of what it holds."""
        room = getattr(self._local, "room", None)
        if room is None or len(room) < (n or 0):
            room = self._local.room = np.empty(max(n or 0, 1024), dtype=self._native_dtype)
        return room if n is None else room[:n]

    def _mask(self, n: int) -> np.ndarray:
        mask = getattr(self._local, "mask", None)
        if mask is None or len(mask) < n:
            mask = self._local.mask = np.empty(max(n, self.chunk_bytes), dtype=np.bool_)
        return mask[:n]

    def __call__(self, bounds: tuple[int, int]) -> np.ndarray:
        """Record starts in ``[lo, hi)`` (one call per chunk, from any thread)."""
        lo, hi = bounds
        return self.scan(self.load(lo, hi), lo)  # type: ignore[misc]

    def scan(self, data: np.ndarray, lo: int) -> np.ndarray:
        """Record starts among the lines that begin in ``data``, the bytes at ``[lo, lo + len(data))``."""
        n = len(data)
        hi = lo + n
        suspects = -1  # lines begun inside data with a byte that may make them blank; -1: not counted
        if NATIVE is not None:  # one pass, offsets written in place in their final width, the GIL released
            fill = lambda room: NATIVE.starts(data, lo, room)  # noqa: E731
            starts, (suspects,) = self.filled(fill, lambda: NATIVE.count(data), lo, hi)
        else:
            mask = self._mask(n)
            np.equal(data, 0x0A, out=mask)
            starts = np.flatnonzero(mask)
            starts += lo + 1  # a line starts one past each newline
        return self.settled(starts, suspects, lambda: data, lo, hi)

    def filled(
        self, fill: Callable[[np.ndarray], tuple], count: Callable[[], int], lo: int, hi: int
    ) -> tuple:
        """``(newline offsets, the rest of what fill returned)`` of chunk ``[lo, hi)``: ``fill(room)``
        writes them into this thread's scratch (as large as the most a chunk has needed) and returns
        ``(written, …)``, or raises ``ValueError`` when they do not fit — then ``count()`` makes room and
        it fills again."""
        room = self._room()
        try:
            written, *rest = fill(room)
        except ValueError:  # more lines than that: count them, make room, fill again
            room = self._room(count())
            try:
                written, *rest = fill(room)
            except ValueError:
                written = -1
            if written != len(room):  # the bytes changed between the two passes
                changed = f"the data at [{lo}, {hi}) changed while it was scanned"
                raise DataChangedWhileScanning(changed) from None
        return room[:written].copy(), rest

    def settled(
        self, starts: np.ndarray, suspects: int, data: Callable[[], np.ndarray], lo: int, hi: int
    ) -> np.ndarray:
        """The record starts of chunk ``[lo, hi)`` from its newline offsets ``starts``: the file's first
        line added, its final newline's dropped, blank lines left out. ``suspects``: how many lines begun in
        it may be blank (-1: not counted); ``data()``: its bytes, asked for only to look at such lines."""
        if lo <= self.first < hi:  # the first line has no newline before it (a chunk may be < the BOM)
            starts = np.concatenate((np.array([self.first], dtype=starts.dtype), starts))
            if self.peek(self.first, self.first + 1) in _SUSPECTS:
                suspects = -1  # (the count did not look at its first byte)
        if len(starts) and starts[-1] >= self.size:
            starts = starts[:-1]  # the file's final newline starts nothing
        if suspects != 0 or (len(starts) and starts[-1] == hi and self.peek(hi, hi + 1) in _SUSPECTS):
            starts = self._drop_blank(starts, data(), lo, hi)  # else no line here can be blank
        return starts.astype(self.dtype, copy=False)

    def _drop_blank(self, starts: np.ndarray, data: np.ndarray, lo: int, hi: int) -> np.ndarray:
        if not len(starts):
            return starts
        local = starts - lo
        inside = local < (hi - lo)
        first = np.empty(len(starts), dtype=np.uint8)
        first[inside] = data[local[inside]]
        for j in np.flatnonzero(~inside):  # a line starting at hi: its first byte is the next chunk's
            first[j] = self.peek(int(starts[j]), int(starts[j]) + 1)[0]
        suspicious = (first == 0x0A) | (first == 0x20) | (first == 0x09) | (first == 0x0D)
        if not suspicious.any():
            return starts
        keep = ~suspicious
        led = np.flatnonzero(suspicious & (first != 0x0A))  # lines that open with space, tab or \r
        if len(led):
            keep[led] = ~self._blank(starts[led], data, lo, hi)
        return starts[keep]

    def _blank(self, line_starts: np.ndarray, data: np.ndarray, lo: int, hi: int) -> np.ndarray:
        """Which whitespace-led lines are blank: a few vectorised steps over all of them at once, then a
        byte-string scan for the rare line whose whitespace runs longer (or past this chunk)."""
        blank = np.zeros(len(line_starts), dtype=bool)
        todo = np.arange(len(line_starts))
        pos = line_starts.astype(np.int64)
        slow: list[np.ndarray] = []  # lines whose whitespace runs past this chunk or past _WS_STEPS bytes
        for _ in range(_WS_STEPS):
            at_end = pos[todo] >= self.size
            blank[todo[at_end]] = True  # whitespace up to the end of the file
            todo = todo[~at_end]
            in_chunk = pos[todo] < hi
            slow.append(todo[~in_chunk])
            todo = todo[in_chunk]
            byte = data[pos[todo] - lo]
            decided = (byte != 0x20) & (byte != 0x09) & (byte != 0x0D)
            blank[todo[decided]] = byte[decided] == 0x0A
            todo = todo[~decided]
            if not len(todo):
                break
            pos[todo] += 1
        slow.append(todo)
        for j in np.concatenate(slow).tolist():
            blank[j] = _line_is_blank(self.peek, int(pos[j]), self.size)
        return blank


def _buffer_peek(buf) -> Callable[[int, int], bytes]:
    return lambda lo, hi: bytes(buf[lo:hi])


def _buffer_load(buf) -> Callable[[int, int], np.ndarray]:
    return lambda lo, hi: np.frombuffer(buf, dtype=np.uint8, count=hi - lo, offset=lo)


def scan_record_starts(
    buf,
    size: int | None = None,
    *,
    workers: int | None = None,
    on_progress: Callable[[int], None] | None = None,
    chunk_bytes: int = CHUNK_BYTES,
) -> np.ndarray:
    """Start offsets of every record in ``buf[:size]``, as the smallest unsigned dtype that fits.

    ``buf`` is any buffer (``bytes``, a memory map); memory used beyond the result is a few chunks per
    thread, whatever the size. ``on_progress(n)`` is called with the bytes done after each chunk.
    """
    size = len(buf) if size is None else size
    scanner = _ChunkScanner(_buffer_peek(buf), size, offset_dtype(size), chunk_bytes, _buffer_load(buf))
    return scan_chunks(scanner, size, workers, on_progress, chunk_bytes)


def scan_file(
    fd: int,
    size: int,
    *,
    workers: int | None = None,
    on_progress: Callable[[int], None] | None = None,
    chunk_bytes: int = FILE_CHUNK_BYTES,
    start: int = 0,
    digests: dict[int, int] | None = None,
) -> np.ndarray:
    """:func:`scan_record_starts` over the first ``size`` bytes of the open file ``fd``, read with
    ``pread`` (never mapped, so truncation during the scan cannot crash the process). Raises
    :class:`DataChangedWhileScanning` if the file turns out shorter than ``size``. ``start``: scan only
    ``[start, size)`` — the record starts after it (the line that begins at ``start`` counts only if
    ``start`` is 0 or follows a newline). ``digests``: a dict filled with the leaf digests of the
    content hash (:mod:`sjsonl.storage.content`) of the leaves from ``start``'s on, computed from the
    chunks as they are scanned where they are the leaves (``start`` on a leaf boundary), else read again.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
        >>> _ = open(path, "wb").write(b'[1]\\n  \\n[2]\\n')
        >>> fd = os.open(path, os.O_RDONLY)
        >>> scan_file(fd, os.fstat(fd).st_size).tolist()
        [0, 7]
        >>> os.close(fd)
    """
    leaves = digests is not None and start % LEAF_BYTES == 0 and chunk_bytes == LEAF_BYTES
    chunks = _FileChunks(fd, size, chunk_bytes, digests if leaves else None)
    scanner = _ChunkScanner(chunks.peek, size, offset_dtype(size), chunk_bytes, chunks)
    found = scan_chunks(scanner, size, workers, on_progress, chunk_bytes, start)
    if digests is not None and not leaves:
        read = lambda lo, hi: os.pread(fd, hi - lo, lo)  # noqa: E731
        first = start // LEAF_BYTES
        digests.update(enumerate(leaf_digests(read, first, size), start=first))
    return found


def scan_chunks(
    scanner: Callable[[tuple[int, int]], np.ndarray],
    size: int,
    workers: int | None,
    on_progress: Callable[[int], None] | None,
    chunk_bytes: int,
    start: int = 0,
) -> np.ndarray:
    """Record starts in ``[start, size)``, ``scanner((lo, hi))`` of each chunk on threads, in order."""
    dtype = offset_dtype(size)
    if size <= start:
        return np.empty(0, dtype=dtype)
    if size - start <= chunk_bytes:  # one chunk (a small file): no pool, no growing buffer
        found_one = scanner((start, size))
        if on_progress is not None:
            on_progress(size - start)
        return found_one
    chunks = [(lo, min(lo + chunk_bytes, size)) for lo in range(start, size, chunk_bytes)]
    workers = min(workers or default_workers(), len(chunks))
    found = OffsetsBuffer(dtype)
    for k, ((lo, hi), part) in enumerate(zip(chunks, _in_order(scanner, chunks, workers))):
        if k == 0 and len(chunks) > 1:  # room for as many more, at the first chunk's density
            found.reserve(len(part) + len(part) * (size - hi) // (hi - lo) * 17 // 16)
        found.append(part)
        if on_progress is not None:
            on_progress(hi - lo)
    return found.result()


def _in_order(fn: Callable, items: list, workers: int) -> Iterator:
    """``map(fn, items)`` on ``workers`` threads, in order, with at most two results per thread ahead
    of the consumer (``Executor.map`` would run every item at once and hold all their results)."""
    if workers == 1:
        yield from map(fn, items)
        return
    pool = ThreadPoolExecutor(workers, thread_name_prefix="sjsonl-scan")
    try:
        ahead = collections.deque(pool.submit(fn, item) for item in items[: 2 * workers])
        for item in items[2 * workers :]:
            yield ahead.popleft().result()
            ahead.append(pool.submit(fn, item))
        while ahead:
            yield ahead.popleft().result()
    finally:
        pool.shutdown(cancel_futures=True)


class OffsetsBuffer:
    """Offsets appended part by part, joined once at the end, so a build holds about the index itself plus
    one part: parts fill a reserved array in place; past its capacity they are kept as they come and copied
    into the result one by one, each freed as soon as it is copied (growing one array instead would make
    it twice the index while it is copied — or, with ``ndarray.resize``, zero-fill up to twice the index).
    Parts whose offsets outgrow ``dtype`` widen it (uint32 to uint64 past 4 GiB).

    Example:
        >>> found = OffsetsBuffer(np.dtype(np.uint32), capacity=2)
        >>> found.append(np.array([0, 4])); found.append(np.array([9]))
        >>> found.result().tolist()
        [0, 4, 9]
    """

    def __init__(self, dtype: np.dtype, capacity: int = 1 << 16) -> None:
        self._out = np.empty(capacity, dtype=dtype)
        self._n = 0  # offsets in _out
        self._more: collections.deque[np.ndarray] = collections.deque()  # parts past _out's capacity

    def reserve(self, capacity: int) -> None:
        """Room for ``capacity`` offsets in one array (best effort: without the memory, parts are kept as
        they come). numpy backs a large new array with huge pages, touched only where written; a reserve
        that turns out too large costs address space, not memory (``result`` trims)."""
        if capacity <= len(self._out) or self._more:
            return
        try:
            out = np.empty(capacity, dtype=self._out.dtype)
        except MemoryError:
            return
        out[: self._n] = self._out[: self._n]
        self._out = out

    def append(self, part: np.ndarray) -> None:
        if len(part) and self._out.dtype.itemsize < 8 and int(part[-1]) > np.iinfo(self._out.dtype).max:
            self._out = self._out.astype(np.uint64)
            self._more = collections.deque(_own_pages(p, np.dtype(np.uint64)) for p in self._more)
        n, need = self._n, self._n + len(part)
        if not self._more and need <= len(self._out):
            self._out[n:need] = part
            self._n = need
        else:  # a copy (the scanner reuses the array it hands out) in memory of its own, see _own_pages
            self._more.append(_own_pages(part, self._out.dtype))

    def result(self, dtype: np.dtype | None = None) -> np.ndarray:
        """The offsets (as ``dtype`` when given, e.g. narrower once the size is known)."""
        dtype = self._out.dtype if dtype is None else dtype
        more, n = self._more, self._n
        total = n + sum(len(p) for p in more)
        if more:
            out = np.empty(total, dtype=dtype)
            out[:n] = self._out[:n]
            self._out = np.empty(0, dtype=dtype)  # (freed: no view of it is left)
            while more:  # each part freed once copied: at most one part more than the index at any time
                part = more.popleft()
                out[n : n + len(part)] = part
                n += len(part)
        else:
            out = self._out
            out.resize(n, refcheck=False)
            out = out if dtype == out.dtype else out.astype(dtype)
        self._out = np.empty(0, dtype=out.dtype)
        return out


def _own_pages(part: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``part`` as ``dtype`` in an anonymous map of its own, given back to the system when the array goes:
    from malloc, freed parts of a few MiB stay in the heap (glibc raises its mmap threshold to the size
    freed), so the process would keep every part's pages while the joined index is filled."""
    out = np.frombuffer(mmap.mmap(-1, max(len(part), 1) * dtype.itemsize), dtype=dtype)[: len(part)]
    out[:] = part
    return out


class _ReadAhead:
    """The bytes of a chunk stream addressed by absolute offset, for :func:`scan_stream`.

    Keeps the chunk being scanned and whatever was read past it — always one chunk, so the scanner knows
    whether it holds the last one; more only while a line that opens with whitespace is followed to its
    end. Indexing and slicing (``w[i]``, ``w[a:b]``) work for offsets from the current chunk on; a slice
    past the end of the stream is short, as on ``bytes``."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._source: Iterator[bytes] = (c for c in chunks if c)
        self._held: list[tuple[int, bytes]] = []  # (offset, chunk), in order
        self._end = 0  # offset just past the last chunk read
        self.eof = False

    def _fill(self, upto: int) -> None:
        while self._end < upto and not self.eof:
            chunk = next(self._source, None)
            if chunk is None:
                self.eof = True
            else:
                self._held.append((self._end, chunk))
                self._end += len(chunk)

    def take(self, lo: int) -> bytes | None:
        """The chunk at ``lo`` (``None`` past the end); forgets earlier ones and reads one ahead."""
        self._fill(lo + 1)
        while self._held and self._held[0][0] < lo:
            self._held.pop(0)
        if not self._held:
            return None
        chunk = self._held[0][1]
        self._fill(lo + len(chunk) + 1)
        return chunk

    @property
    def known_size(self) -> int | None:
        """The stream's size, once its end has been read."""
        return self._end if self.eof else None

    @overload
    def __getitem__(self, key: int) -> int: ...
    @overload
    def __getitem__(self, key: slice) -> bytes: ...
    def __getitem__(self, key: int | slice) -> int | bytes:
        if isinstance(key, int):
            got = self[key : key + 1]
            if not got:
                raise IndexError(key)
            return got[0]
        lo, hi = key.start or 0, key.stop
        self._fill(hi)
        hi = min(hi, self._end)
        parts = []
        for off, chunk in self._held:
            if off < hi and off + len(chunk) > lo:
                parts.append(chunk[max(lo - off, 0) : hi - off])
        return b"".join(parts)


def scan_stream(
    chunks: Iterable[bytes],
    *,
    on_progress: Callable[[int], None] | None = None,
) -> tuple[np.ndarray, int]:
    """(record start offsets, total bytes) of the bytes ``chunks`` yields, in order, read once.

    The driver for storages that cannot be mapped (compressed, remote): the same chunk routine as
    :func:`scan_record_starts`, on one thread (the reads are the cost here), memory a chunk or two.
    ``on_progress(n)`` is called with the bytes done after each chunk.
    """
    window = _ReadAhead(chunks)
    # The size is unknown until the last chunk is read: offsets are kept as uint32 until one needs more.
    scanner = _ChunkScanner(_buffer_peek(window), sys.maxsize, np.dtype(np.uint64), CHUNK_BYTES)
    found = OffsetsBuffer(np.dtype(np.uint32))
    lo = 0
    while (chunk := window.take(lo)) is not None:
        known = window.known_size
        if known is not None:
            scanner.size = known  # this is the last chunk: it may end the file inside a line
        found.append(scanner.scan(np.frombuffer(chunk, dtype=np.uint8), lo))
        lo += len(chunk)
        if on_progress is not None:
            on_progress(len(chunk))
    final = offset_dtype(lo)
    return found.result(final if final.itemsize < 4 else None), lo
