"""``JSONLIndexer``: build an index explicitly and write it where you want (the seed API).

Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "data.jsonl")
    >>> _ = open(path, "w").write('{"a": 1}\\n{"a": 2}\\n')
    >>> indexer = JSONLIndexer(path)
    >>> indexer.populate_index()
    >>> indexer.index.tolist()
    [0, 9]
    >>> out = indexer.write_index_to_disk()      # data.index.npy beside the data
    >>> np.load(out).tolist()
    [0, 9]
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import numpy as np

from sjsonl.data.document import layouts_for
from sjsonl.data.source import iter_blocks
from sjsonl.errors import ArgumentTypeError, RecordDecodeError, plural
from sjsonl.index import line_number_at
from sjsonl.index.build import build_layout, save_index
from sjsonl.index.elements import element_bytes, records_end
from sjsonl.index.store import DataStamp
from sjsonl.records.decode import DECODE_ERRORS, excerpt, fast_loads, loads
from sjsonl.storage import open_storage

MAX_REPORTED = 1000


class InvalidRecordsError(RecordDecodeError):
    """``check=True`` found records that are not valid JSON; ``errors`` lists them (the first 1000)."""

    def __init__(self, errors: list[RecordDecodeError], total: int) -> None:
        first = errors[0]
        super().__init__(first.path, first.line, first.offset, first.excerpt, first.reason)
        self.errors, self.total = errors, total
        lines = ", ".join(str(e.line) for e in errors[:10])
        more = f" (first lines: {lines}{', …' if total > 10 else ''})" if total > 1 else ""
        self.args = (f"{plural(total, 'invalid record')} in {first.path}{more}; first: {first}",)

    def __reduce__(self):
        return (type(self), (self.errors, self.total))


class JSONLIndexer:
    """Build the record index of one JSONL file.

    Args:
        path: the data file (``~`` is expanded).
        check: also parse every record and raise :class:`InvalidRecordsError` listing the bad lines.
        workers: threads for scanning (default: all cores, up to 8).
        progress: show a progress bar (default: only for large files on a terminal).
        index_dir: where :meth:`write_index_to_disk` puts the index when no path is given.
        storage_options: options for fsspec when ``path`` is a URL (a remote file's index goes to the
            cache directory). ``.gz`` and seekable ``.zst`` files are indexed in place.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "data.jsonl")
        >>> _ = open(path, "w").write('{"a": 1}\\n\\n{"a": 2}\\n')
        >>> indexer = JSONLIndexer(path, check=True)
        >>> indexer.populate_index()
        >>> len(indexer), indexer.index.tolist(), os.path.basename(indexer.write_index_to_disk())
        (2, [0, 10], 'data.index.npy')
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        check: bool = False,
        *,
        workers: int | None = None,
        progress: bool | None = None,
        index_dir: str | os.PathLike[str] | None = None,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        self.storage = open_storage(path, storage_options)
        self.path = self.storage.path
        self.check = check
        self.workers, self.progress = workers, progress
        self.index_dir = None if index_dir is None else os.fspath(index_dir)
        self.index: np.ndarray | None = None
        self.stamp: DataStamp | None = None
        self.layout = ""  # "": lines; else the elements of a JSON document (sjsonl.data.document)

    def populate_index(self) -> None:
        """Scan the file and record where each record starts (``self.index``)."""
        # a .json file holding one array is indexed by element, as JSONLDataset reads it
        self.index, self.stamp, self.layout = build_layout(
            self.storage, workers=self.workers, progress=self.progress, layout=layouts_for(self.storage)[0]
        )
        if self.check:
            self._check_records()

    def write_index_to_disk(self, path: str | os.PathLike[str] | None = None) -> str:
        """Write the index atomically (building it first if needed); return where it went.

        Without ``path`` it goes beside the data (``data.jsonl`` → ``data.index.npy``), or to the cache
        directory when that is read-only or ``index_dir`` / ``$SJSONL_INDEX_DIR`` is set.
        """
        if self.index is None or self.stamp is None:
            self.populate_index()
        assert self.index is not None and self.stamp is not None
        where = None if path is None else os.fspath(path)
        return save_index(
            self.storage,
            self.index,
            self.stamp,
            index_dir=self.index_dir,
            index_path=where,
            layout=self.layout,
            compact=None if where else False,  # the seed's API writes the seed's .npy
        )

    def __len__(self) -> int:
        if self.index is None:
            raise ArgumentTypeError("call populate_index() first")
        return len(self.index)

    def _check_records(self) -> None:
        assert self.index is not None and self.stamp is not None
        errors: list[RecordDecodeError] = []
        total = 0
        end = records_end(self.storage.read, self.index, self.layout, self.stamp.size)
        blocks = iter_blocks(self.storage, self.index, end, 0, len(self.index))
        for buf, base, bounds in blocks:
            for start, end in itertools.pairwise(bounds):
                data = element_bytes(buf[start:end]) if self.layout else buf[start:end]
                try:
                    fast_loads(data)
                except DECODE_ERRORS:
                    try:
                        loads(data)
                    except ValueError as exc:
                        total += 1
                        if len(errors) < MAX_REPORTED:
                            line = line_number_at(self.storage, base + start)
                            errors.append(
                                RecordDecodeError(self.path, line, base + start, excerpt(data), str(exc))
                            )
        if errors:
            raise InvalidRecordsError(errors, total)
