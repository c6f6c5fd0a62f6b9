"""Incremental append: a data file that only grew gets its new bytes scanned and its index extended.

JSON Lines corpora grow by appending (logs, crawls, synthetic data). When the index on disk is stale only
because its file was appended to — a plain local file, larger now, whose indexed bytes are unchanged (the
same head/tail fingerprint that :class:`~sjsonl.storage.LocalFile` trusts for appends) — the scan starts
at the last indexed record (which may have been cut short when indexed, and is read again) and the index
file is rewritten with the old offsets and the new ones, atomically as always. Work is proportional to the
bytes appended, plus copying the offsets. (A compact index, :mod:`.packed`, is rewritten whole,
atomically, in its format: it is a quarter of the plain one's size or less.) A file rewritten,
truncated or replaced is rebuilt from scratch by the caller; so are compressed and remote files, and
JSON documents (their records are not lines).

Example:
    >>> import os, tempfile
    >>> from sjsonl.storage import LocalFile
    >>> from sjsonl.index.build import build_offsets, save_index
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "wb").write(b'{"a": 1}\\n{"a": 2}\\n')
    >>> offsets, stamp = build_offsets(LocalFile(path))
    >>> index = save_index(LocalFile(path), offsets, stamp)
    >>> _ = open(path, "ab").write(b'{"a": 3}\\n')
    >>> extend_grown_index(LocalFile(path)).offsets.tolist()
    [0, 9, 18]
"""

from __future__ import annotations

import fcntl
import io
import os
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from .._progress import Progress
from ..errors import IndexFileError, SJSONLError, StaleDataError
from ..storage import DataStamp, LocalFile, Storage
from .packed import PackedOffsets, index_names
from .scan import DataChangedWhileScanning, offset_dtype, scan_file
from .store import (
    _TAIL,
    TRAILER_MAGIC,
    IndexFile,
    IndexMeta,
    meta_of,
    read_index,
    write_index,
)

if TYPE_CHECKING:  # .build imports this module
    from .build import LoadedIndex

#: Appended bytes up to which one thread scans (starting scan threads costs more than they save).
_ONE_THREAD_BYTES = 64 << 20


def _grew_from(storage: LocalFile, stamp: DataStamp) -> bool:
    """Whether ``storage`` is the data ``stamp`` describes with bytes appended: a plain local file, larger
    now, whose first ``stamp.size`` bytes still have the fingerprint they had."""
    if stamp.stored_size is not None or stamp.etag:
        return False
    now = storage.stamp(fingerprint=False)
    return now.size > stamp.size and storage.fingerprint(stamp.size) == stamp.fingerprint


def extend_grown_index(
    storage: Storage,
    *,
    index_dir: str | None = None,
    index_path: str | None = None,
    workers: int | None = None,
    progress: bool | None = None,
) -> LoadedIndex | None:
    """The index of ``storage`` extended over the bytes appended since it was built, written over the old
    one; ``None`` when no index on disk describes a prefix of the data as it is now."""
    from .build import LoadedIndex

    if not isinstance(storage, LocalFile):  # compressed, archived, remote: rebuilt by the caller
        return None
    if index_path:
        paths = [os.path.abspath(os.path.expanduser(index_path))]
    else:  # each place's plain index, then its compact one
        paths = index_names(storage.path, index_dir)
    for path in paths:
        try:
            old = read_index(path)
        except (FileNotFoundError, IndexFileError):
            continue
        meta = old.meta
        if meta.layout or os.path.basename(meta.data_path) != os.path.basename(storage.path):
            continue
        if not _grew_from(storage, meta.stamp):
            continue
        scanned = _scan_appended(storage, old.offsets, workers, progress)
        if scanned is None:
            return None
        offsets, stamp = scanned
        same_dtype = offsets.dtype == old.offsets.dtype  # the old CRC then covers the first len(old) offsets
        crc_of = (len(old.offsets), meta.checksum) if same_dtype else (0, 0)
        new_meta = meta_of(offsets, stamp, storage.path, crc_of=crc_of)
        compact = isinstance(old.offsets, PackedOffsets)  # rewritten whole, atomically: it is small
        if compact or not (same_dtype and _extend_in_place(old, offsets[len(old.offsets) :], new_meta)):
            write_index(path, offsets, new_meta, compact=compact)
        served = read_index(path).offsets if compact else offsets  # compact: served from its map
        return LoadedIndex(served, stamp, path, new_meta.checksum, "", origin="extended")
    return None


