"""Dataset layer: :class:`JSONLDataset`, a lazy, random-access sequence of JSON records.

Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "data.jsonl")
    >>> _ = open(path, "w").write('{"x": 0}\\n{"x": 1}\\n\\n{"x": 2}\\n')
    >>> ds = JSONLDataset(path)          # builds data.index.npy beside it when missing
    >>> len(ds), ds[0], ds[-1], ds[1:]
    (3, {'x': 0}, {'x': 2}, [{'x': 1}, {'x': 2}])
    >>> [r["x"] for r in ds.skip(1)]
    [1, 2]
"""

from __future__ import annotations

import copy
import itertools
import os
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any, Union

import numpy as np

from sjsonl.data.members import member_counts, member_paths, open_members
from sjsonl.data.packing.packable import Packable
from sjsonl.data.readahead import fetches_ahead, reads_in_windows
from sjsonl.data.source import HOT, IndexedFile
from sjsonl.data.transforms import columns as _columns
from sjsonl.data.transforms.pipeline import Pipeline
from sjsonl.data.transforms.surface import HFSurface
from sjsonl.data.views import Views
from sjsonl.errors import ArgumentTypeError, BadLineWarning, InvalidArgumentError, out_of_range, plural
from sjsonl.index import line_number_at
from sjsonl.index.leaves import check_appends
from sjsonl.records.badlines import BadLine, BadLines, bad_lines_of, check_policy, report
from sjsonl.records.decode import DECODE_ERRORS, fast_loads
from sjsonl.records.fields import FieldProjection, TypedDecoder
from sjsonl.sampling.maps import IndexMap, SkipMap


class _PythonLookup:
    """Where the compiled base is not built: ``[]`` is :meth:`JSONLDataset._getitem` (defined there)."""


#: The base type whose ``[]`` serves ``ds[i]`` in one compiled step (``sjsonl/data/_hot.c``), if built.
_Lookup: type = _PythonLookup if HOT is None else HOT.Lookup

PathLike = Union[str, "os.PathLike[str]"]
_BLOCK = 8192


