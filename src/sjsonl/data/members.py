"""The files of a dataset: every one opened at once, or — for a corpus of many local files with a
:mod:`manifest <sjsonl.data.manifest>` — each at its first read, its record count known before.

:func:`open_members` is what :class:`~sjsonl.JSONLDataset` opens its files with. A reopen of many files that
have not changed since their manifest was written is one ``stat`` a file: no index is opened, mapped or
checked until a record of its file is read (the first read of a file costs its open, ~0.2 ms for a small
one). Any member that changed is opened at once, as every member of a smaller dataset is.

Example:
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> paths = [os.path.join(d, f"part{k:03d}.jsonl") for k in range(100)]
    >>> for k, p in enumerate(paths):
    ...     _ = open(p, "w").write(f'{{"part": {k}}}\\n' * 2)
    >>> first = open_members(paths)            # indexes built; the manifest written
    >>> again = open_members(paths)            # stat only
    >>> member_counts(again)[:3].tolist(), again.opened, again[99].record(1), again.opened
    ([2, 2, 2], 0, {'part': 99}, 1)
"""

from __future__ import annotations

import operator
import os
import threading
from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np

from sjsonl.data.document import open_data_file, open_data_files
from sjsonl.data.manifest import MANIFEST_MIN_FILES, manifest_key, read_manifest, stat_rows, write_manifest
from sjsonl.data.source import IndexedFile
from sjsonl.errors import StaleDataError
from sjsonl.storage.atomic import write_batch
from sjsonl.storage.base import resolve_path
from sjsonl.storage.zip import expand_archives

__all__ = ["LazyMembers", "member_counts", "member_paths", "open_members"]


class LazyMembers(Sequence[IndexedFile]):
    """A dataset's files, each opened (its index found, checked, extended or built) at its first use,
    whose record counts came from a manifest. Safe to use from several threads; pickles with the files
    opened so far (a worker opens the rest itself, at their first read there)."""

    def __init__(
        self,
        paths: Sequence[str | os.PathLike[str]],
        stat: np.ndarray,
        counts: np.ndarray,
        opened: dict[int, IndexedFile],
        options: dict[str, Any],
    ) -> None:
        self._paths = list(paths)
        self._stat = stat  # each file's stat row when the dataset was opened (sjsonl.data.manifest)
        self.counts = counts  #: each file's record count, as the manifest (or its open) gave it
        self._opened = opened
        self._options = options
        self._lock = threading.Lock()

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
        f = open_data_file(self._paths[k], defer_verify=True, **self._options)
        now = stat_rows([self._paths[k]])[0]
        if len(f) != int(self.counts[k]) or not np.array_equal(now, self._stat[k]):
            raise StaleDataError(
                f"{f.path} changed after the dataset was opened (it held {int(self.counts[k])} records then, "
                f"{len(f)} now); open the dataset again"
            )
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
    match the corpus manifest, the others opened now (and the manifest written again)."""
    expanded = expand_archives(paths)
    key = None
    if len(expanded) >= MANIFEST_MIN_FILES and options.get("build_index_on_load", True):
        key = manifest_key(expanded, options.get("field"))
    if key is None:
        return open_data_files(expanded, **options)
    stat = stat_rows(expanded)
    stored = read_manifest(key, len(expanded))
    if stored is None:
        counts, fresh = np.zeros(len(expanded), dtype=np.int64), np.zeros(len(expanded), dtype=bool)
    else:
        counts, fresh = stored[:, -1].copy(), (stored[:, :-1] == stat).all(axis=1)
    changed = np.flatnonzero(~fresh).tolist()
    opened: dict[int, IndexedFile] = {}
    if changed:
        with write_batch():  # (as open_data_files: each directory swept of temp files once)
            for k in changed:
                opened[k] = open_data_file(expanded[k], defer_verify=True, **options)
                counts[k] = len(opened[k])
        # A file that changed while it was opened must not match its row next time.
        after = stat_rows([expanded[k] for k in changed])
        stat[changed] = np.where((after == stat[changed]).all(axis=1, keepdims=True), after, -1)
        write_manifest(key, stat, counts)
    return LazyMembers(expanded, stat, counts, opened, options)
