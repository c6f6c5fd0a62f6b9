"""The files of a dataset: every one opened at once, or — for a corpus of many local files, with a
:mod:`manifest <sjsonl.data.manifest>` — each at its first read, the record counts known before.

:func:`open_members` is what :class:`~sjsonl.JSONLDataset` opens its files with. A first open of many files
scans each small JSON Lines file once and keeps its offsets in the manifest
(:mod:`sjsonl.index.adopted`: no index file a file), and opens the others as every file is opened (their
index found, extended or built). A reopen of files that have not changed since is one ``stat`` a file: no
file is opened until a record of it is read. A file that changed is scanned or opened again at once.

Example:
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> paths = [os.path.join(d, f"part{k:03d}.jsonl") for k in range(100)]
    >>> for k, p in enumerate(paths):
    ...     _ = open(p, "w").write(f'{{"part": {k}}}\\n' * 2)
    >>> first = open_members(paths)            # each file scanned; the manifest written
    >>> again = open_members(paths)            # a stat a file
    >>> member_counts(again)[:3].tolist(), again.opened, again[99].record(1), again.opened
    ([2, 2, 2], 0, {'part': 99}, 1)
    >>> sorted(os.listdir(d))[:2]              # no index file beside small files
    ['part000.jsonl', 'part001.jsonl']
"""

from __future__ import annotations

import functools
import operator
import os
import threading
from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np

from sjsonl.data.document import is_json_name, open_data_file, open_data_files
from sjsonl.data.manifest import (
    COUNT,
    CRC,
    MANIFEST_MIN_FILES,
    NEVER,
    START,
    STAT,
    forget_manifest,
    manifest_key,
    new_rows,
    read_manifest,
    same_stat,
    stat_rows,
    write_manifest,
)
from sjsonl.data.source import IndexedFile
from sjsonl.errors import StaleDataError
from sjsonl.index.adopted import SMALL_FILE_BYTES, adopt_offsets, scan_small_file
from sjsonl.storage.atomic import write_batch
from sjsonl.storage.base import resolve_path, suffix_of
from sjsonl.storage.formats import format_of_name
from sjsonl.storage.zip import expand_archives

__all__ = ["LazyMembers", "member_counts", "member_paths", "open_members"]

#: Above this many files, every file opened at its first read is read with pread, not memory-mapped: a
#: process may hold only ~65,530 maps, and an epoch reads every file.
_MAPPED_FILES = 16_384


class LazyMembers(Sequence[IndexedFile]):
    """A dataset's files, each opened (its index found, checked, extended or built) at its first use,
    whose record counts came from a manifest. Safe to use from several threads; pickles with the files
    opened so far (a worker opens the rest itself, at their first read there)."""

    def __init__(
        self,
        paths: Sequence[str | os.PathLike[str]],
        rows: np.ndarray,
        offsets: np.ndarray,
        opened: dict[int, IndexedFile],
        options: dict[str, Any],
        key: dict[str, Any],
    ) -> None:
        self._paths = list(paths)  # absolute: a chdir after the open changes nothing
        self._key = key  # the manifest's (forgotten when a row turns out not to describe its file)
        self._rows = rows  # each file's manifest row as of the dataset's open (sjsonl.data.manifest)
        self._offsets = offsets  # small files' offsets, where their rows say
        self.counts = rows[:, COUNT]  #: each file's record count
        self._opened = opened
        self._options = options
        self._lock = threading.Lock()
        self._lock_pid = os.getpid()

    def __len__(self) -> int:
        return len(self._paths)

    @overload
    def __getitem__(self, k: int) -> IndexedFile: ...

    @overload
    def __getitem__(self, k: slice) -> list[IndexedFile]: ...

    def __getitem__(self, k: int | slice) -> IndexedFile | list[IndexedFile]:
        if isinstance(k, slice):
            return [self[j] for j in range(*k.indices(len(self)))]
        k = operator.index(k)
        if k < 0:
            k += len(self._paths)
        found = self._opened.get(k)
        if found is not None:
            return found
        if not 0 <= k < len(self._paths):
            raise IndexError(f"file {k} of {len(self._paths)}")
        if self._lock_pid != os.getpid():  # forked while a thread held it: the child's copy may stay held
            self._lock, self._lock_pid = threading.Lock(), os.getpid()
        with self._lock:  # two threads reading one new file open it once
            found = self._opened.get(k)
            if found is None:
                found = self._opened[k] = self._open(k)
        return found

    def __iter__(self) -> Iterator[IndexedFile]:
        return (self[k] for k in range(len(self._paths)))

    def _open(self, k: int) -> IndexedFile:
        # The file must be the one the dataset was opened on, as if it had been opened then: its stat after
        # the open (which pinned a version) is the one taken at the dataset's open, and its count the one
        # the manifest gave. A file changed in between raises, as a pinned file changed under a reader does.
        row = self._rows[k]
        options = self._options
        if row[START] >= 0 or len(self._paths) > _MAPPED_FILES:
            # read with pread, not mapped: a process may hold only ~65,530 maps (vm.max_map_count), and a
            # corpus of more files than that is read whole in an epoch
            options = {**options, "mmap": False}
        if row[START] >= 0:  # a small file: its offsets, adopted for its bytes if they are the ones scanned
            kept = self._offsets[row[START] : row[START] + row[COUNT]]
            adopt = functools.partial(adopt_offsets, offsets=kept, size=int(row[0]), crc=int(row[CRC]))
            options = {**options, "index_from": adopt}
        try:
            f = open_data_file(self._paths[k], defer_verify=True, **options)
            if len(f) != int(row[COUNT]) or not same_stat(self._paths[k], row[STAT]):
                raise StaleDataError(
                    f"{f.path} changed after the dataset was opened (it held {int(row[COUNT])} records "
                    f"then, {len(f)} now); open the dataset again"
                )
        except StaleDataError:
            if same_stat(self._paths[k], row[STAT]):
                # other bytes under the same stat (rewritten within one tick of the clock): the manifest's
                # row would send the next open here again — it goes, and that open reads every file
                forget_manifest(self._key)
            raise
        return f

    @property
    def opened(self) -> int:
        """How many of the files have been opened so far."""
        return len(self._opened)

    @property
    def paths(self) -> list[str]:
        """The files' absolute paths, without opening them."""
        return [resolve_path(p) for p in self._paths]

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_lock": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