class JSONLDataset(_Lookup, Views, HFSurface, Packable):
    """Records of one or more JSONL files, read on demand through a line index.

    Args:
        path: a file, or a list of files read as one dataset in the given order. Local paths or URLs
            (``s3://bucket/train.jsonl``: any fsspec protocol); ``.gz`` and seekable ``.zst`` files are
            read in place, without decompressing them to disk (see :mod:`sjsonl.storage`).
        build_index_on_load: build (and save) a missing or stale index; if False, raise instead.
        index_dir: keep the index in this directory (default: beside the data, or ``$SJSONL_INDEX_DIR``,
            or a cache directory when the data's directory is read-only).
        index_path: an explicit index file (single file only).
        record_transform: a function applied to every record returned, one record at a time (🤗's
            ``with_transform`` is per batch: :mod:`sjsonl.data.transforms.format`).
        workers: threads for index building (default: all cores, up to 8).
        progress: show a progress bar while indexing (default: only for large files on a terminal).
        storage_options: options for fsspec when ``path`` is a URL (credentials, ``endpoint_url``, …).
            The index of a remote file is kept in the cache directory, keyed by its URL.
        mmap: read local files through a memory map (the default: the fastest ``ds[i]``), whose slices
            are copied under a guard: a file truncated or rewritten in place raises
            :class:`~sjsonl.errors.StaleDataError` naming it, never SIGBUS (see :mod:`sjsonl.storage.local`).
            ``mmap=False`` reads with ``pread``, at about 2× the cost of a short-record ``ds[i]``.
        field: the rows are the list under this top-level key of each file, a JSON document (🤗's
            ``field=``). Without it, a ``.json`` file holding one array has its elements as rows (see
            :mod:`sjsonl.data.document`).
        on_bad_lines: ``"error"`` (default: every line is a record; a bad one raises its located error
            when read), ``"skip"`` (lines that are not valid JSON are left out: one parse of every record
            at first open, remembered beside the index; ``bad_lines`` lists them) or ``"warn"`` (skip,
            and warn once). See :mod:`sjsonl.records.badlines`.
        fields, missing: decode only these fields (dotted paths reach into nested objects:
            ``"meta.lang"``; a tuple of keys names a path whose keys hold dots); each record is its
            subset. ``missing``: ``"absent"`` (left out), ``"none"`` or ``"error"`` for a field a record
            lacks. See :mod:`sjsonl.records.fields`.
        schema: decode every record as this type (a ``msgspec.Struct``, dataclass or ``TypedDict``),
            validated while decoding; a mismatch raises, naming the file, line and field.
        allow_nan: ``NaN``, ``Infinity`` and ``-Infinity`` (what ``json.dumps`` writes for float nan and
            inf) read as floats, as ``json.loads`` reads them (the default); ``False`` refuses them with
            the located :class:`~sjsonl.errors.RecordDecodeError` (strict RFC 8259 JSON).
        executor: build the missing indexes first, one task per file on this
            :class:`concurrent.futures.Executor` (a process pool, a Dask ``client.get_executor()``): see
            :func:`sjsonl.build_indexes`, which this calls with ``index_dir``, ``workers`` and the rest.
        compact: keep the index as a compact ``.index.packed`` (about 1–1.6 bytes a record instead of 4
            or 8, memory-mapped, O(1) access; see :mod:`sjsonl.index.packed`) — ``True`` writes (or
            converts to) one, ``False`` the plain ``.index.npy``, ``None`` (default) takes whichever is
            there and builds compact only when the plain index would be 256 MiB or more.
        appends: how a file that grew since it was indexed is checked before its index is extended (on a
            reopen or :meth:`refresh`). ``"verify"`` (default): every indexed byte is hashed again, so an
            edit anywhere plus an append is a rebuild. ``"trust"``, for a producer that only ever
            appends: the file must be the one indexed, grown in place with its times not set back, and
            only its first and last 64 KiB, the last record's bytes and two sampled 2 MiB leaves are
            hashed again — O(appended bytes), not a read of the whole file (leaf digests kept beside the
            index as ``.index.leaves``). It cannot see an edit in place elsewhere in the indexed bytes:
            records there are read as the file holds them now (see :mod:`sjsonl.index.leaves`).

    ``ds[i]`` accepts Python and numpy integers (negative count from the end); slices and integer
    lists/arrays return lists. Every call returns a fresh object. Datasets pickle by path and remap the
    file and index in the receiving process, so they are safe for DataLoader / MindSpore workers.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
        >>> _ = open(path, "w").write('{"q": "a"}\\n{"q": "b"}\\n')
        >>> ds = JSONLDataset(path)
        >>> ds[np.int64(1)], ds[[1, 0]], ds.raw(0)
        ({'q': 'b'}, [{'q': 'b'}, {'q': 'a'}], b'{"q": "a"}')
    """

    #: What predicts the batches a DataLoader will ask for (:mod:`sjsonl.data.batches_ahead`), or None.
    batches_ahead: Any = None  # (set by sjsonl.torch.DistributedSampler for the dataset it samples)

    def __init__(
        self,
        path: PathLike | Sequence[PathLike],
        build_index_on_load: bool = True,
        *,
        index_dir: PathLike | None = None,
        index_path: PathLike | None = None,
        record_transform: Callable[[Any], Any] | None = None,
        workers: int | None = None,
        progress: bool | None = None,
        storage_options: dict[str, Any] | None = None,
        mmap: bool = True,
        field: str | None = None,
        on_bad_lines: str = "error",
        fields: Sequence[str | tuple[str, ...]] | None = None,
        missing: str = "absent",
        schema: type | None = None,
        executor: Executor | None = None,
        compact: bool | None = None,
        allow_nan: bool = True,
        appends: str = "verify",
    ) -> None:
        paths = [path] if isinstance(path, (str, os.PathLike)) else list(path)
        if not paths:
            raise InvalidArgumentError("JSONLDataset needs at least one file")
        if executor is not None and build_index_on_load:
            if index_path is not None:
                raise InvalidArgumentError("executor= builds indexes in index_dir; it cannot use index_path")
            from sjsonl.data.corpus import build_indexes  # (it imports this module)

            build_indexes(paths, executor=executor, index_dir=index_dir, workers=workers, progress=progress,
                          field=field, storage_options=storage_options, compact=compact)  # fmt: skip
        if fields is not None and schema is not None:
            raise InvalidArgumentError("give fields= or schema=, not both (a schema names its fields)")
        self._transform = record_transform
        self._allow_nan = allow_nan
        self._decode: Callable[[Any], Any] | None = None  # a partial or typed decoder (sjsonl.records.fields)
        if fields is not None:
            self._decode = FieldProjection(fields, missing, allow_nan)  # type: ignore[arg-type]
        elif schema is not None:
            self._decode = TypedDecoder(schema, allow_nan)
        self._opening: tuple[list, str, dict[str, Any]] = (paths, check_policy(on_bad_lines), dict(
            field=field, build_index_on_load=build_index_on_load, index_dir=index_dir, index_path=index_path,
            workers=workers, progress=progress, storage_options=storage_options, mmap=mmap, compact=compact,
            allow_nan=allow_nan, appends=check_appends(appends),
        ))  # fmt: skip
        self._open()
        self._choose_way()

    def _open(self) -> None:
        paths, policy, options = self._opening
        self._files = open_members(paths, **options)  # many files: each opened at its first read
        # (accumulate, not np.cumsum: its first call costs ~40 µs of a fresh process's first open)
        counts = member_counts(self._files).tolist()
        self._bounds = np.array([0, *itertools.accumulate(counts)], dtype=np.int64)
        self._single = self._files[0] if len(self._files) == 1 else None
        self._order: IndexMap | None = None
        self._len = int(self._bounds[-1])
        self._plain = self._single is not None and self._transform is None and self._decode is None
        self._hot: tuple | None = None  # per-process read state (see IndexedFile.hot_state)
        self.bad_lines: Sequence[BadLine] = []  # a BadLines under on_bad_lines="skip"/"warn"
        if policy != "error":
            self._skip_bad_lines(policy, options["workers"], options["progress"])

    def refresh(self) -> JSONLDataset:
        """See the records appended to the files since they were opened; returns the dataset itself.

        Each file's index is brought up to date as on a reopen: a file that only grew has just its new
        bytes scanned and its index extended (:mod:`sjsonl.index.append`), any other change rebuilds it.
        Views made before keep the records they were made from; make them again from the refreshed
        dataset (a view itself cannot be refreshed).

        Example:
            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "log.jsonl")
            >>> _ = open(path, "w").write('{"step": 1}\\n')
            >>> ds = JSONLDataset(path)
            >>> _ = open(path, "a").write('{"step": 2}\\n')
            >>> len(ds), len(ds.refresh()), ds[-1]
            (1, 2, {'step': 2})

        With ``appends="trust"`` (a producer that only ever appends) a refresh hashes the bytes appended
        and a few leaves of the rest again, not every indexed byte (what that cannot see: the ``appends``
        argument above):

            >>> import shutil
            >>> ds = JSONLDataset(path, appends="trust")  # (its index, built before, is hashed in full once)
            >>> _ = open(path, "a").write('{"step": 3}\\n')
            >>> len(ds.refresh()), sorted(os.listdir(os.path.dirname(path)))
            (3, ['log.index.leaves', 'log.index.npy', 'log.jsonl'])
            >>> shutil.rmtree(os.path.dirname(path))
        """
        if self._order is not None and not isinstance(self._order, SkipMap):
            raise InvalidArgumentError(
                f"{self._name()} cannot be refreshed: refresh the dataset it came from, then make it again"
            )
        self._open()
        return self

    def _skip_bad_lines(self, policy: str, workers: int | None, progress: bool | None) -> None:
        found = [bad_lines_of(f, workers, progress) for f in self._files]
        for f, bad in zip(self._files, found):
            f.bad_records = bad.records()  # the schema pass skips them
        self.bad_lines = BadLines.join(found, self._bounds.tolist())
        if self.bad_lines:
            self._order = SkipMap(self._len, self.bad_lines.records())
            self._len, self._plain = len(self._order), False
            if policy == "warn":
                warnings.warn(report(self.bad_lines), BadLineWarning, stacklevel=3)

    # ----------------------------------------------------------------- basics
    @property
    def files(self) -> list[str]:
        """Absolute paths of the data files, in order."""
        return member_paths(self._files)

    @property
    def index_paths(self) -> list[str | None]:
        """Where each file's index lives (``None`` when it could not be saved, or when the corpus manifest
        keeps a small file's offsets: :mod:`sjsonl.data.manifest`)."""
        return [f.index_path for f in self._files]

    @property
    def file_bytes(self) -> int:
        """Bytes of the files behind this dataset, as indexed (decompressed bytes for ``.gz``/``.zst``) — the
        same for every view of them; :attr:`nbytes` counts this dataset's own records."""
        return sum(f.end for f in self._files)

    @property
    def nbytes(self) -> int:
        """Bytes of this dataset's records (of a view: only the records it holds), line endings included:
        ``int(ds.record_sizes().sum())``. O(records) the first time it is asked of a view."""
        if self._order is None:  # every record of the files (skipped bad lines make an order)
            return int(sum(int(f.record_sizes().sum()) for f in self._files))
        return int(self.record_sizes().sum())

    def record_sizes(self) -> np.ndarray:
        """Bytes of each record of this dataset, in its order (a view's records, in the view's order): from
        its first byte to the next record's, so line endings and blank lines after it are included.

        Example:
            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
            >>> _ = open(path, "w").write('{"a": 1}\\n\\n[2]\\n')
            >>> ds = JSONLDataset(path)
            >>> ds.record_sizes().tolist(), ds.nbytes, ds.file_bytes, ds.select([1]).record_sizes().tolist()
            ([10, 4], 14, 14, [4])
        """
        sizes = np.concatenate([f.record_sizes() for f in self._files])
        if self._order is None:
            return sizes
        return sizes[self._order.take(np.arange(self._len, dtype=np.int64))]

    def __repr__(self) -> str:
        names = self.files
        where = (
            repr(names[0]) if len(names) == 1 else repr(names[:3])[:-1] + (", …]" if len(names) > 3 else "]")
        )
        view = "" if self._order is None else f", view of {int(self._bounds[-1])}"
        return f"JSONLDataset({where}, records={self._len}{view})"

    def _name(self) -> str:
        """How errors name this dataset: its file, or its first file and how many more."""
        first = os.path.basename(self.files[0])
        name = first if len(self._files) == 1 else f"{first} and {plural(len(self._files) - 1, 'more file')}"
        if isinstance(self._order, SkipMap):
            return f"{name} without its {plural(len(self.bad_lines), 'bad line')}"
        return name if self._order is None else f"a view of {name}"

    # ----------------------------------------------------------------- access
    if TYPE_CHECKING or HOT is None:  # compiled: the base type's [] serves an int, and calls _getitem

        def __getitem__(self, key: int | np.integer | slice | Sequence[int] | np.ndarray) -> Any:
            return self._getitem(key)

    def _getitem(self, key: int | np.integer | slice | Sequence[int] | np.ndarray) -> Any:
        if type(key) is int or (isinstance(key, np.integer) and not isinstance(key, bool)):
            i = int(key)
            n = self._len
            if i < 0:
                i += n
            if i >= n or i < 0:
                raise out_of_range(int(key), n, self._name())
            if self._plain:  # the hot path: one file, no view, no transform; record() inlined
                hot = self._hot
                if hot is None:
                    hot = self._hot = self._hot_state()
                if type(hot) is not tuple:  # compiled (HotRecords), and a key the base type left: numpy's
                    return hot.get(i)  # type: ignore[union-attr]
                buf, bounds, last, end = hot
                start = bounds[i]
                if i < last:
                    end = bounds[i + 1]
                try:
                    return fast_loads(buf[start:end])
                except DECODE_ERRORS:  # NaN (json.loads reads it), or an error to locate
                    return self._single._slow_decode(int(start), int(end))  # type: ignore[union-attr]
            if self._order is not None:
                i = self._order[i]
            f, j = self._locate(i)
            rec = f.record(j, self._decode)
            return rec if self._transform is None else self._finish([rec], np.array([i], np.int64))[0]
        if isinstance(key, str):  # 🤗: a column, as a list
            return _columns.column(self, key)
        if isinstance(key, slice):
            return self._records_at_positions(np.arange(*key.indices(self._len), dtype=np.int64))
        positions = np.asarray(key)
        if positions.ndim != 1 or (positions.size and positions.dtype.kind not in "iu"):
            raise ArgumentTypeError(f"dataset indices must be integers, slices or integer lists, not {key!r}")
        positions = positions.astype(np.int64)
        bad = (positions < -self._len) | (positions >= self._len)
        if bad.any():
            first = int(positions[bad][0])
            raise out_of_range(first, self._len, self._name())
        return self._records_at_positions(np.where(positions < 0, positions + self._len, positions))

    def _hot_state(self) -> Any:
        """What ``ds[i]`` reads a plain dataset's records with: a compiled ``HotRecords`` (served by the
        base type's ``[]`` without calling Python), else the file's hot state (a tuple, read in
        :meth:`_getitem`) where there is none (see :meth:`IndexedFile.hot_records`)."""
        single: IndexedFile = self._single  # type: ignore[assignment]
        hot = single.hot_records()
        return single.hot_state() if hot is None else hot

    def __getitems__(self, indices: Sequence[int]) -> list[Any]:
        """A batch of records in one vectorised lookup; PyTorch's DataLoader calls this per batch (a remote
        object read by ranges without the cache: from the batches read ahead, :attr:`batches_ahead`)."""
        ahead = self.batches_ahead  # (most datasets have none: nothing more is looked at)
        if ahead is not None and (f := self._windowed()) is not None and fetches_ahead(f):
            got = ahead(self, indices)
            if got is not None:
                return got  # type: ignore[no-any-return]
        return self[indices]

    def _windowed(self) -> IndexedFile | None:
        """The one file whose records an order is read from in windows (a remote object, unmapped, with no
        record transform), if that is how this dataset is read."""
        f = self._single
        return f if f is not None and self._transform is None and reads_in_windows(f) else None

    def raw(self, i: int) -> bytes:
        """The bytes of record ``i`` (no line ending), exactly as stored."""
        f, j = self._file_record(i)
        return f.raw(j)

    def locate(self, i: int) -> tuple[str, int]:
        """Where record ``i`` (of this dataset or view) comes from: ``(file, 1-based line)``, for
        provenance. The line is counted (it differs from the record number where there are blank lines),
        which reads the file up to the record: cheap for a memory-mapped file, a pass for others.

        Example:
            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
            >>> _ = open(path, "w").write('{"a": 1}\\n\\n{"a": 2}\\n')
            >>> ds = JSONLDataset(path)
            >>> ds.locate(1)[1], ds.shuffle(seed=0).locate(0) in [(path, 1), (path, 3)]
            (3, True)
        """
        f, j = self._file_record(i)
        return f.path, line_number_at(f.storage, int(f.offsets[j]))

    def _file_record(self, i: int) -> tuple[IndexedFile, int]:
        n = self._len
        i = int(i) + (n if i < 0 else 0)
        if not 0 <= i < n:
            raise out_of_range(i, n, self._name())
        return self._locate(i if self._order is None else self._order[i])

    def __iter__(self) -> Iterator[Any]:
        if self._order is None and self._transform is None:  # the files' own iterators, chained in C
            return itertools.chain.from_iterable(f.iter_records(decode=self._decode) for f in self._files)
        return self._iter_views()

    def _iter_views(self) -> Iterator[Any]:
        if self._order is None:
            for f, lo in zip(self._files, self._bounds.tolist()):
                it = f.iter_records(decode=self._decode)
                yield from (it if self._transform is None else self._stream(it, itertools.count(lo)))
            return
        yield from self.iter_position_blocks(
            np.arange(lo, min(self._len, lo + _BLOCK)) for lo in range(0, self._len, _BLOCK)
        )

    def iter_position_blocks(self, blocks: Iterable[np.ndarray]) -> Iterator[Any]:
        """:meth:`iter_positions` of each of ``blocks`` in turn (taken as they are needed). Over one remote
        object the windows it is read in run on across the blocks (:func:`sjsonl.data.readahead.windows_of`)
        instead of starting small again at each; elsewhere it is the blocks one after the other.

        Example:
            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
            >>> _ = open(path, "w").write("10\\n11\\n12\\n")
            >>> list(JSONLDataset(path).iter_position_blocks([np.array([2]), np.array([0, 1])]))
            [12, 10, 11]
        """
        f, blocks, sealed = self._windowed(), iter(blocks), []

        def until_mapped(file: IndexedFile) -> Iterator[np.ndarray]:  # a cache sealed during the pass: the
            for block in blocks:  # rest of the blocks read mapped
                if not reads_in_windows(file):
                    sealed.append(block)
                    return
                yield block if self._order is None else self._order.take(block)

        if f is not None:
            yield from f.iter_windows(until_mapped(f), self._decode)
        for block in itertools.chain(sealed, blocks):
            yield from self.iter_positions(block)

    def iter_positions(self, positions: np.ndarray) -> Iterator[Any]:
        """The records at ``positions`` (any order), decoded one at a time as they are consumed — the
        iterator form of ``ds[positions]``; view iteration and :class:`sjsonl.torch.IterableDataset` use it.

        Example:
            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
            >>> _ = open(path, "w").write("10\\n11\\n12\\n")
            >>> list(JSONLDataset(path).iter_positions(np.array([2, 0])))
            [12, 10]
        """
        if self._single is None:
            yield from self._records_at_positions(positions)
            return
        base = positions if self._order is None else self._order.take(positions)
        it = self._single.iter_at(base, self._decode)
        yield from (it if self._transform is None else self._stream(it, iter(base.tolist())))

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_hot": None}  # the map is reopened by the receiving process

    # ----------------------------------------------------------------- views
    # shuffle, select, skip, take, shard, repeat, batch, prefetch: sjsonl.data.views.Views
    def _view(self, order: IndexMap) -> JSONLDataset:
        view = super()._view(order)
        view._plain = False  # the hot path reads the file's records in order only
        return view

    def select_fields(self, fields: Sequence[str], missing: str = "absent") -> JSONLDataset:
        """A view whose records are their subsets at ``fields`` (dotted paths into nested objects), decoded
        without building the rest (see :mod:`sjsonl.records.fields`); ``missing``: ``"absent"``, ``"none"`` or
        ``"error"``.

        Example:
            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
            >>> _ = open(path, "w").write('{"id": 1, "meta": {"lang": "en", "n": 2}}\\n{"id": 2}\\n')
            >>> JSONLDataset(path).select_fields(["meta.lang"])[:]
            [{'meta': {'lang': 'en'}}, {}]
        """
        if self._transform is not None or self._decode is not None:
            raise InvalidArgumentError(
                "select_fields reads the records as stored: call it before map, "
                "transforms, select_columns or a schema"
            )
        view = copy.copy(self)
        view._decode, view._plain = FieldProjection(fields, missing, self._allow_nan), False
        view._choose_way()
        return view

    def select_columns(self, columns: Sequence[str]) -> JSONLDataset:
        """A view whose records hold only ``columns`` (top-level fields; missing ones are ``None``).

        Only those fields are decoded — with msgspec installed, the rest of each line is skipped
        without building it (see :class:`sjsonl.records.fields.Projection`), which pays on long records.

        Example:
            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
            >>> _ = open(path, "w").write('{"id": 1, "text": "..."}\\n{"id": 2}\\n')
            >>> JSONLDataset(path).select_columns(["id"])[:]
            [{'id': 1}, {'id': 2}]
        """
        return _columns.select_columns(self, columns)

    # ----------------------------------------------------------------- internals
    def _finish(self, rows: list[Any], base: np.ndarray) -> list[Any]:
        t = self._transform
        return t.apply(rows, base) if isinstance(t, Pipeline) else [t(r) for r in rows]  # type: ignore[misc]

    def _stream(self, rows: Iterator[Any], base: Iterator[int]) -> Iterator[Any]:
        t = self._transform
        return t.stream(rows, base) if isinstance(t, Pipeline) else map(t, rows)  # type: ignore[arg-type]

    def _with_pipeline(self, pipeline: Pipeline) -> JSONLDataset:
        view = copy.copy(self)
        view._transform = pipeline if pipeline.all_stages else None
        view._plain = view._transform is None and self._single is not None and self._order is None
        view._plain = view._plain and self._decode is None
        return view

    def _with_decode(self, decode: Callable[[Any], Any]) -> JSONLDataset:
        """A view whose records are decoded by ``decode`` (a projection: see ``select_columns``)."""
        view = copy.copy(self)
        view._decode, view._plain = decode, False
        view._choose_way()
        return view

    def _choose_way(self) -> None:
        """Let a projection measure, on the first records of the first file (up to 256, one read), whether
        skipping fields or a full parse and a pick decodes these records faster
        (:meth:`FieldProjection.choose`)."""
        choose = getattr(self._decode, "choose", None)
        if choose is None:
            return
        first = self._files[0]
        if not len(first):
            return
        choose(first.records_at(np.arange(min(len(first), 256)), decode=bytes))

    def _locate(self, base: int) -> tuple[IndexedFile, int]:
        if self._single is not None:
            return self._single, base
        k = int(np.searchsorted(self._bounds, base, side="right")) - 1
        return self._files[k], base - int(self._bounds[k])

    def _records_at_positions(self, positions: np.ndarray) -> list[Any]:
        base = positions if self._order is None else self._order.take(positions)
        if self._single is not None:
            out = self._single.records_at(base, self._decode)
        else:
            out = [None] * len(base)
            which = np.searchsorted(self._bounds, base, side="right") - 1
            for k in np.unique(which).tolist():
                at = np.flatnonzero(which == k)
                recs = self._files[k].records_at(base[at] - self._bounds[k], self._decode)
                for pos, rec in zip(at.tolist(), recs):
                    out[pos] = rec
        return out if self._transform is None else self._finish(out, base)
