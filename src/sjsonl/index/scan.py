"""Find where every record starts: a vectorised newline scan in fixed-size chunks, run on several threads.

A record is a non-blank line. Only the byte ``\\n`` ends a line; a line holding nothing but JSON whitespace
(space, tab, ``\\r``) is blank and is not a record. A UTF-8 BOM at the start of the file is skipped.

numpy releases the GIL in ``np.equal`` and ``np.flatnonzero``, so threads scale; measured on this machine
they beat processes (no result pickling, no second map), see ``benchmarks/``.

Two drivers share one chunk routine (:meth:`_ChunkScanner.scan`): :func:`scan_record_starts` over a
buffer (a memory map: chunks in parallel threads) and :func:`scan_stream` over a sequence of chunks read
in order (compressed and remote data, where the bytes exist only as they are read). What a chunk cannot
decide alone — the first byte of a line that starts just past its end, whether a line that opens with
whitespace is blank — it looks up in the buffer, or, for a stream, in chunks read ahead.

Example:
    >>> import numpy as np
    >>> scan_record_starts(b'{"a":1}\\n\\n  \\r\\n[2]\\n"x"').tolist()
    [0, 13, 17]
    >>> offsets, size = scan_stream([b'{"a":1}\\n\\n  ', b'\\r\\n[2]\\n"x"'])
    >>> offsets.tolist(), size
    ([0, 13, 17], 20)
"""

from __future__ import annotations

import mmap
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np

CHUNK_BYTES = 4 << 20  # page-aligned; large enough to amortise per-chunk overhead, small enough for cache
_BOM = b"\xef\xbb\xbf"
_BLANK_BYTES = b" \t\r"


def offset_dtype(size: int) -> np.dtype:
    """Smallest unsigned dtype that holds every offset of a ``size``-byte file (uint32 below 4 GiB)."""
    return np.min_scalar_type(max(size, 1))


def default_workers() -> int:
    return max(1, min(8, os.cpu_count() or 1))


def _line_is_blank(buf, start: int, size: int) -> bool:
    """Slow path for a line that begins with whitespace: is it whitespace up to the next ``\\n``?"""
    pos = start
    while pos < size:
        block = bytes(buf[pos : min(pos + 65536, size)])
        if not block:  # the end of a stream whose size was not known yet
            break
        rest = block.lstrip(_BLANK_BYTES)
        if rest:
            return rest[0] == 0x0A
        pos += len(block)
    return True


class _ChunkScanner:
    """Scans one chunk at a time; per-thread scratch masks avoid a fresh allocation per chunk."""

    def __init__(self, buf, size: int, dtype: np.dtype, chunk_bytes: int) -> None:
        self.buf, self.size, self.dtype, self.chunk_bytes = buf, size, dtype, chunk_bytes
        self.first = 3 if bytes(buf[:3]) == _BOM else 0
        self._local = threading.local()
        # madvise needs page-aligned ranges; chunks are, unless a caller picks an odd chunk size
        aligned = chunk_bytes % mmap.PAGESIZE == 0
        self._release = aligned and isinstance(buf, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED")

    def _mask(self, n: int) -> np.ndarray:
        mask = getattr(self._local, "mask", None)
        if mask is None or len(mask) < n:
            mask = self._local.mask = np.empty(max(n, self.chunk_bytes), dtype=np.bool_)
        return mask[:n]

    def __call__(self, bounds: tuple[int, int]) -> np.ndarray:
        """Record starts in ``buf[lo:hi]`` (the buffer driver; one call per chunk, from any thread)."""
        lo, hi = bounds
        n = hi - lo
        starts = self.scan(np.frombuffer(self.buf, dtype=np.uint8, count=n, offset=lo), lo)
        if self._release:  # keep resident memory bounded: these pages stay in the page cache
            self.buf.madvise(mmap.MADV_DONTNEED, lo, n)
        return starts

    def scan(self, data: np.ndarray, lo: int) -> np.ndarray:
        """Record starts among the lines that begin in ``data``, the bytes at ``[lo, lo + len(data))``."""
        n = len(data)
        hi = lo + n
        mask = self._mask(n)
        np.equal(data, 0x0A, out=mask)
        starts = np.flatnonzero(mask)
        starts += lo + 1  # a line starts one past each newline
        if lo <= self.first < hi:  # the first line has no newline before it (a chunk may be < the BOM)
            starts = np.concatenate(([self.first], starts))
        if len(starts) and starts[-1] >= self.size:
            starts = starts[:-1]  # the file's final newline starts nothing
        starts = self._drop_blank(starts, data, lo, hi)
        return starts.astype(self.dtype, copy=False)

    def _drop_blank(self, starts: np.ndarray, data: np.ndarray, lo: int, hi: int) -> np.ndarray:
        if not len(starts):
            return starts
        local = starts - lo
        first = np.empty(len(starts), dtype=np.uint8)
        inside = local < (hi - lo)
        first[inside] = data[local[inside]]
        for j in np.flatnonzero(~inside):  # a line starting at hi: its first byte is the next chunk's
            first[j] = self.buf[int(starts[j])]
        suspicious = (first == 0x0A) | (first == 0x20) | (first == 0x09) | (first == 0x0D)
        if not suspicious.any():
            return starts
        keep = ~suspicious
        for j in np.flatnonzero(suspicious & (first != 0x0A)):
            keep[j] = not _line_is_blank(self.buf, int(starts[j]), self.size)
        return starts[keep]


def scan_record_starts(
    buf,
    size: int | None = None,
    *,
    workers: int | None = None,
    on_progress: Callable[[int], None] | None = None,
    chunk_bytes: int = CHUNK_BYTES,
) -> np.ndarray:
    """Start offsets of every record in ``buf[:size]``, as the smallest unsigned dtype that fits.

    ``buf`` is any buffer (a memory map, ``bytes``); memory used beyond the result is a few chunks per
    thread, whatever the file's size. ``on_progress(n)`` is called with the bytes done after each chunk.
    """
    size = len(buf) if size is None else size
    dtype = offset_dtype(size)
    if size == 0:
        return np.empty(0, dtype=dtype)
    scanner = _ChunkScanner(buf, size, dtype, chunk_bytes)
    chunks = [(lo, min(lo + chunk_bytes, size)) for lo in range(0, size, chunk_bytes)]
    workers = min(workers or default_workers(), len(chunks))
    parts = []
    if workers == 1:
        results = map(scanner, chunks)
    else:
        pool = ThreadPoolExecutor(workers, thread_name_prefix="sjsonl-scan")
        results = pool.map(scanner, chunks)
    try:
        for (lo, hi), part in zip(chunks, results):
            parts.append(part)
            if on_progress is not None:
                on_progress(hi - lo)
    finally:
        if workers > 1:
            pool.shutdown()
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


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
    # The size is unknown until the last chunk is read; offsets are kept as uint64 meanwhile.
    scanner = _ChunkScanner(window, sys.maxsize, np.dtype(np.uint64), CHUNK_BYTES)
    parts = []
    lo = 0
    while (chunk := window.take(lo)) is not None:
        known = window.known_size
        if known is not None:
            scanner.size = known  # this is the last chunk: it may end the file inside a line
        parts.append(scanner.scan(np.frombuffer(chunk, dtype=np.uint8), lo))
        lo += len(chunk)
        if on_progress is not None:
            on_progress(len(chunk))
    offsets = np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)
    return offsets.astype(offset_dtype(lo), copy=False), lo
