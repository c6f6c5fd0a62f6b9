"""Incremental append: a data file that only grew gets its new bytes scanned and its index extended.

JSON Lines corpora grow by appending (logs, crawls, synthetic data). When the index on disk is stale only
because its file was appended to — a plain local file, larger now, whose indexed bytes are unchanged (the
same head/tail fingerprint that :class:`~sjsonl.storage.LocalFile` trusts for appends) — the scan starts
at the last indexed record (which may have been cut short when indexed, and is read again) and the index
file is rewritten with the old offsets and the new ones, atomically as always. Work is proportional to the
bytes appended, plus copying the offsets. A file rewritten, truncated or replaced is rebuilt from scratch
by the caller; so are compressed and remote files, and JSON documents (their records are not lines).

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

import os
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from .._progress import Progress
from ..errors import IndexFileError, SJSONLError, StaleDataError
from ..storage import DataStamp, LocalFile, Storage
from .scan import DataChangedWhileScanning, offset_dtype, scan_file
from .store import candidate_index_paths, meta_of, read_index, write_index

if TYPE_CHECKING:  # .build imports this module
    from .build import LoadedIndex


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
    paths = [os.path.abspath(os.path.expanduser(index_path))] if index_path else candidate_index_paths(
        storage.path, index_dir
    )  # fmt: skip
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
        offsets, stamp = _scan_appended(storage, old.offsets, workers, progress)
        new_meta = meta_of(offsets, stamp, storage.path)
        write_index(path, offsets, new_meta)
        return LoadedIndex(offsets, stamp, path, new_meta.checksum, "")
    return None


def _scan_appended(
    storage: LocalFile, old: np.ndarray, workers: int | None, progress: bool | None
) -> tuple[np.ndarray, DataStamp]:
    """(old offsets + the starts after the last old record, stamp of the bytes scanned)."""
    # Rescan from the last indexed record: it may have been cut short (no final newline) when indexed.
    # Scanning from the newline before it finds it again, and nothing before it changes.
    last = int(old[-1]) if len(old) else 0
    start = last - 1 if last > 0 else 0
    keep = old[:-1] if len(old) else old
    for _attempt in range(3):
        before = storage.stamp(fingerprint=False)
        storage.pin(before)  # a change during the scan (beyond growth) fails the reads: scan again
        bar = Progress(before.size - start, f"indexing the end of {os.path.basename(storage.path)}", progress)
        try:
            tail = scan_file(storage.fd, before.size, workers=workers, on_progress=bar.update, start=start)
        except (DataChangedWhileScanning, StaleDataError):
            continue
        finally:
            bar.close()
        after = storage.stamp()
        if before.describe_change(after, content=False) is None:
            dtype = offset_dtype(before.size)  # past 4 GiB the offsets widen to uint64
            offsets = np.concatenate([keep.astype(dtype, copy=False), tail.astype(dtype, copy=False)])
            final = replace(after, size=before.size)
            storage.pin(final)
            return offsets, final
    raise SJSONLError(f"data file keeps changing while it is indexed: {storage.path}")
