"""Bad lines: find every record that is not valid JSON, and read a file without them.

``sjsonl.data.corpus.find_bad_lines(path)`` parses every record once (in processes, for large files) and
returns each bad one with its 1-based line number, byte offset, reason and excerpt. ``JSONLDataset(path,
on_bad_lines="skip")`` uses the same pass to leave those lines out — ``len(ds)`` counts the good records,
``ds.bad_lines`` lists the others, ``"warn"`` also warns once at open — and ``"error"`` (the default)
keeps every line a record, so a bad one raises its located error when read.

Memory stays at 8 bytes a bad line: a file's bad lines are the numbers of its bad records (an int64 array);
a :class:`BadLine` is made when asked for — its offset from the index, its reason and excerpt from parsing
that one record again, its line number counted (kept for the first :data:`MAX_REPORTED`, so a report or
warning needs no count). They are kept beside the index as ``<stem>.index.badlines`` (a sidecar,
:mod:`sjsonl.storage.sidecar`: bound to the data version and the index's checksum, checksummed, trusted like
the index): record numbers sorted, unique and within the index, each of a sample of them still failing to
parse, or the file is ignored and the bad lines found again. A reopen reads that file — no parse.

Example:
    >>> import os, tempfile
    >>> from sjsonl import JSONLDataset
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "w").write('{"a": 1}\\n{oops\\n{"a": 3}\\n')
    >>> [(b.line, b.offset) for b in JSONLDataset(path, on_bad_lines="skip").bad_lines]
    [(2, 9)]
    >>> ds = JSONLDataset(path, on_bad_lines="skip")
    >>> len(ds), ds[:], [b.line for b in ds.bad_lines]
    (2, [{'a': 1}, {'a': 3}], [2])
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, overload

import numpy as np

from sjsonl.errors import BadLineWarning as BadLineWarning
from sjsonl.errors import InvalidArgumentError
from sjsonl.index.layout import artifact_path
from sjsonl.records.decode import DECODE_ERRORS, excerpt, fallback_loads, fast_loads, loads
from sjsonl.records.schema import map_record_chunks
from sjsonl.storage import byte_view, count_newlines
from sjsonl.storage.sidecar import index_key, read_sidecar, write_sidecar

POLICIES = ("error", "skip", "warn")


#: Bad lines per file whose line numbers are kept (in memory and beside the index); later ones are counted
#: when asked for.
MAX_REPORTED = 10_000
CACHE_VERSION = 3  # 3: the sidecar container; 2: NaN/Infinity are good records unless allow_nan=False
#: The first bytes of a ``.badlines`` file (see :mod:`sjsonl.storage.sidecar`).
BADLINES_MAGIC = b"SJSONLbl"
_COUNTS = struct.Struct("<QQ")  # bad records, line numbers kept
_SPOT_CHECKS = 8  # saved bad records parsed again on load: each must still fail
_SCAN_BLOCK = 4096  # records parsed per block of offsets
#: Files with this many records or more are checked in worker processes too (:mod:`sjsonl.runtime.parallel`).
#: Parsing alone costs 0.9-2.7 µs a record, so a worker's start (~0.3-0.5 s of CPU) pays off only on large
#: files (``benchmarks/bench_parallel.py``: at 1 M short records one process still won).
PARALLEL_MIN_RECORDS = 1_500_000


@dataclass(frozen=True)
class BadLine:
    """One line that is not a record: where it is and why."""

    path: str
    line: int  # 1-based line number in the file
    offset: int  # byte offset of the line's start
    reason: str
    excerpt: str
    record: int  # its number among the file's non-blank lines (its position under on_bad_lines="error")

    def __str__(self) -> str:
        return (
            f"{self.path}:{self.line}: byte offset {self.offset}: {self.reason}; line starts {self.excerpt}"
        )


def check_policy(on_bad_lines: str) -> str:
    if on_bad_lines not in POLICIES:
        raise InvalidArgumentError(f"on_bad_lines must be one of {', '.join(POLICIES)}, not {on_bad_lines!r}")
    return on_bad_lines


def badlines_path(index_path: str) -> str:
    """``/data/train.index.npy`` (or ``.packed``) → ``/data/train.index.badlines``."""
    return artifact_path(index_path, ".badlines")


@dataclass
class _FilePart:
    """One file's bad lines: record numbers (sorted), the line numbers of the first ``len(lines)``, and
    ``base``, added to the record numbers (the file's first record in a dataset of several)."""

    file: Any  # a sjsonl.data.source.IndexedFile
    records: np.ndarray
    lines: np.ndarray
    base: int = 0
    cursor: tuple[int, int] = field(default=(-1, 1), compare=False)  # (k, line) last counted

    def line(self, k: int) -> int:
        if k < len(self.lines):
            return int(self.lines[k])
        # count on from the nearest line number known before k: the last one counted, or the last kept
        anchor, line = len(self.lines) - 1, int(self.lines[-1]) if len(self.lines) else 1
        if anchor < self.cursor[0] <= k:
            anchor, line = self.cursor
        offsets = self.file.offsets
        start = int(offsets[int(self.records[anchor])]) if anchor >= 0 else 0
        line += count_newlines(self.file.storage, start, int(offsets[int(self.records[k])]))
        self.cursor = (k, line)
        return line

    def bad_line(self, k: int) -> BadLine:
        record = int(self.records[k])
        offset, reason, text = _describe(self.file, record)
        return BadLine(self.file.path, self.line(k), offset, reason, text, record + self.base)


class BadLines(Sequence[BadLine]):
    """Bad lines of one or more files, in file order: a sequence of :class:`BadLine`, each made when asked
    for from an array of record numbers (8 bytes a bad line).

    Example:
        >>> BadLines(), len(BadLines()), BadLines() == []
        (BadLines(0 bad lines), 0, True)
    """

    def __init__(self, parts: Sequence[_FilePart] = ()) -> None:
        self._parts = [p for p in parts if len(p.records)]
        self._ends = np.cumsum([len(p.records) for p in self._parts], dtype=np.int64).tolist()

    @classmethod
    def join(cls, pieces: Sequence[BadLines], bases: Sequence[int]) -> BadLines:
        """Several files' bad lines as one sequence, file ``k``'s record numbers shifted by ``bases[k]``."""
        shifted = [
            _FilePart(p.file, p.records, p.lines, p.base + b)
            for bad, b in zip(pieces, bases)
            for p in bad._parts
        ]
        return cls(shifted)

    def records(self) -> np.ndarray:
        """The record numbers of the bad lines (shifted by their file's base), sorted: int64."""
        if len(self._parts) == 1 and self._parts[0].base == 0:
            return self._parts[0].records
        if not self._parts:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate([p.records + p.base for p in self._parts])

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    @overload
    def __getitem__(self, i: int) -> BadLine: ...
    @overload
    def __getitem__(self, i: slice) -> list[BadLine]: ...
    def __getitem__(self, i: int | slice) -> BadLine | list[BadLine]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"bad line {i} out of range: there are {n}")
        i = i + n if i < 0 else i
        p = bisect.bisect_right(self._ends, i)
        return self._parts[p].bad_line(i - (self._ends[p - 1] if p else 0))

    def __iter__(self) -> Iterator[BadLine]:
        for part in self._parts:
            for k in range(len(part.records)):
                yield part.bad_line(k)  # line numbers counted on from the last one: one pass per file

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (BadLines, list, tuple)):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"BadLines({len(self)} bad line{'s' if len(self) != 1 else ''})"


