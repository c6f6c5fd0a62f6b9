"""Build, find and validate the index of one data file, whatever its storage.

Example:
    >>> import os, tempfile
    >>> from sjsonl.storage import LocalFile
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "wb").write(b'{"a": 1}\\n\\n{"a": 2}\\n')
    >>> offsets, stamp = build_offsets(LocalFile(path))
    >>> offsets.tolist(), stamp.size
    ([0, 10], 19)
"""

from __future__ import annotations

import mmap
import os
import warnings
from dataclasses import dataclass, replace

import numpy as np

from .._progress import Progress
from ..errors import IndexFileError, SJSONLError, StaleIndexError
from ..storage import DataStamp, Storage
from .scan import CHUNK_BYTES, scan_record_starts, scan_stream
from .store import (
    IndexMeta,
    candidate_index_paths,
    load_offsets,
    read_meta,
    seek_state_path,
    write_index,
    write_index_somewhere,
    write_seek_state,
)

_BUFFERS = (bytes, bytearray, memoryview, mmap.mmap)


def _scan(storage: Storage, before: DataStamp, workers: int | None, progress: bool | None):
    """(offsets, bytes scanned): threads over a memory map, or one pass over the storage's chunks."""
    desc = f"indexing {os.path.basename(storage.path)}"
    buffer = getattr(storage, "buffer", None)
    if buffer is not None:
        buf = buffer()
        size = len(buf)
        bar = Progress(size, desc, progress)
        try:
            return scan_record_starts(buf, size, workers=workers, on_progress=bar.update), size
        finally:
            bar.close()
    # a compressed file's logical size is unknown until it has been read: the bar then only counts
    bar = Progress(before.size if before.size >= 0 else None, desc, progress, size_hint=before.stored)
    try:
        return scan_stream(storage.chunks(CHUNK_BYTES), on_progress=bar.update)  # type: ignore[attr-defined]
    finally:
        bar.close()


def build_offsets(
    storage: Storage, *, workers: int | None = None, progress: bool | None = None
) -> tuple[np.ndarray, DataStamp]:
    """Scan ``storage`` and return (record start offsets, stamp of the bytes that were scanned).

    Data that changes while it is being scanned is scanned again (twice at most), so the stamp always
    describes the bytes the offsets came from.
    """
    for _attempt in range(3):
        fresh = storage.reopen()  # read the data as it is now, not as an older map or handle saw it
        try:
            before = fresh.stamp(fingerprint=False)
            offsets, size = _scan(fresh, before, workers, progress)
            after = fresh.stamp()
        finally:
            if fresh is not storage:
                fresh.close()
        unchanged = before.describe_change(after, content=False) is None
        if unchanged and (before.stored_size is not None or size == before.size):
            return offsets, replace(after, size=size)
    raise SJSONLError(f"data file keeps changing while it is indexed: {storage.path}")


@dataclass
class LoadedIndex:
    offsets: np.ndarray
    stamp: DataStamp
    path: str | None  # where it lives on disk (None: in memory only)


def meta_for(storage: Storage, offsets: np.ndarray, stamp: DataStamp) -> IndexMeta:
    return IndexMeta(stamp=stamp, records=len(offsets), dtype=str(offsets.dtype), data_path=storage.path)


def find_index(
    storage: Storage, *, index_dir: str | None = None, index_path: str | None = None
) -> tuple[LoadedIndex | None, list[str]]:
    """An index on disk that matches the data as it is now, or ``None`` and why each candidate failed."""
    paths = [os.path.expanduser(index_path)] if index_path else candidate_index_paths(storage.path, index_dir)
    quick = storage.stamp(fingerprint=False)  # a stat, or one HEAD request for a remote object
    full: DataStamp | None = None  # with the fingerprint: computed only when everything else matches
    problems: list[str] = []
    for path in paths:
        try:
            meta = read_meta(path)
        except IndexFileError as exc:
            problems.append(str(exc))
            continue
        if meta is None:
            if os.path.exists(path):
                problems.append(f"{path} has no metadata beside it")
            continue
        if os.path.basename(meta.data_path) != os.path.basename(storage.path):
            # e.g. data.json and data.jsonl side by side share the name data.index.npy
            problems.append(f"index {path} belongs to {meta.data_path}")
            continue
        now = quick
        if meta.stamp.describe_change(quick, content=False) is None:
            now = full = full or storage.stamp()
        change = meta.stamp.describe_change(now)
        if change is not None:
            problems.append(f"index {path} is stale: {change}")
            continue
        try:
            found = LoadedIndex(load_offsets(path, meta), meta.stamp, path)
        except (FileNotFoundError, IndexFileError) as exc:
            problems.append(str(exc))
            continue
        attach = getattr(storage, "attach_seek_state", None)
        if attach is not None:  # gzip: seek points saved beside the index spare a full decompression
            attach(seek_state_path(path), meta.stamp)
        return found, problems
    return None, problems


