"""Build, find and validate the index of one local data file.

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

import os
import warnings
from dataclasses import dataclass

import numpy as np

from .._progress import Progress
from ..errors import IndexFileError, SJSONLError, StaleIndexError
from ..storage import LocalFile
from .scan import scan_record_starts
from .store import (
    DataStamp,
    IndexMeta,
    candidate_index_paths,
    load_offsets,
    read_meta,
    write_index_somewhere,
)


def current_stamp(storage: LocalFile, st: os.stat_result | None = None) -> DataStamp:
    st = st or storage.stat()
    return DataStamp(st.st_size, st.st_mtime_ns, storage.fingerprint(st.st_size))


def build_offsets(
    storage: LocalFile, *, workers: int | None = None, progress: bool | None = None
) -> tuple[np.ndarray, DataStamp]:
    """Scan ``storage`` and return (record start offsets, stamp of the bytes that were scanned).

    A file that changes while it is being scanned is scanned again (twice at most), so the stamp always
    describes the bytes the offsets came from.
    """
    for _attempt in range(3):
        fresh = LocalFile(storage.path)  # map the file as it is now, not as an older map saw it
        before = fresh.stat()
        buf = fresh.buffer()
        size = len(buf)
        bar = Progress(size, f"indexing {os.path.basename(storage.path)}", progress)
        try:
            offsets = scan_record_starts(buf, size, workers=workers, on_progress=bar.update)
        finally:
            bar.close()
        after = fresh.stat()
        stamp = current_stamp(fresh, before)
        fresh.close()
        unchanged = (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
        if unchanged and size == before.st_size:
            return offsets, stamp
    raise SJSONLError(f"data file keeps changing while it is indexed: {storage.path}")


@dataclass
class LoadedIndex:
    offsets: np.ndarray
    stamp: DataStamp
    path: str | None  # where it lives on disk (None: in memory only)


def meta_for(storage: LocalFile, offsets: np.ndarray, stamp: DataStamp) -> IndexMeta:
    return IndexMeta(stamp=stamp, records=len(offsets), dtype=str(offsets.dtype), data_path=storage.path)


def find_index(
    storage: LocalFile, *, index_dir: str | None = None, index_path: str | None = None
) -> tuple[LoadedIndex | None, list[str]]:
    """An index on disk that matches the data as it is now, or ``None`` and why each candidate failed."""
    paths = [os.path.expanduser(index_path)] if index_path else candidate_index_paths(storage.path, index_dir)
    st = storage.stat()
    problems: list[str] = []
    now: DataStamp | None = None
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
        if meta.stamp.size != st.st_size or meta.stamp.mtime_ns != st.st_mtime_ns:
            now = DataStamp(st.st_size, st.st_mtime_ns, "")
        elif now is None or not now.fingerprint:
            now = current_stamp(storage, st)
        change = meta.stamp.describe_change(now)
        if change is not None:
            problems.append(f"index {path} is stale: {change}")
            continue
        try:
            return LoadedIndex(load_offsets(path, meta), meta.stamp, path), problems
        except (FileNotFoundError, IndexFileError) as exc:
            problems.append(str(exc))
    return None, problems


def load_or_build_index(
    storage: LocalFile,
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
    meta = meta_for(storage, offsets, stamp)
    try:
        if index_path:
            from .store import write_index

            written = write_index(os.path.expanduser(index_path), offsets, meta)
        else:
            written = write_index_somewhere(storage.path, offsets, meta, index_dir)
    except OSError as exc:  # an index we cannot save still serves this process
        warnings.warn(f"could not save the index of {storage.path}: {exc}", stacklevel=3)
        written = None
    return LoadedIndex(offsets, stamp, written)


def line_number_at(buf, offset: int) -> int:
    """1-based line number of the line starting at byte ``offset`` (counts ``\\n`` before it)."""
    count = 0
    step = 64 << 20
    for lo in range(0, offset, step):
        hi = min(offset, lo + step)
        count += int(np.count_nonzero(np.frombuffer(buf, np.uint8, count=hi - lo, offset=lo) == 0x0A))
    return count + 1
