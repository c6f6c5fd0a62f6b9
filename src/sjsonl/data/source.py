"""One data file plus its index: records by number, raw bytes, fast sequential reads, located errors.

This is the dataset layer's unit; :class:`~sjsonl.data.dataset.JSONLDataset` composes one or more of them.
The data may be local, compressed or remote (see :mod:`sjsonl.storage`). A local uncompressed file is
sliced in its memory map; any other storage is read by ranges: one read per record on random access, one
read per block of records when iterating, and nearby records merged into one read by :meth:`records_at`.

Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "wb").write(b'{"a": 1}\\n{"a": 2}\\n')
    >>> f = IndexedFile(path)
    >>> len(f), f.record(1), f.raw(0)
    (2, {'a': 2}, b'{"a": 1}')
"""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing
from types import ModuleType
from typing import Any

import numpy as np

from sjsonl.data.readahead import (
    FIRST_WINDOW,
    coalesced_runs,
    read_many_ahead,
    reads_in_windows,
    spans_ahead,
    windows_fetched_ahead,
)
from sjsonl.errors import IndexFileError, RecordDecodeError, RecordFieldError, SJSONLError, StaleDataError
from sjsonl.index import line_number_at, load_or_build_index
from sjsonl.index.background import BackgroundCheck
from sjsonl.index.layout import LoadedIndex
from sjsonl.index.packed import Offsets, PackedOffsets, prefix_crc32
from sjsonl.index.store import read_index
from sjsonl.records.decode import DECODE_ERRORS, FieldMismatch, excerpt, fast_loads, second_look
from sjsonl.records.fields import FieldProjection
from sjsonl.storage import Storage, byte_view, open_storage


def _compiled_reader() -> ModuleType | None:
    try:
        from sjsonl.data import _hot
    except ImportError:  # built without a C compiler: records are read in Python
        return None
    return _hot


#: ``ds[i]`` and ``for r in ds`` in compiled steps (``sjsonl/data/_hot.c``), or None where not built.
HOT = _compiled_reader()
_TRAILING_WS = b" \t\r\n"
Decoder = Callable[[bytes], Any]  # raises ValueError on bad input
_BLOCK = 8192  # records per block on sequential paths
#: Bytes per read when a storage without a memory map is read block by block, or nearby records are
#: merged into one read: large enough to amortise a request, small enough to hold in memory.
_READ_BYTES = 16 << 20


def iter_blocks(
    storage: Storage,
    offsets: Offsets,
    end: int,
    lo: int,
    hi: int,
    read: Callable[[int, int, list[int]], bytes] | None = None,
) -> Iterator[tuple[Any, int, list[int]]]:
    """Records ``lo..hi`` block by block, as ``(buffer, base, bounds)``: record ``k`` of a block is
    ``buffer[bounds[k] : bounds[k + 1]]``, and ``buffer`` starts at byte ``base`` of the data.

    A memory-mapped storage is sliced in place (``base`` 0). Any other storage is read with ONE read per
    block — at most :data:`_BLOCK` records and (unless one record is larger) :data:`_READ_BYTES` bytes —
    by ``read(lo, hi, span_ends)`` (default ``storage.read(lo, hi)``; an :class:`IndexedFile` checks the
    spans end lines).

    Example:
        >>> from sjsonl.storage import MemoryFile
        >>> storage = MemoryFile(b'[1]\\n[2]\\n[3]\\n')
        >>> list(iter_blocks(storage, np.array([0, 4, 8]), 12, 1, 3))
        [(b'[2]\\n[3]\\n', 4, [0, 4, 8])]
    """
    mapped = getattr(storage, "buffer", None)
    block_lo = lo
    while block_lo < hi:
        block_hi = min(hi, block_lo + _BLOCK)
        bounds = offsets[block_lo : block_hi + 1].tolist()
        if len(bounds) == block_hi - block_lo:  # the block holds the last record
            bounds.append(end)
        if mapped is not None:
            check_unchanged(storage)
            yield mapped(), 0, bounds
            block_lo = block_hi
            continue
        base = bounds[0]
        if bounds[-1] - base > _READ_BYTES:  # long records: fewer of them per read
            cut = max(1, int(np.searchsorted(bounds, base + _READ_BYTES, side="right")) - 1)
            bounds = bounds[: cut + 1]
        data = storage.read(base, bounds[-1]) if read is None else read(base, bounds[-1], bounds[1:])
        yield data, base, [b - base for b in bounds]
        block_lo += len(bounds) - 1