def member_counts(files: Sequence[IndexedFile]) -> np.ndarray:
    """Each file's record count (int64), without opening a member not yet opened."""
    if isinstance(files, LazyMembers):
        return files.counts
    return np.array([len(f) for f in files], dtype=np.int64)


def member_paths(files: Sequence[IndexedFile]) -> list[str]:
    """Each file's absolute path, without opening a member not yet opened."""
    if isinstance(files, LazyMembers):
        return files.paths
    return [f.path for f in files]


def open_members(paths: Sequence[str | os.PathLike[str]], **options: Any) -> Sequence[IndexedFile]:
    """The data files at ``paths`` (``options`` as :func:`~sjsonl.data.document.open_data_files` takes
    them): a list of every one opened, or — for :data:`~sjsonl.data.manifest.MANIFEST_MIN_FILES` local
    files or more, their indexes built when missing — :class:`LazyMembers` opening at first read those that
    match the corpus manifest, the others scanned or opened now (and the manifest written again)."""
    listed = expand_archives(paths)
    key = None
    if len(listed) >= MANIFEST_MIN_FILES and options.get("index_path") is None:
        expanded = [os.fspath(p) for p in listed]
        key = manifest_key(expanded, options.get("field"))
    if key is None:  # (index_path= with several files: refused there)
        return open_data_files(listed, **options)
    if key["cwd"]:  # absolute from now on: a chdir after the open changes nothing (and ~ is expanded)
        expanded = [p if p.startswith(os.sep) else resolve_path(p) for p in expanded]
    stat = stat_rows(expanded)
    stored = read_manifest(key, len(expanded))
    if stored is None:
        rows, offsets = new_rows(stat), np.zeros(0, dtype=np.uint32)
        changed = list(range(len(expanded)))
    else:
        rows, offsets = stored
        unchanged = (rows[:, STAT] == stat).all(axis=1)
        if not options.get("build_index_on_load", True):  # every index file checked at the open, as asked
            unchanged &= rows[:, START] >= 0
        changed = np.flatnonzero(~unchanged).tolist()
    opened: dict[int, IndexedFile] = {}
    if changed:
        rows[changed] = new_rows(stat[changed])
        scanned: list[np.ndarray] = []
        end = len(offsets)  # where the next small file's offsets go
        with write_batch():  # (as open_data_files: each directory swept of temp files once)
            for k in changed:
                small = _scan_small(expanded[k], stat[k], options)
                if small is not None:
                    starts, rows[k, CRC] = small
                    rows[k, COUNT], rows[k, START] = len(starts), end
                    scanned.append(starts)
                    end += len(starts)
                    continue
                f = opened[k] = open_data_file(expanded[k], defer_verify=True, **options)
                rows[k, COUNT] = len(f)
                if not same_stat(expanded[k], stat[k]):
                    rows[k, STAT] = NEVER  # changed while it was opened: never taken from the manifest
        rows, offsets = _compacted(rows, np.concatenate([offsets, *scanned]))
        write_manifest(key, rows, offsets)
    return LazyMembers(expanded, rows, offsets, opened, options, key)


def _scan_small(path: str, stat: np.ndarray, options: dict[str, Any]) -> tuple[np.ndarray, int] | None:
    """A small JSON Lines file's (record starts, CRC-32 of its bytes), or ``None``: any other file, one
    whose options ask for an index file, or one that changed while it was read (opened as usual)."""
    if not 0 <= stat[0] <= SMALL_FILE_BYTES or not options.get("build_index_on_load", True):
        return None  # (a scan builds an index: refused with build_index_on_load=False)
    if options.get("index_dir") is not None or options.get("compact") or options.get("field") is not None:
        return None  # asked for index files, or for the elements under a field
    if format_of_name(suffix_of(os.fspath(path))) is not None or is_json_name(path):
        return None  # compressed, or a JSON document
    try:
        starts, size, crc = scan_small_file(path)
    except (OSError, ValueError):
        return None  # the usual open explains it (or serves it)
    if size != stat[0] or not same_stat(path, stat):
        return None
    return starts, crc


def _compacted(rows: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``offsets`` holding only what ``rows`` point at, in row order (a changed file's old offsets gone)."""
    kept = np.flatnonzero(rows[:, START] >= 0)
    starts, counts = rows[kept, START], rows[kept, COUNT]
    firsts = np.cumsum(counts) - counts  # where each kept file's offsets go
    take = np.arange(int(counts.sum())) - np.repeat(firsts, counts) + np.repeat(starts, counts)
    rows[kept, START] = firsts
    return rows, offsets[take]