def _scan_appended(
    storage: LocalFile, old: Any, workers: int | None, progress: bool | None
) -> tuple[np.ndarray, DataStamp] | None:
    """(old offsets + the starts after the last old record, stamp of the bytes scanned); None when the
    last old record no longer starts one (the caller rebuilds)."""
    # Rescan from the last indexed record: it may have been cut short (no final newline) when indexed.
    # Scanning from the newline before it finds it again (its bytes are fingerprinted: it still starts a
    # record), and nothing before it changes.
    last = int(old[-1]) if len(old) else 0
    start = last - 1 if last > 0 else 0
    for _attempt in range(3):
        before = storage.stamp(fingerprint=False)
        storage.pin(before)  # a change during the scan (beyond growth) fails the reads: scan again
        bar = Progress(before.size - start, f"indexing the end of {os.path.basename(storage.path)}", progress)
        # a small tail is scanned faster than scan threads start
        small = before.size - start <= _ONE_THREAD_BYTES
        try:
            tail = scan_file(
                storage.fd, before.size, workers=1 if small else workers, on_progress=bar.update, start=start
            )
        except (DataChangedWhileScanning, StaleDataError):
            continue
        finally:
            bar.close()
        after = storage.stamp()
        if before.describe_change(after, content=False) is None:
            if len(old) and (not len(tail) or int(tail[0]) != last):
                return None  # e.g. a cut-short BOM completed: the start of the data reads differently now
            dtype = offset_dtype(before.size)  # past 4 GiB the offsets widen to uint64
            offsets = np.concatenate(
                [old.astype(dtype, copy=False), tail[1 if len(old) else 0 :].astype(dtype)]
            )
            final = replace(after, size=before.size)
            storage.pin(final)
            return offsets, final
    raise SJSONLError(f"data file keeps changing while it is indexed: {storage.path}")


def _npy_header(records: int, dtype: np.dtype) -> bytes:
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        out, {"descr": dtype.str, "fortran_order": False, "shape": (records,)}
    )
    return out.getvalue()


def _extend_in_place(old: IndexFile, new_offsets: np.ndarray, meta: IndexMeta) -> bool:
    """Write ``new_offsets`` after the old ones in the old index file itself, then the new trailer, then
    the array header naming the new count — I/O proportional to what was appended, not to the records.
    False (nothing written) when the file changed since it was read or the header would change length.

    Not one atomic replace, but a reader that opens the file part way through sees a header, a count
    and a CRC-32 that disagree (:func:`~sjsonl.index.store.read_index` refuses it, and the index is
    rebuilt), and a crash leaves such a file too; processes that mapped the old index read only the old
    offsets, which stay where they were. Writers take an exclusive ``flock`` on the file."""
    header = _npy_header(meta.records, np.dtype(meta.dtype))
    old_header = _npy_header(old.meta.records, np.dtype(meta.dtype))
    if len(header) != len(old_header):  # a count with more digits crossed the header's padding
        return False
    fd = os.open(old.path, os.O_RDWR | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns) != old.identity:
            return False  # rewritten or extended by another process since it was read
        if os.pread(fd, len(old_header), 0) != old_header:  # not the header np.save writes
            return False
        body_end = len(header) + old.offsets.nbytes
        blob = meta.to_json()
        tail = np.ascontiguousarray(new_offsets).tobytes() + blob + _TAIL.pack(len(blob), TRAILER_MAGIC)
        os.pwrite(fd, tail, body_end)
        os.ftruncate(fd, body_end + len(tail))
        os.fsync(fd)  # the offsets and trailer are durable before the header names them
        os.pwrite(fd, header, 0)
        os.fsync(fd)
        return True
    finally:
        os.close(fd)
