"""Offsets kept outside an index file — a small file's, in a corpus manifest (:mod:`sjsonl.data.manifest`) —
scanned with the index build's own rules and adopted later only for the very bytes they were scanned from.

A corpus of many small files would otherwise write an index file per file: creating a file costs more
than scanning a few kilobytes (~0.1 ms on an ext4 disk, and sjsonl's Python around each index write
more). :func:`scan_small_file` reads a file once and returns its record starts — the same as an index
build's, blank lines, CRLF, a BOM and a missing final newline included, since both are
:func:`~sjsonl.index.scan.scan_record_starts` — with the CRC-32 of the bytes they came from.
:func:`adopt_offsets` serves them for a storage opened later, after checking its size and the CRC-32 of
its bytes: another version raises :class:`~sjsonl.errors.StaleDataError`, never a record at offsets
scanned from other bytes.

Example:
    >>> import os, tempfile
    >>> from sjsonl.storage import open_storage
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "wb").write(b'[1]\\n\\n[2]\\n')
    >>> offsets, size, crc = scan_small_file(path)
    >>> offsets.tolist(), size
    ([0, 5], 9)
    >>> adopt_offsets(open_storage(path), offsets, size, crc).offsets.tolist()
    [0, 5]
"""

from __future__ import annotations

import os
import zlib
from dataclasses import replace

import numpy as np

from sjsonl.errors import StaleDataError
from sjsonl.index.layout import LoadedIndex
from sjsonl.index.packed import prefix_crc32
from sjsonl.index.scan import scan_record_starts
from sjsonl.storage import Storage
from sjsonl.storage.base import fingerprint_of
from sjsonl.storage.content import content_hash
from sjsonl.storage.formats import HEAD_BYTES, sniff
from sjsonl.storage.local import LocalFile, open_regular_file

__all__ = ["SMALL_FILE_BYTES", "adopt_offsets", "scan_small_file"]

#: Files up to this size keep their offsets in a corpus manifest, not an index file of their own (a larger
#: file's index file costs less than its read; and the manifest, read whole at each reopen, stays small).
SMALL_FILE_BYTES = 64 << 10


def scan_small_file(path: str | os.PathLike[str]) -> tuple[np.ndarray, int, int]:
    """(record starts as uint32, size, CRC-32 of the bytes) of the JSON Lines file at ``path``, read once.
    Raises ``OSError`` as :func:`~sjsonl.storage.local.open_regular_file` does (not a regular file, too),
    and ``ValueError`` for what an index file serves better or what only opening the file will explain:
    over :data:`SMALL_FILE_BYTES`, or compressed bytes (whatever its name)."""
    fd, st = open_regular_file(os.fspath(path))  # (a FIFO or a device: DataFileError, an OSError)
    try:
        if st.st_size > SMALL_FILE_BYTES:
            raise ValueError(f"{path} is over {SMALL_FILE_BYTES} bytes")
        data = os.pread(fd, SMALL_FILE_BYTES + 1, 0)  # (one more: a file grown since is seen)
    finally:
        os.close(fd)
    if len(data) > SMALL_FILE_BYTES or sniff(data[:HEAD_BYTES]) is not None:
        raise ValueError(f"{path} grew past {SMALL_FILE_BYTES} bytes or holds compressed bytes")
    offsets = scan_record_starts(data, workers=1).astype(np.uint32, copy=False)
    return offsets, len(data), zlib.crc32(data)


def adopt_offsets(storage: Storage, offsets: np.ndarray, size: int, crc: int) -> LoadedIndex:
    """``offsets`` as the index of ``storage`` (a local file), checked to be the version they were scanned
    from — its size and the CRC-32 of its bytes — and the storage pinned to it."""
    if not isinstance(storage, LocalFile):
        raise TypeError(f"offsets can be adopted for a local file only, not {storage.path}")
    stamp = storage.stamp(fingerprint=False)
    data = storage.read_unchecked(0, stamp.size) if stamp.size == size else b""
    if stamp.size != size or len(data) != size or zlib.crc32(data) != crc:
        raise StaleDataError(
            f"{storage.path} changed after the dataset was opened ({size} bytes were scanned, it holds "
            f"{stamp.size} now, or other bytes); open the dataset again"
        )
    # the stamp an index build gives these bytes, from the one read (not three)
    fingerprint = fingerprint_of(lambda ranges: [data[lo:hi] for lo, hi in ranges], size)
    stamp = replace(stamp, fingerprint=fingerprint, content=content_hash(lambda lo, hi: data[lo:hi], size))
    storage.pin(stamp)
    checksum = prefix_crc32(offsets, len(offsets))
    return LoadedIndex(offsets, stamp, None, checksum, "", origin="found")