def save_index(
    storage: Storage,
    offsets: np.ndarray,
    stamp: DataStamp,
    *,
    index_dir: str | None = None,
    index_path: str | None = None,
) -> str:
    """Write the index (``index_path``, else beside the data or in the cache directory); return where.

    A storage with seek state worth keeping (gzip seek points) gets it written beside the index; that
    file only speeds up reopening, so failing to write it is not an error.

    Example:
        >>> import gzip, os, tempfile
        >>> from sjsonl.storage import open_storage
        >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl.gz")
        >>> _ = open(path, "wb").write(gzip.compress(b'{"a": 1}\\n'))
        >>> storage = open_storage(path)
        >>> offsets, stamp = build_offsets(storage)
        >>> written = save_index(storage, offsets, stamp, index_dir=os.path.dirname(path))
        >>> written.endswith(".index.npy"), os.path.exists(seek_state_path(written))
        (True, True)
    """
    meta = meta_for(storage, offsets, stamp)
    if index_path:
        written = write_index(os.path.abspath(os.path.expanduser(index_path)), offsets, meta)
    else:
        written = write_index_somewhere(storage.path, offsets, meta, index_dir)
    export = getattr(storage, "export_seek_state", None)
    blob = export(stamp) if export is not None else None
    if blob:
        try:
            write_seek_state(seek_state_path(written), blob)
        except OSError:
            pass
        else:
            storage.attach_seek_state(seek_state_path(written), stamp)  # type: ignore[attr-defined]
    return written


def load_or_build_index(
    storage: Storage,
    *,
    build: bool = True,
    index_dir: str | None = None,
    index_path: str | None = None,
    workers: int | None = None,
    progress: bool | None = None,
) -> LoadedIndex:
    """Use a matching index from disk; else build one (and save it) or, with ``build=False``, raise."""
    found, problems = find_index(storage, index_dir=index_dir, index_path=index_path)
    if found is not None:
        return found
    if not build:
        hint = f"build it with `sjsonl index {storage.path}` or pass build_index_on_load=True"
        if problems:
            raise StaleIndexError(f"{problems[-1]}; {hint}")
        raise IndexFileError(f"no index for {storage.path}; {hint}")
    offsets, stamp = build_offsets(storage, workers=workers, progress=progress)
    try:
        written: str | None = save_index(storage, offsets, stamp, index_dir=index_dir, index_path=index_path)
    except OSError as exc:  # an index we cannot save still serves this process
        warnings.warn(f"could not save the index of {storage.path}: {exc}", stacklevel=3)
        written = None
    return LoadedIndex(offsets, stamp, written)


def line_number_at(source, offset: int) -> int:
    """1-based line number of the line starting at byte ``offset`` (counts ``\\n`` before it).

    ``source`` is a buffer (counted in place) or a storage (read in pieces from the start: for compressed
    or remote data this costs reading everything before ``offset`` — paid only when reporting an error).

    Example:
        >>> from sjsonl.storage import MemoryFile
        >>> line_number_at(b"1\\n\\n2\\n", 3), line_number_at(MemoryFile(b"1\\n\\n2\\n"), 3)
        (3, 3)
    """
    count = 0
    if isinstance(source, _BUFFERS):
        step = 64 << 20
        for lo in range(0, offset, step):
            hi = min(offset, lo + step)
            count += int(np.count_nonzero(np.frombuffer(source, np.uint8, count=hi - lo, offset=lo) == 0x0A))
        return count + 1
    step = 8 << 20
    for lo in range(0, offset, step):
        piece = source.read(lo, min(offset, lo + step))
        count += piece.count(b"\n")
    return count + 1
