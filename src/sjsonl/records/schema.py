"""Schema layer: the type of every top-level column, from ALL rows, computed once and cached with the index.

A typed consumer (MindSpore's numpy rows, 🤗 ``features``/``column_names``) must fix each column's type before
the first row goes out. Guessing from a sample breaks training hours in: a float at row 2501 of an int column
fails mid-epoch. :func:`infer_schema` therefore looks at every record of every file once — in compiled code
on threads (:mod:`sjsonl.records.fast_types`; the rules here stay the definition), with a progress bar on a
terminal — and saves the result beside the file's index as ``<stem>.index.schema`` (e.g.
``train.index.schema`` next to ``train.index.npy``). The cache is keyed by the index's identity (the data
stamp and the record count), so a rebuilt index (the data changed) makes it stale and it is recomputed; a
view of a dataset (shuffle, select, shard …) has its files' schema.

Column types (:class:`ColumnType`) are those JSON values can share:

========================  =========================================================================
``kind``                  the column's values (nulls and missing keys aside)
========================  =========================================================================
``"str"``                 strings
``"int64"``               integers, all within int64
``"float64"``             numbers, some with a fraction (``1`` and ``1.5`` mix into float64)
``"bool"``                booleans
(any of those), ndim d    rectangular lists of depth d of them (shapes may differ from row to row)
``"json"``                anything else: objects, lists of objects, ragged lists, lists with nulls, mixed
                          types, integers beyond int64 — no single numpy dtype holds them
``"null"``                only nulls (or only empty lists) seen: nothing fixes the type yet
========================  =========================================================================

``nullable`` says whether some row lacks the key or holds ``null``.

Example:
    >>> import os, tempfile
    >>> from sjsonl import JSONLDataset
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> rows = [f'{{"id": {i}, "text": "t{i}"}}' for i in range(3000)]
    >>> rows[2501] = '{"id": 2.5, "extra": [1, 2]}'
    >>> _ = open(path, "w").write("\\n".join(rows) + "\\n")
    >>> ds = JSONLDataset(path)
    >>> schema = infer_schema(ds)                  # every row: the float in row 2502 counts
    >>> schema
    RecordSchema(id: float64, text: str?, extra: 1-d int64 array?; 3000 rows)
    >>> schema.column_names, schema["id"].kind, schema["text"].nullable
    (['id', 'text', 'extra'], 'float64', True)
    >>> os.path.exists(schema_cache_path(ds.index_paths[0]))   # cached beside the index
    True
    >>> infer_schema(ds, sample=100)["id"].kind  # sampling only when asked: it can miss row 2502
    'int64'
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from sjsonl.errors import ColumnNotFoundError, InvalidArgumentError
from sjsonl.index.layout import artifact_path
from sjsonl.records import fast_types
from sjsonl.records.alongside import parts_typed_alongside
from sjsonl.records.chunks import map_record_chunks
from sjsonl.storage.sidecar import index_key, read_sidecar, write_sidecar

KINDS = ("str", "int64", "float64", "bool", "json", "null")
CACHE_VERSION = 3
#: The first bytes of a ``.schema`` cache file (see :mod:`sjsonl.storage.sidecar`).
SCHEMA_MAGIC = b"SJSONLsc"
#: Where the compiled pass is not built, files with this many records or more are typed in worker processes
#: too (:mod:`sjsonl.runtime.parallel`; a worker takes ~0.3-0.5 s to start, Python 2.5-8 µs a record).
PARALLEL_MIN_RECORDS = 500_000
_SCALAR_KIND = {str: "str", bool: "bool", float: "float64", int: "int64"}
_INT64 = (-(2**63), 2**63 - 1)

# A signature is (kind, ndim): kind None means "no element seen yet" ([] or [[], []]); ndim None means "a list
# of unknown depth" (a bare []). ("json", 0) absorbs everything. None (the value) is a null: no signature.
Signature = tuple[str | None, int | None]
JSON_SIG: Signature = ("json", 0)


# ------------------------------------------------------------------------------------------ signatures
def _list_shape(value: list) -> tuple[tuple[int, ...], set[type]] | None:
    """Shape and leaf types of a rectangular nested list of scalars, or None when it is not one."""
    if not value or type(value[0]) is not list:
        types = set(map(type, value))
        return ((len(value),), types) if types <= {str, int, float, bool} else None
    subs = [_list_shape(v) if type(v) is list else None for v in value]
    first = subs[0]
    if first is None or any(s is None or s[0] != first[0] for s in subs):
        return None
    return (len(value), *first[0]), set().union(*(s[1] for s in subs if s is not None))


def leaf_kind(types: set[type], ints: Iterable[Any] = ()) -> str | None:
    """The kind a set of leaf Python types shares (``None`` for no types); ``ints`` are range-checked.

    Example:
        >>> leaf_kind({int, float}), leaf_kind({int}, [2**63]), leaf_kind({str, int})
        ('float64', 'json', 'json')
    """
    if not types:
        return None
    kinds = {_SCALAR_KIND[t] for t in types}
    if kinds == {"int64", "float64"}:
        return "float64"
    if len(kinds) != 1:
        return "json"
    kind = kinds.pop()
    if kind == "int64" and any(not _INT64[0] <= i <= _INT64[1] for i in ints):
        return "json"
    return kind


def signature(value: Any) -> Signature | None:
    """The signature of one JSON value (``None`` for null).

    Example:
        >>> signature("a"), signature([[1, 2], [3, 4.5]]), signature([{"r": 1}]), signature([])
        (('str', 0), ('float64', 2), ('json', 0), (None, None))
    """
    t = type(value)
    if value is None:
        return None
    if t is list:
        if not value:
            return (None, None)
        found = _list_shape(value)
        if found is None:
            return JSON_SIG
        shape, types = found
        ints = np.asarray(value, dtype=object).ravel() if int in types else ()
        kind = leaf_kind(types, ints)
        return JSON_SIG if kind == "json" else (kind, len(shape))
    if t is int:
        return ("int64", 0) if _INT64[0] <= value <= _INT64[1] else JSON_SIG
    if t in _SCALAR_KIND:
        return (_SCALAR_KIND[t], 0)
    return JSON_SIG


def merge(a: Signature | None, b: Signature | None) -> Signature | None:
    """The signature two columns' values share.

    Example:
        >>> merge(("int64", 0), ("float64", 0)), merge(("int64", 1), (None, None))
        (('float64', 0), ('int64', 1))
        >>> merge(("str", 0), ("int64", 0))
        ('json', 0)
    """
    if a is None or a == b:
        return b
    if b is None:
        return a
    if a == JSON_SIG or b == JSON_SIG or (a[1] == 0) != (b[1] == 0):
        return JSON_SIG
    if a[1] is not None and b[1] is not None and a[1] != b[1]:
        return JSON_SIG
    ndim = a[1] if a[1] is not None else b[1]
    if a[0] is None or b[0] is None:
        return (a[0] or b[0], ndim)
    kind = leaf_kind({t for t, k in _SCALAR_KIND.items() if k in (a[0], b[0])})
    return JSON_SIG if kind == "json" else (kind, ndim)


# ------------------------------------------------------------------------------------------ the schema
@dataclass(frozen=True)
class ColumnType:
    """One column's type: ``kind`` (see the module table), ``ndim`` (0 scalar, d for depth-d lists) and
    ``nullable`` (some row lacks the key or holds null).

    Example:
        >>> ColumnType("int64", 1, True).describe()
        '1-d int64 array?'
    """

    kind: str
    ndim: int = 0
    nullable: bool = False

    def describe(self) -> str:
        base = self.kind if self.ndim == 0 else f"{self.ndim}-d {self.kind} array"
        return base + ("?" if self.nullable else "")


class RecordSchema:
    """Column types of a set of records: :attr:`columns` (name → :class:`ColumnType`, in the order keys first
    appear), :attr:`rows` (records looked at), and, for rows that are not JSON objects, :attr:`value` (the
    type of the whole row; ``None`` when every row is an object). Build one with :func:`infer_schema` or
    :func:`schema_of_records`; schemas of parts :meth:`merge` into the schema of the whole.

    Example:
        >>> s = schema_of_records([{"a": 1, "b": "x"}, {"a": 2.5}])
        >>> s.column_names, s["a"], s.rows
        (['a', 'b'], ColumnType(kind='float64', ndim=0, nullable=False), 2)
        >>> s.merge(schema_of_records([[1, 2]])).value      # objects mixed in: the whole row is JSON
        ColumnType(kind='json', ndim=0, nullable=False)
        >>> schema_of_records([[1, 2], [3]]).value
        ColumnType(kind='int64', ndim=1, nullable=False)
    """

    def __init__(
        self,
        sigs: Mapping[str, Signature | None] | None = None,
        present: Mapping[str, int] | None = None,
        rows: int = 0,
        objects: int = 0,
        whole: Signature | None = None,
    ) -> None:
        self._sigs: dict[str, Signature | None] = dict(sigs or {})
        self._present: dict[str, int] = dict(present or {})  # rows holding the key with a non-null value
        self.rows, self._objects, self._whole = rows, objects, whole

    # ---------------------------------------------------------------- reading
    @property
    def column_names(self) -> list[str]:
        """Top-level keys of the object rows, in the order they first appear."""
        return list(self._sigs)

    @property
    def columns(self) -> dict[str, ColumnType]:
        """``{name: ColumnType}`` in column order."""
        return {k: self[k] for k in self._sigs}

    @property
    def value(self) -> ColumnType | None:
        """The type of the rows that are not JSON objects (``"json"`` when objects are mixed in), or None."""
        others = self.rows - self._objects
        if not others:
            return None
        return _column_type(JSON_SIG if self._objects else self._whole, False)

    @property
    def object_rows(self) -> int:
        """How many rows are JSON objects (the others are typed by :attr:`value`)."""
        return self._objects

    def __getitem__(self, name: str) -> ColumnType:
        if name not in self._sigs:
            raise ColumnNotFoundError(f"no column {name!r}; the columns are {self.column_names}")
        return _column_type(self._sigs[name], self._present.get(name, 0) < self._objects)

    def __contains__(self, name: object) -> bool:
        return name in self._sigs

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RecordSchema) and other.to_dict() == self.to_dict()

    def __repr__(self) -> str:
        parts = [f"{k}: {t.describe()}" for k, t in self.columns.items()]
        if self.value is not None:
            parts.append(f"<non-object rows>: {self.value.describe()}")
        return f"RecordSchema({', '.join(parts)}; {self.rows} rows)"

    # ---------------------------------------------------------------- combining
    def merge(self, other: RecordSchema) -> RecordSchema:
        """The schema of this schema's rows followed by ``other``'s."""
        sigs = dict(self._sigs)
        for k, s in other._sigs.items():
            sigs[k] = merge(sigs.get(k), s)
        present = {k: self._present.get(k, 0) + other._present.get(k, 0) for k in sigs}
        return RecordSchema(
            sigs,
            present,
            self.rows + other.rows,
            self._objects + other._objects,
            merge(self._whole, other._whole),
        )

    # ---------------------------------------------------------------- serialising
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (what the cache file holds); :meth:`from_dict` reads it back."""
        return {
            "rows": self.rows,
            "objects": self._objects,
            "whole": self._whole,
            "columns": [[k, s, self._present.get(k, 0)] for k, s in self._sigs.items()],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RecordSchema:
        def sig(s: Any) -> Signature | None:
            return None if s is None else (s[0], s[1])

        cols = d["columns"]
        return cls(
            {k: sig(s) for k, s, _ in cols},
            {k: int(p) for k, _, p in cols},
            int(d["rows"]),
            int(d["objects"]),
            sig(d["whole"]),
        )

    def signature_of(self, name: str) -> Signature | None:
        """The raw signature of column ``name`` (``(None, None)``: only ``[]`` seen; None: only nulls)."""
        return self._sigs[name]

    @property
    def whole_signature(self) -> Signature | None:
        """The raw signature of the non-object rows (see :meth:`signature_of`)."""
        return self._whole


def _column_type(sig: Signature | None, nullable: bool) -> ColumnType:
    if sig is None or sig[0] is None or sig[1] is None:
        return ColumnType("null", 0 if sig is None or sig[1] is None else sig[1], nullable)
    return ColumnType(sig[0], sig[1], nullable)


def schema_of_records(rows: Iterable[Any]) -> RecordSchema:
    """The :class:`RecordSchema` of ``rows`` (every one is looked at; nothing is cached).

    Example:
        >>> schema_of_records([{"q": "a", "n": None}, {"q": "b", "n": [1, 2]}])
        RecordSchema(q: str, n: 1-d int64 array?; 2 rows)
    """
    sigs: dict[str, Signature | None] = {}
    present: dict[str, int] = {}
    whole: Signature | None = None
    n = objects = 0
    get = sigs.get
    for row in rows:
        n += 1
        if type(row) is dict:
            objects += 1
            for key, value in row.items():
                if value is None:
                    if key not in sigs:
                        sigs[key] = None
                    continue
                present[key] = present.get(key, 0) + 1
                old = get(key)
                t = type(value)
                # the common case, a scalar of the column's kind, skips signature() and merge()
                if old is not None and old[1] == 0 and t is not int and _SCALAR_KIND.get(t) == old[0]:
                    continue
                sigs[key] = merge(old, signature(value))
        else:
            whole = merge(whole, signature(row))
    return RecordSchema(sigs, present, n, objects, whole)


# ------------------------------------------------------------------------------------------ files and cache
def schema_cache_path(index_path: str) -> str:
    """Where the schema of the file indexed at ``index_path`` is cached: beside it, ``.npy`` (or
    ``.packed``) → ``.schema``.

    Example:
        >>> schema_cache_path("/data/train.index.npy")
        '/data/train.index.schema'
    """
    return artifact_path(index_path, ".schema")


def _cache_key(f: Any) -> dict[str, Any]:
    # The index's identity and the bad lines left out: a rebuilt index (the data changed) or another set of
    # skipped lines makes the cached schema stale.
    return index_key(f, CACHE_VERSION)


def _read_cache(f: Any) -> RecordSchema | None:
    """The cached schema of an IndexedFile when it is this index's and passes the checks of
    :func:`_checked_cache` (a sidecar, :mod:`sjsonl.storage.sidecar`: checksummed and trusted like the
    index)."""
    if f.index_path is None:
        return None
    path = schema_cache_path(f.index_path)
    return read_sidecar(path, SCHEMA_MAGIC, _cache_key(f), lambda b: _checked_cache(f, b))  # type: ignore[no-any-return]


def _write_cache(f: Any, schema: RecordSchema) -> None:
    if f.index_path is not None:
        write_sidecar(
            schema_cache_path(f.index_path), SCHEMA_MAGIC, _cache_key(f), orjson.dumps(schema.to_dict())
        )


def _checked_cache(f: Any, body: memoryview) -> RecordSchema:
    """A cached schema, checked without a pass over the data: it counts this file's good records, every
    signature and count is one the inference can make, and a few evenly spaced records conform to it (a
    column dropped, or a type narrowed, shows there). ``ValueError`` saying what is wrong otherwise."""
    d = orjson.loads(body)
    good = int(f.n) - len(f.bad_records)
    if type(d) is not dict or d.get("rows") != good or not 0 <= d["objects"] <= good:
        raise ValueError(f"it does not describe this file's {good} records")
    names = [c[0] for c in d["columns"]]
    if len(set(names)) != len(names) or not all(type(n) is str for n in names):
        raise ValueError("its column names are not unique strings")
    for name, sig, present in d["columns"]:
        _check_signature(sig)
        if type(present) is not int or not (sig is not None) <= present <= d["objects"]:
            raise ValueError(f"column {name!r} has an impossible count of values ({present})")
        if sig is None and present:
            raise ValueError(f"column {name!r} has values but no type")
    _check_signature(d["whole"])
    schema = RecordSchema.from_dict(d)
    picks = np.unique(np.linspace(0, f.n - 1, min(int(f.n), 8)).astype(np.int64))
    for i in np.setdiff1d(picks, f.bad_records).tolist():
        if not _conforms(schema, f.record(i)):
            raise ValueError(f"record {i} does not have the types it records")
    return schema


def _check_signature(sig: Any) -> None:
    """``ValueError`` unless ``sig`` (as JSON: null or [kind, ndim]) is a signature inference can make."""
    if sig is None:
        return
    kind, ndim = sig  # a list of two, or the unpacking fails (ValueError, TypeError)
    kinds_ok = kind is None or (kind in KINDS and kind != "null")
    ndim_ok = ndim is None or (type(ndim) is int and 0 <= ndim <= 64)
    if not kinds_ok or not ndim_ok or (ndim == 0 and kind is None) or (ndim is None and kind is not None):
        raise ValueError(f"it holds an impossible column type {sig!r}")


def _conforms(schema: RecordSchema, row: Any) -> bool:
    """Whether ``row`` adds nothing to ``schema`` (its values fit the columns' types, its missing keys and
    nulls fall in nullable columns)."""
    if type(row) is not dict:
        whole = schema.whole_signature
        return schema.rows > schema.object_rows and merge(whole, signature(row)) == whole
    if not schema.object_rows:
        return False
    for name in schema.column_names:
        value = row.get(name)
        sig = schema.signature_of(name)
        if value is None:
            if not schema[name].nullable:
                return False
        elif merge(sig, signature(value)) != sig:
            return False
    return all(name in schema for name in row)


def _chunk_schema(f: Any, lo: int, hi: int) -> RecordSchema:
    return schema_of_records(f.iter_good_records(lo, hi))


def _fast_chunk_schema(f: Any, lo: int, hi: int) -> RecordSchema:
    return _schema_of_parts(f, fast_types.chunk_parts(f, lo, hi))


def _schema_of_parts(f: Any, parts: Iterable[fast_types.Part]) -> RecordSchema:
    # the compiled pass's runs, and each record it hands back typed (or refused) here by the Python pass
    return _merged(_chunk_schema(f, p, p + 1) if isinstance(p, int) else RecordSchema(*p) for p in parts)


def _file_schema(f: Any, workers: int | None, progress: bool | None) -> RecordSchema:
    fast = fast_types.usable(f)  # compiled, on threads; else in Python, in processes for large files
    typed = parts_typed_alongside(f) if fast else None  # typed while its index was scanned
    if typed is not None:
        return _schema_of_parts(f, typed)
    fn = _fast_chunk_schema if fast else _chunk_schema
    parts = map_record_chunks(f, fn, workers, progress, "schema", PARALLEL_MIN_RECORDS, threads=fast)
    return _merged(parts)


def _merged(parts: Iterable[RecordSchema]) -> RecordSchema:
    return functools.reduce(RecordSchema.merge, parts, RecordSchema())  # in order: column order is stable


def _indexed_files(ds: Any) -> list[Any] | None:
    # A JSONLDataset's per-file units (source.IndexedFile: records, stamp, n, index_path), or None for any
    # other iterable. Views share their base dataset's files, so a view has the schema of all its files'
    # rows — a superset of its own, which is what a consumer typing every epoch's rows needs.
    files = getattr(ds, "_files", None)
    if isinstance(files, list) and files and all(hasattr(f, "stamp") and hasattr(f, "n") for f in files):
        return files
    return None


def infer_schema(
    data: Any,
    *,
    sample: int | None = None,
    workers: int | None = None,
    progress: bool | None = None,
    cache: bool = True,
) -> RecordSchema:
    """The column types of every record of ``data`` — see the module docstring.

    Args:
        data: a :class:`~sjsonl.data.dataset.JSONLDataset` (or a view: the schema of its files), or any
            iterable of records (looked at once, not cached).
        sample: look at only ``sample`` evenly spaced records instead (nothing cached). Only on request:
            a value outside the sample can contradict the types (that is what the full pass rules out).
        workers: threads of the compiled pass (else processes for files of :data:`PARALLEL_MIN_RECORDS`
            records or more); default: the ``workers`` the dataset was opened with, else the CPU count, at
            most 8; 1: in this thread.
        progress: progress bar on stderr (default: for large files on a terminal).
        cache: read and write ``<stem>.index.schema`` beside each index.

    Example:
        >>> infer_schema([{"a": 1}, {"a": True}])["a"].kind      # a plain iterable: all of it, no cache
        'json'
    """
    files = _indexed_files(data)
    if files is None:
        if sample is not None:
            data = list(data)
            data = [data[int(i)] for i in _evenly(len(data), sample)]
        return schema_of_records(data)
    if sample is not None:
        n = sum(int(f.n) for f in files)
        bounds = np.cumsum([0] + [int(f.n) for f in files])
        rows = []
        for i in _evenly(n, sample).tolist():
            k = int(np.searchsorted(bounds, i, side="right")) - 1
            j = i - int(bounds[k])
            if j not in files[k].bad_records:  # a line left out under on_bad_lines="skip"
                rows.append(files[k].record(j))
        return schema_of_records(rows)
    schema = RecordSchema()
    for f in files:
        part = _read_cache(f) if cache else None
        if part is None:
            part = _file_schema(f, workers, progress)
            if cache:
                _write_cache(f, part)
        schema = schema.merge(part)
    return schema


def _evenly(n: int, k: int) -> np.ndarray:
    if k < 1:
        raise InvalidArgumentError(f"sample must be at least 1, not {k}")
    return np.unique(np.linspace(0, n - 1, min(n, k)).astype(np.int64)) if n else np.zeros(0, np.int64)
