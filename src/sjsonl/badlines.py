"""Bad lines: find every record that is not valid JSON, and read a file without them.

``find_bad_lines(path)`` parses every record once (in processes, for large files) and returns each bad
one with its 1-based line number, byte offset, reason and excerpt. ``JSONLDataset(path,
on_bad_lines="skip")`` uses the same pass to leave those lines out — ``len(ds)`` counts the good records,
``ds.bad_lines`` lists the others, ``"warn"`` also warns once at open — and ``"error"`` (the default)
keeps every line a record, so a bad one raises its located error when read.

The result is kept beside the index as ``<stem>.index.badlines``, under the index's identity (the data
version and record count), with the policy that made it: a rebuilt index makes it stale, and it is never
read under ``"error"``. Only the first :data:`MAX_REPORTED` bad lines keep their reason and excerpt in
that file; all of them are skipped.

Example:
    >>> import os, tempfile
    >>> from sjsonl import JSONLDataset
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "w").write('{"a": 1}\\n{oops\\n{"a": 3}\\n')
    >>> [(b.line, b.offset) for b in find_bad_lines(path)]
    [(2, 9)]
    >>> ds = JSONLDataset(path, on_bad_lines="skip")
    >>> len(ds), ds[:], [b.line for b in ds.bad_lines]
    (2, [{'a': 1}, {'a': 3}], [2])
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from .decode import excerpt, loads
from .errors import InvalidArgumentError
from .index.store import artifact_path
from .schema import map_record_chunks
from .sidecar import index_key, read_sidecar, write_sidecar
from .storage import byte_view, count_newlines

POLICIES = ("error", "skip", "warn")


class BadLineWarning(UserWarning):
    """``on_bad_lines="warn"``: lines were skipped (the message counts them and names the first)."""


MAX_REPORTED = 10_000
#: Files with this many records or more are checked in worker processes too (:mod:`sjsonl.parallel`).
#: Parsing alone costs 0.9-2.7 µs a record, so a worker's start (~0.3-0.5 s of CPU) pays off only on large
#: files (``benchmarks/bench_parallel.py``: at 1 M short records one process still won).
PARALLEL_MIN_RECORDS = 1_500_000
CACHE_VERSION = 2  # 2: NaN/Infinity are good records unless allow_nan=False (the key says which)


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


def _chunk(f: Any, lo: int, hi: int) -> list[tuple[int, int, str, str]]:
    """(record, offset, reason, excerpt) of each bad record in ``[lo, hi)`` of an IndexedFile."""
    buf = byte_view(f.storage)
    starts = f.offsets[lo:hi].tolist()
    ends = [*starts[1:], int(f.offsets[hi]) if hi < f.n else int(f.end)]
    bad = []
    for k, (start, end) in enumerate(zip(starts, ends)):
        data = buf[start:end]
        try:
            loads(data, f.allow_nan)
        except ValueError as exc:
            bad.append((lo + k, start, str(exc), excerpt(data)))
    return bad


def _line_numbers(f: Any, offsets: list[int]) -> list[int]:
    """1-based line numbers of sorted byte offsets, counting newlines once from the start."""
    lines, count, prev = [], 1, 0
    for off in offsets:
        count += count_newlines(f.storage, prev, off)
        lines.append(count)
        prev = off
    return lines


def scan_file(f: Any, workers: int | None = None, progress: bool | None = None) -> list[BadLine]:
    """Every bad record of one :class:`~sjsonl.source.IndexedFile`, in file order."""
    chunks = map_record_chunks(f, _chunk, workers, progress, "checking", PARALLEL_MIN_RECORDS)
    found = [bad for part in chunks for bad in part]
    lines = _line_numbers(f, [off for _, off, _, _ in found])
    return [BadLine(f.path, ln, off, why, text, rec) for (rec, off, why, text), ln in zip(found, lines)]


def bad_lines_of(
    f: Any, policy: str, workers: int | None = None, progress: bool | None = None
) -> list[BadLine]:
    """The bad lines of ``f``, from its ``.badlines`` sidecar when it matches the index, else computed
    and saved there (with ``policy``)."""
    where = badlines_path(f.index_path) if f.index_path else None
    key = {**index_key(f, CACHE_VERSION), "allow_nan": f.allow_nan}
    saved = read_sidecar(where, key) if where else None
    if saved is not None:
        return [BadLine(f.path, *row) for row in saved["bad"]]
    bad = scan_file(f, workers, progress)
    if where:
        rows = [[b.line, b.offset, b.reason, b.excerpt, b.record] for b in bad[:MAX_REPORTED]]
        unkept = f"(reason not kept beyond the first {MAX_REPORTED:,} bad lines)"
        rows += [[b.line, b.offset, unkept, "", b.record] for b in bad[MAX_REPORTED:]]
        write_sidecar(where, key, {"policy": policy, "bad": rows})
    return bad


def find_bad_lines(
    path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    workers: int | None = None,
    progress: bool | None = None,
    **dataset_kwargs: Any,
) -> list[BadLine]:
    """Every line of ``path`` (a file or a list of files) that is not a valid JSON record, in file order.

    ``workers`` processes parse large files; ``dataset_kwargs`` go to :class:`~sjsonl.JSONLDataset`
    (``index_dir=``, ``storage_options=``, …). Nothing is cached: this always looks again.
    """
    from .dataset import JSONLDataset

    ds = JSONLDataset(path, workers=workers, progress=progress, **dataset_kwargs)
    return [b for f in ds._files for b in scan_file(f, workers, progress)]


def report(bad: list[BadLine], limit: int = 5) -> str:
    """A short summary for a warning: the count and the first ``limit`` lines."""
    head = "; ".join(f"line {b.line}: {b.reason}" for b in bad[:limit])
    more = f"; … {len(bad) - limit} more" if len(bad) > limit else ""
    return f"{len(bad)} bad line{'s' if len(bad) != 1 else ''} skipped in {bad[0].path}: {head}{more}"


def as_dict(b: BadLine) -> dict[str, Any]:
    """A bad line as a plain dict (for ``--json`` output)."""
    return asdict(b)