def check_unchanged(storage: Storage, *, content: bool = False) -> None:
    """Raise :class:`~sjsonl.errors.StaleDataError` if the local file behind ``storage`` (itself, or the one
    a decompressor reads) was truncated or rewritten in place since it was indexed (one ``fstat`` when
    nothing changed). Called per batch and per block of iteration, whose slices of a memory map are not
    checked one by one, and before any error that would blame the data or the index. ``content``: the
    indexed bytes of a local file hashed again too — before an index is blamed for bytes that do not fit
    it, since a rewrite within the clock tick of the stamp keeps its size, mtime and ctime."""
    name = "check_content" if content and hasattr(storage, "check_content") else "check_unchanged"
    check = getattr(storage, name, None)
    if check is None:
        check = getattr(getattr(storage, "source", None), "check_unchanged", None)
    if check is not None:
        check()


def ends_lines(data: bytes, lo: int, span_ends: list[int], data_end: int) -> bool:
    """Whether every record span of ``data`` (the bytes from offset ``lo``) that ends at one of
    ``span_ends`` ends a line, as indexed records do — but the data's last, which may lack a ``\\n``.

    Example:
        >>> ends_lines(b'[1]\\n[2]\\n[3]', 0, [4, 8, 11], 11), ends_lines(b'[1]\\n[2]', 0, [4, 7], 11)
        (True, False)
    """
    last = [e - lo - 1 for e in span_ends if e < data_end]
    if not last:
        return True
    if len(data) <= last[-1]:
        return False
    if len(last) <= 64:  # (a record or a merged few: indexing bytes beats a numpy round trip, ~10 µs)
        return all(data[i] == 0x0A for i in last)
    view = np.frombuffer(data, dtype=np.uint8)
    return bool(np.all(view[last] == 0x0A))


class _CheckedSpans:
    """The hot path's buffer for storages read by ranges (compressed, remote): ``spans[a:b]`` reads the
    record span ``[a, b)`` and checks it ends a line (see :meth:`IndexedFile.read_spans`)."""

    __slots__ = ("file",)

    def __init__(self, file: IndexedFile) -> None:
        self.file = file

    def __getitem__(self, key: slice) -> bytes:
        return self.file.read_spans(key.start, key.stop, [key.stop])