def _line_numbers(f: Any, records: np.ndarray) -> np.ndarray:
    """1-based line numbers of sorted records, counting newlines once from the start."""
    lines = np.empty(len(records), dtype=np.int64)
    starts = np.asarray(f.offsets[records], dtype=np.int64).tolist() if len(records) else []
    line, prev = 1, 0
    for k, start in enumerate(starts):
        line += count_newlines(f.storage, prev, start)
        lines[k], prev = line, start
    return lines


def _describe(f: Any, record: int) -> tuple[int, str, str]:
    """(offset, reason, excerpt) of a bad record, by parsing it again."""
    start, end = f.span(record)
    data = byte_view(f.storage)[start:end]
    try:
        loads(data, f.allow_nan)
    except ValueError as exc:
        return start, str(exc), excerpt(data)
    return start, "listed as a bad line, but it parses now", excerpt(data)


def _is_bad(data: Any, allow_nan: bool) -> bool:
    """Whether a record is not valid JSON: :func:`~sjsonl.records.decode.loads`'s verdict, without its
    reason."""
    try:
        fast_loads(data)
    except DECODE_ERRORS:
        try:
            fallback_loads(data, allow_nan)
        except ValueError:
            return True
    return False


def _chunk(f: Any, lo: int, hi: int) -> np.ndarray:
    """The numbers of the bad records in ``[lo, hi)`` of an IndexedFile (int64), a block of offsets at a time
    (the temporaries stay small whatever the chunk)."""
    buf = byte_view(f.storage)
    found = []
    for a in range(lo, hi, _SCAN_BLOCK):
        b = min(hi, a + _SCAN_BLOCK)
        bounds = f.offsets[a : b + 1].tolist()
        if b == f.n:
            bounds.append(int(f.end))
        bad = [a + k for k in range(b - a) if _is_bad(buf[bounds[k] : bounds[k + 1]], f.allow_nan)]
        if bad:
            found.append(np.array(bad, dtype=np.int64))
    return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)


