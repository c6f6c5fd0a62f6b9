"""One data file plus its index: records by number, raw bytes, fast sequential reads, located errors.

This is the dataset layer's unit; :class:`~sjsonl.dataset.JSONLDataset` composes one or more of them.

Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "wb").write(b'{"a": 1}\\n{"a": 2}\\n')
    >>> f = IndexedFile(path)
    >>> len(f), f.record(1), f.raw(0)
    (2, {'a': 2}, b'{"a": 1}')
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from .decode import JSONDecodeError, excerpt, fast_loads, loads
from .errors import IndexFileError, RecordDecodeError
from .index import line_number_at, load_or_build_index
from .index.store import load_offsets, read_meta
from .storage import LocalFile

_TRAILING_WS = b" \t\r\n"
Decoder = Callable[[bytes], Any]  # raises ValueError on bad input
_BLOCK = 8192  # records per block on sequential paths


class IndexedFile:
    """A local JSONL file with its record offsets, opened (and the index built) on construction."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        build_index_on_load: bool = True,
        index_dir: str | os.PathLike[str] | None = None,
        index_path: str | os.PathLike[str] | None = None,
        workers: int | None = None,
        progress: bool | None = None,
    ) -> None:
        self.storage = LocalFile(path)
        loaded = load_or_build_index(
            self.storage,
            build=build_index_on_load,
            index_dir=None if index_dir is None else os.fspath(index_dir),
            index_path=None if index_path is None else os.fspath(index_path),
            workers=workers,
            progress=progress,
        )
        self.offsets: np.ndarray = loaded.offsets
        self.index_path = loaded.path
        self.stamp = loaded.stamp
        self.end = loaded.stamp.size  # bytes past this were not indexed (e.g. appended since)
        self.n = len(self.offsets)
        self._hot: tuple[Any, memoryview, int, int] | None = None

    @property
    def path(self) -> str:
        return self.storage.path

    def __len__(self) -> int:
        return self.n

    def span(self, i: int) -> tuple[int, int]:
        """Byte range of record ``i`` including any blank lines after it (JSON whitespace)."""
        offsets = self.offsets
        return int(offsets[i]), int(offsets[i + 1]) if i + 1 < self.n else self.end

    def raw(self, i: int) -> bytes:
        """The record's bytes, without its line ending."""
        start, end = self.span(i)
        return self.storage.buffer()[start:end].rstrip(_TRAILING_WS)

    def hot_state(self) -> tuple[Any, memoryview, int, int]:
        """(map, offsets as a memoryview, last record number, end of data) for the hot read path.

        A memoryview yields Python ints, cheaper to slice with than numpy scalars. Cached per process:
        pickling drops it (see ``__getstate__``)."""
        hot = self._hot
        if hot is None:
            hot = self._hot = (self.storage.buffer(), memoryview(self.offsets), self.n - 1, self.end)
        return hot

    def record(self, i: int, decode: Decoder | None = None) -> Any:
        """Record ``i`` (``0 <= i < n``, checked by the caller): one slice of the map, one parse."""
        buf, bounds, last, end = self.hot_state()
        start = bounds[i]
        if i < last:
            end = bounds[i + 1]
        if decode is not None:
            return next(self.decode_spans([(start, end)], decode))
        try:
            return fast_loads(buf[start:end])
        except JSONDecodeError:
            return self._slow_decode(int(start), int(end))

    def _slow_decode(self, start: int, end: int) -> Any:
        data = self.storage.buffer()[start:end]
        try:
            return loads(data)
        except ValueError as exc:
            raise self.decode_error(start, data, str(exc)) from None

    def decode_error(self, start: int, data: bytes, reason: str) -> RecordDecodeError:
        line = line_number_at(self.storage.buffer(), start)
        return RecordDecodeError(self.path, line, start, excerpt(data), reason)

    def decode_spans(self, spans: Iterable[tuple[int, int]], decode: Decoder | None = None) -> Iterator[Any]:
        """Decode each ``(start, end)`` byte span; ``decode`` replaces the default full parse."""
        buf = self.storage.buffer()
        if decode is None:
            for start, end in spans:
                try:
                    yield fast_loads(buf[start:end])
                except JSONDecodeError:
                    yield self._slow_decode(start, end)
        else:
            for start, end in spans:
                try:
                    yield decode(buf[start:end])
                except ValueError as exc:
                    raise self.decode_error(start, buf[start:end], str(exc)) from None

    def iter_records(
        self, lo: int = 0, hi: int | None = None, decode: Decoder | None = None
    ) -> Iterator[Any]:
        """Records ``lo..hi`` in file order: block-wise offsets, no per-record index arithmetic."""
        hi = self.n if hi is None else hi
        for block_lo in range(lo, hi, _BLOCK):
            block_hi = min(hi, block_lo + _BLOCK)
            bounds = self.offsets[block_lo : block_hi + 1].tolist()
            if len(bounds) == block_hi - block_lo:
                bounds.append(self.end)
            yield from self.decode_spans(itertools.pairwise(bounds), decode)

    def records_at(self, indices: np.ndarray, decode: Decoder | None = None) -> list[Any]:
        """Records at many positions (any order), with the offsets looked up in one vectorised step."""
        indices = np.asarray(indices, dtype=np.int64)
        starts = self.offsets[indices].tolist()
        nxt = indices + 1
        last = nxt >= self.n
        ends = self.offsets[np.where(last, 0, nxt)].astype(np.int64)
        ends[last] = self.end
        return list(self.decode_spans(zip(starts, ends.tolist()), decode))

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_hot"] = None
        if self.index_path is not None:
            state["offsets"] = None  # the receiving process maps the index file itself
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if self.offsets is None:
            meta = read_meta(self.index_path)
            if meta is None or meta.stamp != self.stamp or meta.records != self.n:
                raise IndexFileError(
                    f"index {self.index_path} changed after this dataset was pickled; reopen the dataset"
                )
            self.offsets = load_offsets(self.index_path, meta)