class IndexedFile:
    """A JSONL file with its record offsets, opened (and the index built) on construction.

    ``path`` is a local path or a URL; ``.gz`` and seekable ``.zst`` files are read in place (see
    :func:`sjsonl.storage.open_storage`); ``storage_options`` go to fsspec for URLs. The storage is
    pinned to the version of the data the index describes, for this object's life and in its copies.
    """

    readahead = 0  # records whose pages are hinted ahead of the reads (set on copies: sjsonl.data.readahead)

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        build_index_on_load: bool = True,
        index_dir: str | os.PathLike[str] | None = None,
        index_path: str | os.PathLike[str] | None = None,
        workers: int | None = None,
        progress: bool | None = None,
        storage_options: dict[str, Any] | None = None,
        mmap: bool = True,
        layouts: Callable[[Storage], tuple[str, ...]] | None = None,
        defer_verify: bool = False,
        verify_in_background: bool = False,
        compact: bool | None = None,
        allow_nan: bool = True,
        appends: str = "verify",
        index_from: Callable[[Storage], LoadedIndex] | None = None,
    ) -> None:
        self.storage = open_storage(path, storage_options, mmap=mmap)
        self.allow_nan = allow_nan  # NaN/Infinity/-Infinity read as floats (json.loads), or refused
        self._index_args: dict[str, Any] = dict(  # for a rebuild, should a deferred check fail
            index_dir=None if index_dir is None else os.fspath(index_dir),
            index_path=None if index_path is None else os.fspath(index_path),
            workers=workers,
            progress=progress,
            layouts=("",) if layouts is None else layouts(self.storage),
            compact=compact,  # a compact index file (sjsonl.index.packed): True, False, or None (by size)
            appends=appends,  # "trust": a file that grew is checked in O(1) (sjsonl.index.leaves)
        )
        if index_from is not None:  # offsets kept elsewhere (a corpus manifest: sjsonl.index.adopted)
            loaded = index_from(self.storage)
        else:
            loaded = load_or_build_index(
                self.storage, build=build_index_on_load, defer_verify=defer_verify, **self._index_args
            )
        self.layout = loaded.layout  # "": lines; else the elements of a JSON document (sjsonl.data.document)
        self.index_origin = loaded.origin  # "found", "extended" (after an append) or "built"
        self.alongside = loaded.alongside  # what saw the scan's chunks (sjsonl.records.alongside), used once
        # An index whose O(records) checks were deferred is mapped and checked on first use (.offsets)
        self._deferred = not loaded.verified
        self._offsets: Offsets | None = None if self._deferred else loaded.offsets
        self.index_path = loaded.path
        # ...or checked on a thread from now on, the first use waiting for it (sjsonl.index.background)
        self._check: BackgroundCheck | None = None
        if self._deferred and verify_in_background and loaded.path is not None:
            self._check = BackgroundCheck(loaded.path)
        self.checksum = loaded.checksum
        self.bad_records = np.zeros(0, dtype=np.int64)  # left out under on_bad_lines="skip"
        self.stamp = loaded.stamp
        self.end = loaded.stamp.size  # bytes past this were not indexed (e.g. appended since)
        self.n = len(loaded.offsets)
        self._hot: tuple[Any, memoryview, int, int] | None = None
        self._hot_records: Any = None

    @property
    def path(self) -> str:
        return self.storage.path

    def __len__(self) -> int:
        return self.n

    def record_sizes(self) -> np.ndarray:
        """Bytes each record spans, line ending and any blank lines after it included (int64)."""
        return np.diff(np.append(self.offsets.astype(np.int64), self.end))

    def span(self, i: int) -> tuple[int, int]:
        """Byte range of record ``i`` including any blank lines after it (JSON whitespace)."""
        offsets = self.offsets
        return int(offsets[i]), int(offsets[i + 1]) if i + 1 < self.n else self.end

    def raw(self, i: int) -> bytes:
        """The record's bytes, without its line ending."""
        start, end = self.span(i)
        return byte_view(self.storage)[start:end].rstrip(_TRAILING_WS)

    def hot_state(self) -> tuple[Any, Any, int, int]:
        """(bytes, offsets as a memoryview, last record number, end of data) for the hot read path.

        ``bytes`` is the memory map of a local file; for other storages, a view whose slices are reads
        (:class:`~sjsonl.storage.RangeView`), so one code path serves all. A memoryview yields Python
        ints, cheaper to slice with than numpy scalars; a compact index gives its decoder instead
        (``bounds[i]`` decoded in C, :class:`~sjsonl.index.packed.PackedOffsets`). Cached per object:
        pickling drops it (see ``__getstate__``); after a fork the view's storage reopens its handles
        itself."""
        hot = self._hot
        if hot is None:
            mapped = getattr(self.storage, "buffer", None) is not None
            buf = byte_view(self.storage) if mapped else _CheckedSpans(self)
            # ndarray.data is memoryview(self.offsets) (numpy's stubs type ndarray as a Buffer only on 3.12+)
            hot = self._hot = (buf, self.offsets.data, self.n - 1, self.end)
        return hot

    def hot_records(self, projection: FieldProjection | None = None) -> Any:
        """The compiled reader of this memory-mapped file's records (``HotRecords``: ``ds[i]`` and iteration
        in C, over :meth:`hot_state`), each parsed in full (a record that fails goes to the slow path of
        :meth:`record`) or by ``projection``'s steps — or None: nothing compiled, another storage (read by
        checked ranges), pages hinted ahead (:mod:`sjsonl.data.readahead`), or a compact index's offsets
        (decoded by their own C). The full one is cached per object, like the hot state."""
        hot = self._hot_records if projection is None else None
        if hot is not None or HOT is None or self.readahead:
            return hot
        if getattr(self.storage, "buffer", None) is None:
            return None
        buf, bounds, _, end = self.hot_state()
        if not isinstance(bounds, memoryview):
            return None
        if projection is None:
            hot = self._hot_records = HOT.HotRecords(buf, bounds, end, fast_loads, self._slow_decode)
            return hot
        parse, check, convert = projection.steps()
        slow = functools.partial(self._decode_one, projection.project)
        return HOT.HotRecords(buf, bounds, end, parse, slow, check, convert)

    def read_spans(self, lo: int, hi: int, span_ends: list[int]) -> bytes:
        """Bytes ``[lo, hi)`` of a storage read by ranges, holding record spans that end at ``span_ends``
        — checked to end lines. Where they do not, the bytes read are not the indexed ones: the data
        changed (:class:`~sjsonl.errors.StaleDataError`), or what the storage saved to find them (gzip
        seek points) is wrong — dropped, and read again — or, failing both, the index is corrupt."""
        data = self.storage.read(lo, hi)
        if self.layout or ends_lines(data, lo, span_ends, self.end):  # (a document's elements are no lines)
            return data
        check_unchanged(self.storage)
        data = self.storage.read(lo, hi)  # the file may have changed and changed back while we read
        if ends_lines(data, lo, span_ends, self.end):
            return data
        why = f"the records read at bytes [{lo}, {hi}) of {self.path} do not end lines"
        distrust = getattr(self.storage, "distrust_saved_state", None)
        if distrust is not None and distrust(why):
            data = self.storage.read(lo, hi)
            if ends_lines(data, lo, span_ends, self.end):
                return data
        check_unchanged(self.storage, content=True)
        raise IndexFileError(f"index {self.index_path} does not match {self.path}: {why} (a corrupt index)")

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
        except DECODE_ERRORS:
            return self._slow_decode(int(start), int(end))

    def _slow_decode(self, start: int, end: int) -> Any:
        data = byte_view(self.storage)[start:end]
        try:
            return second_look(data, self.allow_nan)  # every caller tried fast_loads first
        except ValueError as exc:
            raise self.decode_error(start, data, str(exc)) from None

    def decode_error(
        self, start: int, data: bytes, reason: str, error: type = RecordDecodeError
    ) -> SJSONLError:
        """The located decode error — or, when the data file changed since it was indexed, the
        :class:`~sjsonl.errors.StaleDataError` that names it; or, when the span does not start a line of
        unchanged data, an error that blames the index (corrupt offsets)."""
        check_unchanged(self.storage)  # a rewrite in place shows here first: never blame a healthy index
        view = byte_view(self.storage)
        after_bom = start == 3 and view[0:3] == b"\xef\xbb\xbf"
        if start > 0 and view[start - 1 : start] != b"\n" and not after_bom:
            check_unchanged(self.storage, content=True)
            return IndexFileError(
                f"index {self.index_path} does not match {self.path}: its offset {start} is not the start of "
                "a line (a corrupt index); delete it to rebuild"
            )
        line = line_number_at(self.storage, start)
        return error(self.path, line, start, excerpt(data), reason)

    def decode_spans(
        self,
        spans: Iterable[tuple[int, int]],
        decode: Decoder | None = None,
        *,
        buf: Any = None,
        base: int = 0,
    ) -> Iterator[Any]:
        """Decode each ``(start, end)`` byte span; ``decode`` replaces the default full parse.

        Spans index ``buf`` — by default the whole data — whose first byte is at offset ``base`` of the
        data (errors report offsets in the data)."""
        if buf is None:
            buf = byte_view(self.storage)
        if decode is None:
            for start, end in spans:
                try:
                    yield fast_loads(buf[start:end])
                except DECODE_ERRORS:
                    yield self._slow_decode(start + base, end + base)
        elif getattr(decode, "way", None) == "full":
            # a projection that measured the full parse faster (records.fields): parse as the plain path
            # does, then pick; anything unusual goes through the decoder itself, which locates its errors
            pick = decode.pick  # type: ignore[attr-defined]
            for start, end in spans:
                try:
                    rec = pick(fast_loads(buf[start:end]))
                except (*DECODE_ERRORS, FieldMismatch):
                    rec = next(self._decode_each([(start, end)], decode, buf, base))
                yield rec
        else:  # a projection that measured skipping faster calls its projected way directly
            one = decode.project if getattr(decode, "way", None) == "projected" else decode  # type: ignore[attr-defined]
            yield from self._decode_each(spans, one, buf, base)

    def _decode_each(
        self, spans: Iterable[tuple[int, int]], decode: Decoder, buf: Any, base: int
    ) -> Iterator[Any]:
        for start, end in spans:
            try:
                yield decode(buf[start:end])
            except FieldMismatch as exc:
                raise self.decode_error(start + base, buf[start:end], str(exc), RecordFieldError) from None
            except ValueError as exc:
                raise self.decode_error(start + base, buf[start:end], str(exc)) from None

    def iter_good_records(self, lo: int = 0, hi: int | None = None) -> Iterator[Any]:
        """:meth:`iter_records` without the records left out as bad lines (``bad_records``)."""
        hi = self.n if hi is None else hi
        bad = self.bad_records
        start = lo
        for b in bad[np.searchsorted(bad, lo) : np.searchsorted(bad, hi)].tolist():
            yield from self.iter_records(start, b)
            start = b + 1
        yield from self.iter_records(start, hi)

    def iter_records(
        self, lo: int = 0, hi: int | None = None, decode: Decoder | None = None
    ) -> Iterator[Any]:
        """Records ``lo..hi`` in file order: block-wise offsets, no per-record index arithmetic — for a
        memory-mapped file read whole, in C with no Python frame per record (:meth:`hot_records`)."""
        hi = self.n if hi is None else hi
        # in full, or by a projection that measured skipping faster: in C where the file allows it
        if decode is None or (isinstance(decode, FieldProjection) and decode.way == "projected"):
            hot = self.hot_records(decode)
            if hot is not None:  # (lo..hi checked there: an IndexError, as a view's numbers would give)
                return hot.iter(lo, hi, functools.partial(check_unchanged, self.storage))  # type: ignore[no-any-return]
        return self._iter_blocks(lo, hi, decode)

    def _decode_one(self, decode: Decoder, start: int, end: int) -> Any:
        """The record at ``[start, end)`` of the data by ``decode``, its errors located."""
        return next(self._decode_each([(start, end)], decode, byte_view(self.storage), 0))

    def _iter_blocks(self, lo: int, hi: int, decode: Decoder | None) -> Iterator[Any]:
        for buf, base, bounds in iter_blocks(self.storage, self.offsets, self.end, lo, hi, self.read_spans):
            if decode is not None and getattr(decode, "way", None) == "full":
                # decode_spans' full way inlined, as the plain path below is (a nested generator costs)
                pick, start = decode.pick, bounds[0]  # type: ignore[attr-defined]
                for end in bounds[1:]:
                    try:
                        rec = pick(fast_loads(buf[start:end]))
                    except (*DECODE_ERRORS, FieldMismatch):
                        rec = next(self._decode_each([(start, end)], decode, buf, base))
                    yield rec
                    start = end
                continue
            if decode is not None:
                yield from self.decode_spans(itertools.pairwise(bounds), decode, buf=buf, base=base)
                continue
            # decode_spans inlined: iteration is a hot path and a nested generator costs ~8% here
            start = bounds[0]
            for end in bounds[1:]:
                try:
                    yield fast_loads(buf[start:end])
                except DECODE_ERRORS:
                    yield self._slow_decode(start + base, end + base)
                start = end

    def _spans_at(self, indices: np.ndarray) -> tuple[list[int], list[int]]:
        indices = np.asarray(indices, dtype=np.int64)
        starts = self.offsets[indices].tolist()
        nxt = indices + 1
        last = nxt >= self.n
        ends = self.offsets[np.where(last, 0, nxt)].astype(np.int64)
        ends[last] = self.end
        return starts, ends.tolist()

    def records_at(self, indices: np.ndarray, decode: Decoder | None = None) -> list[Any]:
        """Records at many positions (any order), with the offsets looked up in one vectorised step."""
        starts, ends = self._spans_at(indices)
        if getattr(self.storage, "buffer", None) is not None:
            check_unchanged(self.storage)
            return list(self.decode_spans(spans_ahead(self, starts, ends), decode))
        return self._read_and_decode(starts, ends, decode)

    def iter_at(self, indices: np.ndarray, decode: Decoder | None = None) -> Iterator[Any]:
        """:meth:`records_at` as an iterator that decodes one record at a time from a memory map: one live
        record, not a block of them pushing each other out of the CPU caches (~1.4× on ~180-byte records)."""
        if reads_in_windows(self) and len(indices) > FIRST_WINDOW:
            return self.iter_windows((indices,), decode)
        if getattr(self.storage, "buffer", None) is None:
            return iter(self.records_at(indices, decode))  # batched reads pay off more than laziness
        check_unchanged(self.storage)
        starts, ends = self._spans_at(indices)
        return self.decode_spans(spans_ahead(self, starts, ends), decode)

    def _read_and_decode(self, starts: list[int], ends: list[int], decode: Decoder | None) -> list[Any]:
        """Records at these spans with few reads: in file order, spans closer than the storage's
        ``coalesce_gap`` share one read (up to :data:`_READ_BYTES`), and the reads go out together."""
        runs = coalesced_runs(starts, ends, self.storage.coalesce_gap, _READ_BYTES)
        blobs = read_many_ahead(self, [(lo, hi) for lo, hi, _ in runs])
        return self._decode_runs(starts, ends, runs, blobs, decode)

    def iter_windows(self, blocks: Iterable[np.ndarray], decode: Decoder | None = None) -> Iterator[Any]:
        """:meth:`iter_at` of ``blocks`` in turn, in windows that run on across them (remote objects)."""
        with closing(windows_fetched_ahead(self.storage, blocks, self._spans_at, _READ_BYTES)) as windows:
            for starts, ends, runs, blobs in windows:
                yield from self._decode_runs(starts, ends, runs, blobs, decode)

    def _decode_runs(
        self, starts: list[int], ends: list[int], runs: list[list], blobs: list[bytes], decode: Decoder | None
    ) -> list[Any]:  # fmt: skip
        """The records at ``starts``/``ends`` from ``blobs``, the bytes of their :func:`coalesced_runs`."""
        out: list[Any] = [None] * len(starts)
        plain = decode is None and not self.layout
        for (lo, hi, members), blob in zip(runs, blobs):
            if plain and len(members) == 1:  # one record (random access): decode_spans inlined, ~2x faster
                k = members[0]
                if not ends_lines(blob, lo, [hi], self.end):
                    blob = self.read_spans(lo, hi, [hi])
                try:
                    out[k] = fast_loads(blob)
                except DECODE_ERRORS:
                    out[k] = self._slow_decode(lo, hi)
                continue
            span_ends = sorted(ends[k] for k in members)
            if not self.layout and not ends_lines(blob, lo, span_ends, self.end):
                blob = self.read_spans(lo, hi, span_ends)
            spans = [(starts[k] - lo, ends[k] - lo) for k in members]
            for k, rec in zip(members, self.decode_spans(spans, decode, buf=blob, base=lo)):
                out[k] = rec
        return out

    @property
    def offsets(self) -> Offsets:
        """Record start offsets — in a copy from another process, or when the checks were deferred (a
        dataset of many files), mapped from the index file on first use and checked: it must be the very
        index this object was opened with, or that index extended in place after an append."""
        offsets = self._offsets
        if offsets is None:
            offsets = self._offsets = self._map_index()
        return offsets

    def _map_index(self) -> Offsets:
        assert self.index_path is not None
        check, self._check = self._check, None
        try:
            found = read_index(self.index_path) if check is None else check.result()
        except IndexFileError as exc:
            if self._deferred:  # this process opened it: rebuilt as an open would have
                return self._rebuild(exc)
            raise StaleDataError(f"index of {self.path} is unusable in this process: {exc}") from None
        except OSError as exc:
            raise StaleDataError(f"index of {self.path} is gone or unusable in this process: {exc}") from None
        meta, offsets = found.meta, found.offsets
        if meta.stamp.same_bytes(self.stamp) and (meta.records, meta.checksum) == (self.n, self.checksum):
            return offsets  # (written again with a new ctime after a chmod, say: the same index)
        if meta.records > self.n and prefix_crc32(offsets, self.n) == self.checksum:
            # extended after an append: this object's records come first
            return offsets.limit(self.n) if isinstance(offsets, PackedOffsets) else offsets[: self.n]
        raise StaleDataError(
            f"index {self.index_path} was rebuilt after this dataset was opened (the data changed); "
            "reopen the dataset"
        )

    def _rebuild(self, why: IndexFileError) -> Offsets:
        """The index failed its deferred checks: build it again; it must describe what this object counted."""
        loaded = load_or_build_index(self.storage, **self._index_args)
        if loaded.stamp != self.stamp or len(loaded.offsets) != self.n:
            raise StaleDataError(
                f"{why}; rebuilt, it no longer matches the open dataset: reopen it"
            ) from None
        self.index_path, self.checksum, self._deferred = loaded.path, loaded.checksum, False
        self.index_origin = loaded.origin
        return loaded.offsets

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_hot"] = state["_hot_records"] = state["alongside"] = None
        state["_check"] = None  # (a thread): the copy checks on first use, or finds it checked already
        if self.index_path is not None:
            state["_offsets"] = None  # the receiving process maps the index file itself, on first use
        return state