def scan_file(f: Any, workers: int | None = None, progress: bool | None = None) -> BadLines:
    """Every bad record of one :class:`~sjsonl.data.source.IndexedFile`, in file order."""
    chunks = map_record_chunks(f, _chunk, workers, progress, "checking", PARALLEL_MIN_RECORDS)
    found = list(chunks)
    records = np.concatenate(found) if found else np.zeros(0, dtype=np.int64)
    return BadLines([_FilePart(f, records, _line_numbers(f, records[:MAX_REPORTED]))])


def _checked(f: Any, body: memoryview) -> BadLines:
    """The bad lines a ``.badlines`` body holds, range-checked against the index and spot-checked against
    the data; ``ValueError`` saying what is wrong otherwise."""
    if len(body) < _COUNTS.size:
        raise ValueError("its body is cut short")
    m, k = _COUNTS.unpack_from(body)
    if m > f.n or k > m or len(body) != _COUNTS.size + 8 * (m + k):
        raise ValueError(f"it lists {m} bad records ({k} with line numbers) in {len(body)} bytes for {f.n}")
    records = np.frombuffer(body, "<i8", count=m, offset=_COUNTS.size).astype(np.int64, copy=False)
    lines = np.frombuffer(body, "<i8", count=k, offset=_COUNTS.size + 8 * m).astype(np.int64, copy=False)
    if m and (records[0] < 0 or records[-1] >= f.n or np.any(records[1:] <= records[:-1])):
        raise ValueError(f"its record numbers are not sorted, unique and below {f.n}")
    # a line number is at least one more than the record's number (records are non-blank lines), and
    # grows at least as fast as it
    if k and (lines[0] < records[0] + 1 or np.any(np.diff(lines) < np.diff(records[:k]))):
        raise ValueError("its line numbers do not fit its record numbers")
    for j in np.unique(np.linspace(0, m - 1, min(m, _SPOT_CHECKS)).astype(np.int64)).tolist():
        start, end = f.span(int(records[j]))
        try:
            loads(byte_view(f.storage)[start:end], f.allow_nan)
        except ValueError:
            continue
        raise ValueError(f"record {int(records[j])} is listed as bad but parses")
    return BadLines([_FilePart(f, records, lines)])


def bad_lines_of(f: Any, workers: int | None = None, progress: bool | None = None) -> BadLines:
    """The bad lines of ``f``, from its ``.badlines`` sidecar when it is this index's and passes its
    checks, else found by parsing every record and saved there."""
    where = badlines_path(f.index_path) if f.index_path else None
    # (what it finds is what is skipped; NaN and Infinity are bad lines only with allow_nan=False)
    key = {**index_key(f, CACHE_VERSION, skipped=False), "allow_nan": f.allow_nan}
    if where:
        saved = read_sidecar(where, BADLINES_MAGIC, key, lambda body: _checked(f, body))
        if saved is not None:
            return saved  # type: ignore[no-any-return]
    bad = scan_file(f, workers, progress)
    if where:
        part = bad._parts[0] if bad._parts else _FilePart(f, np.zeros(0, np.int64), np.zeros(0, np.int64))
        counts = _COUNTS.pack(len(part.records), len(part.lines))
        records, lines = part.records.astype("<i8"), part.lines.astype("<i8")
        write_sidecar(where, BADLINES_MAGIC, key, counts, records, lines)
    return bad


def report(bad: Sequence[BadLine], limit: int = 5) -> str:
    """A short summary for a warning: the count and the first ``limit`` lines."""
    first = bad[:limit]
    head = "; ".join(f"line {b.line}: {b.reason}" for b in first)
    more = f"; … {len(bad) - limit} more" if len(bad) > limit else ""
    return f"{len(bad)} bad line{'s' if len(bad) != 1 else ''} skipped in {first[0].path}: {head}{more}"


def as_dict(b: BadLine) -> dict[str, Any]:
    """A bad line as a plain dict (for ``--json`` output)."""
    return asdict(b)
