"""The all-rows type pass in compiled code: :mod:`sjsonl.records.schema`'s column types of a file's records,
read from their bytes by ``_types.c`` without a Python object per record, on threads (the GIL released).

:func:`sjsonl.records.schema.infer_schema` types a file here whenever the extension was built (:data:`NATIVE`)
and the file is JSON Lines (a JSON document's elements go the Python way). The rules are still schema.py's:
the compiled pass returns the same signatures and counts, and any record it is not sure about — not strict
JSON (so an invalid record, NaN), a top-level key with an escape or held twice, an integer of more than 640
digits, nesting past 128 — it hands back by number, and the Python pass types that record (or raises its
located error), so the result is the Python pass's whatever the file holds (``tests/test_fast_types.py``).
About 0.15 µs a short record on one core where the Python pass takes ~2 µs, and ~3.8 GB/s on long text
where the CPU has AVX-512 (~3.1 with AVX2; ``benchmarks/bench_types.py``).

A file is typed in chunks of about :data:`CHUNK_BYTES`, on up to ``workers`` threads when it is memory-mapped
(a local file, a sealed remote cache: its guarded map is read by any thread; other storages are read in order,
on one), and typed without the GIL; the chunks' schemas merge in file order. A mapped chunk is typed in place,
under the map's guard (a file cut short under the pass raises instead of SIGBUS): copying it first was a third
of the pass on long records. Other storages' chunks are read as blocks of bytes, checked to end lines.

Example:
    >>> import numpy as np
    >>> data = b'{"a": 1, "b": [1.5]}\\n{"a": NaN}\\n{"a": 2, "c": null}\\n'
    >>> bounds = np.cumsum([0] + [len(line) for line in data.splitlines(keepends=True)])
    >>> for part in scan_parts(data, bounds, 0, 3):
    ...     print(part)
    ({'a': ('int64', 0), 'b': ('float64', 1)}, {'a': 1, 'b': 1}, 1, 1, None)
    1
    ({'a': ('int64', 0), 'c': None}, {'a': 1, 'c': 0}, 1, 1, None)
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType
from typing import Any

import numpy as np


def _native() -> ModuleType | None:
    try:
        from sjsonl.records import _types
    except ImportError:  # built without a C compiler: the Python pass types every record
        return None
    return _types


#: The compiled type pass (``sjsonl/records/_types.c``), or None where it was not built.
NATIVE = _native()
#: Bytes of records a chunk of the pass holds: a unit to share among threads (~4 ms of typing).
CHUNK_BYTES = 4 << 20
#: At most this many bytes are read at once (a chunk of few, long records is read in blocks of records).
READ_BYTES = 16 << 20

#: The pieces :func:`scan_parts` yields: the schema of a run of records, as ``RecordSchema(*part)`` takes it
#: (``sigs, present, rows, objects, whole``) — or the number of a record it hands back.
Part = tuple[dict[str, Any], dict[str, int], int, int, Any] | int


def usable(f: Any) -> bool:
    """Whether the compiled pass types ``f`` (an :class:`~sjsonl.data.source.IndexedFile`): built, and JSON
    Lines (a JSON document's elements are typed by the Python pass).

    Example:
        >>> usable(type("F", (), {"layout": "[]"})())
        False
    """
    return NATIVE is not None and not f.layout


def scan_parts(data: Any, bounds: np.ndarray, lo: int, hi: int, first: int = 0) -> Iterator[Part]:
    """The schema of records ``lo..hi`` of ``data`` (record ``k`` is ``data[bounds[k]:bounds[k + 1]]``) in
    pieces, in order: a tuple for each run the compiled pass typed, and the number (``first + k``) of each
    record it hands back (see the module docstring)."""
    assert NATIVE is not None
    bounds = np.ascontiguousarray(bounds, dtype=np.int64)
    k = lo
    while k < hi:
        stop, sigs, present, objects, whole = NATIVE.scan(data, bounds, k, hi)
        if stop > k:
            yield sigs, present, stop - k, objects, whole
        if stop < hi:
            yield first + stop
        k = stop + 1


def chunk_parts(f: Any, lo: int, hi: int) -> Iterator[Part]:
    """:func:`scan_parts` of records ``lo..hi`` of ``f``, the records left out as bad lines skipped."""
    bounds = np.asarray(f.offsets[lo : hi + 1], dtype=np.int64)
    if len(bounds) == hi - lo:  # the chunk holds the last record
        bounds = np.append(bounds, np.int64(f.end))
    bad = f.bad_records
    bad = (bad[np.searchsorted(bad, lo) : np.searchsorted(bad, hi)] - lo).tolist()
    getter = getattr(f.storage, "buffer", None)
    if getter is not None:  # a mapped file: typed in place, under the map's guard
        yield from _runs(getter(), bounds, 0, hi - lo, bad, lo)
        end = int(bounds[-1])
        if end > int(bounds[0]):  # the chunk's last record ends a line, as read_spans checks a copy's
            f.read_spans(end - 1, end, [end])
        return
    a, count = 0, hi - lo
    while a < count:
        b = int(np.searchsorted(bounds, bounds[a] + READ_BYTES, side="right")) - 1
        b = min(count, max(a + 1, b))
        base = int(bounds[a])
        data = f.read_spans(base, int(bounds[b]), bounds[a + 1 : b + 1].tolist())  # each ends a line?
        yield from _runs(data, bounds[a : b + 1] - base, 0, b - a, [x - a for x in bad if a <= x < b], lo + a)
        a = b


def _runs(data: Any, bounds: np.ndarray, a: int, b: int, bad: list[int], first: int) -> Iterator[Part]:
    """:func:`scan_parts` of records ``a..b`` of ``data``, but the ``bad`` ones (numbers within ``a..b``)."""
    start = a
    for skip in [*bad, b]:
        yield from scan_parts(data, bounds, start, skip, first)
        start = skip + 1
