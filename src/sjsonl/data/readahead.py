"""Read-ahead: tell the kernel which bytes the next records of an order will need, before they are read.

A shuffled pass over a file that is not in the page cache waits for one disk read per record, one at a
time: the memory map (or ``pread``) asks for a page only when the record is decoded, and the kernel's own
read-ahead guesses sequential access, which a shuffle never is. :meth:`JSONLDataset.readahead
<sjsonl.data.views.Views.readahead>` makes a dataset that, while it iterates an order (``for r in
ds.shuffle(seed)``, ``iter_positions``, the torch/🤗 iterables) or reads a batch (``ds[indices]``),
hints the pages of the records ``records`` positions ahead with ``posix_fadvise(POSIX_FADV_WILLNEED)``.
The kernel starts those reads at once and in parallel, so by the time a record is decoded its page is
usually in the cache: the disk works at its queue depth instead of at depth one.

What comes out, and in which order, never changes — a hint reads nothing into Python and cannot fail a
read (an error from the hint is ignored and hinting stops for that pass). Staleness checks are the ones
of a plain read. Only local files hint (memory-mapped or ``mmap=False``); compressed storages read exactly
as before — their reads already go out together through ``read_many``.

Remote objects are read in windows without being asked (:func:`windows_fetched_ahead`): iterating an
order over one (``ds.shuffle(...)`` and the other views of a one-file dataset,
:class:`sjsonl.torch.IterableDataset` over them; a dataset of many files reads its blocks as before) reads it
:data:`FIRST_WINDOW` records at a time, doubling to :data:`LAST_WINDOW`, so the first records wait for
one small window, not for a block of thousands. Without the chunk cache the next windows' ranges are
fetched while one is decoded (:func:`sjsonl.storage.ahead.fetch_ahead`: at most four windows and 64 MiB
ahead), so the connections never idle while records are decoded; with it, the windows stay
:data:`FIRST_WINDOW` records and the cache's filler brings the chunks behind the reads instead.

Hints are issued a *window* at a time: before the records of window ``j`` (``records`` records each) are
read, the pages of window ``j + 1`` are hinted, sorted and merged into runs — one ``posix_fadvise`` per
run of adjacent pages, so a block shuffle's contiguous blocks become a few large reads. With the data in
the page cache a hint finds its page present and costs about 1 µs; windows whose hints all come back that
fast make the next ones be skipped (up to 31 in 32), so a warm pass pays little. It is opt-in because it
pays only where the kernel's own fault read-around does not: data larger than RAM (the kernel turns
read-around off after 100 faults that find nothing cached), a small ``read_ahead_kb``, or a memory map
advised ``MADV_RANDOM`` — see ``benchmarks/bench_cold.py``.

Example:
    >>> import os, tempfile
    >>> from sjsonl import JSONLDataset
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "w").write("".join(f'{{"i": {i}}}\\n' for i in range(100)))
    >>> ds = JSONLDataset(path)
    >>> ahead = ds.readahead(16)
    >>> [r["i"] for r in ahead.shuffle(seed=3)] == [r["i"] for r in ds.shuffle(seed=3)]
    True
"""

from __future__ import annotations

import copy
import mmap
import os
import time
from collections.abc import Generator, Iterable, Iterator, Sequence
from contextlib import closing
from typing import Any, Protocol

import numpy as np

from sjsonl.errors import InvalidArgumentError
from sjsonl.storage import LocalFile, Storage
from sjsonl.storage.ahead import WINDOWS, fetch_ahead


class HintedFile(Protocol):
    """What read-ahead needs of a file (:class:`sjsonl.data.source.IndexedFile`, which calls it): its storage
    and how many records to hint ahead (0: off). Named here so that this module does not import it back."""

    storage: Storage
    readahead: int


#: Records hinted ahead when ``readahead()`` is called without a count: enough outstanding reads to
#: keep a virtio/NVMe queue busy, few enough pages (≤ 2 windows) to never crowd a small page cache.
DEFAULT_RECORDS = 1024
_PAGE = mmap.PAGESIZE
_WILLNEED = getattr(os, "POSIX_FADV_WILLNEED", None)  # absent on macOS and Windows: no hints there
#: Seconds per hint below which a window's pages were all cached (a cached page answers in ~1 µs, a
#: missing one takes ~15 µs or more to submit on a virtio disk), and the most windows skipped after such.
_CACHED_SECONDS = 4e-6
_MAX_SKIP = 32


def with_readahead(data: Any, records: int = DEFAULT_RECORDS) -> Any:
    """A copy of ``data`` (a :class:`~sjsonl.JSONLDataset` or one of its views) whose iteration and
    batch reads hint the next ``records`` records' pages to the kernel; ``records=0`` turns it off.
    The implementation behind :meth:`Views.readahead <sjsonl.data.views.Views.readahead>`.

    Example:
        >>> import os, tempfile
        >>> from sjsonl import JSONLDataset
        >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
        >>> _ = open(path, "w").write("[1]\\n[2]\\n[3]\\n")
        >>> ds = with_readahead(JSONLDataset(path), 2)
        >>> ds[[2, 0, 1]], readahead_of(ds)
        ([[3], [1], [2]], 2)
    """
    if isinstance(records, bool) or not isinstance(records, (int, np.integer)) or records < 0:
        raise InvalidArgumentError(f"readahead records must be an integer >= 0, got {records!r}")
    files = getattr(data, "_files", None)
    if files is None:
        raise InvalidArgumentError(
            f"readahead() applies to a JSONLDataset and its views, not {type(data).__name__}: "
            "call it on the datasets a mixture is made of"
        )
    view = copy.copy(data)
    # The files are copied, not changed: the dataset this was made from (and its other views) keep
    # reading without hints. A copy shares the original's storage, memory map and offsets.
    view._files = [copy.copy(f) for f in files]
    for f in view._files:
        f.readahead = int(records)
        f.__dict__.pop("_hinter", None)  # a fresh back-off (sjsonl.data.readahead._Hinter) per copy
    if getattr(data, "_single", None) is not None:
        view._single = view._files[0]
    return view


def readahead_of(data: Any) -> int:
    """Records ``data`` hints ahead (0: none).

    Example:
        >>> import os, tempfile
        >>> from sjsonl import JSONLDataset
        >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
        >>> _ = open(path, "w").write("[1]\\n")
        >>> readahead_of(JSONLDataset(path)), readahead_of(JSONLDataset(path).readahead())
        (0, 1024)
    """
    return max((getattr(f, "readahead", 0) for f in getattr(data, "_files", ())), default=0)


def _hinted(file: HintedFile) -> LocalFile | None:
    """The local file to hint, when it is hinted: read-ahead on, a platform with fadvise."""
    storage = file.storage
    if not file.readahead or _WILLNEED is None or not isinstance(storage, LocalFile):
        return None
    return storage


def page_runs(starts: np.ndarray, ends: np.ndarray) -> tuple[list[int], list[int]]:
    """The pages byte spans ``[start, end)`` touch, as sorted, merged ``(offset, length)`` runs of whole
    pages — what one ``posix_fadvise`` each covers.

    Example:
        >>> p = mmap.PAGESIZE
        >>> page_runs(np.array([5 * p, 10, p + 1]), np.array([5 * p + 9, 20, 2 * p + 1]))
        ([0, 20480], [12288, 4096])
    """
    lo = starts // _PAGE
    hi = np.maximum(ends - 1, starts) // _PAGE  # last page touched (a span is never empty, but be safe)
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], np.maximum.accumulate(hi[order])  # running max: a long span covers later ones
    new = np.ones(len(lo), dtype=bool)
    new[1:] = lo[1:] > hi[:-1] + 1  # a gap of at least one page starts a new run
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(lo) - 1)
    return (lo[first] * _PAGE).tolist(), ((hi[last] - lo[first] + 1) * _PAGE).tolist()


class _Hinter:
    """A file's hints, backing off while they find the data already cached (one per file object and
    process — it holds no descriptor, so it pickles — kept across passes and batches).

    A hint for a page that is already in the page cache costs about 1 µs and achieves nothing; one for a
    missing page starts a read (tens of µs to submit). So each window's hints are timed: while they come
    back fast, the next windows are skipped — 1, 2, 4 … up to :data:`_MAX_SKIP` of them — and the first
    slow window (the data fell out of the cache) resets to hinting every window. The timing decides only
    how many hints are issued, never what is read.
    """

    def __init__(self) -> None:
        self.skip, self.wait, self.on = 1, 0, True

    def __call__(self, storage: LocalFile, starts: np.ndarray, ends: np.ndarray) -> None:
        if not self.on:
            return
        if self.wait:
            self.wait -= 1
            return
        offsets, lengths = page_runs(starts, ends)
        t0 = time.perf_counter()
        try:
            with storage.holding() as fd:
                for off, length in zip(offsets, lengths):
                    os.posix_fadvise(fd, off, length, _WILLNEED)  # type: ignore[arg-type]  # see _hinted
        except OSError:  # advisory only: never let a hint fail a read
            self.on = False  # for this file object, in this process
            return
        cached = time.perf_counter() - t0 < _CACHED_SECONDS * len(offsets)
        self.skip = min(_MAX_SKIP, self.skip * 2) if cached else 1
        self.wait = self.skip - 1


def spans_ahead(file: HintedFile, starts: list[int], ends: list[int]) -> Iterator[tuple[int, int]]:
    """``zip(starts, ends)`` — the spans :class:`~sjsonl.data.source.IndexedFile` is about to decode, in
    order — hinting each window's pages while the window before it is consumed (see the module docs).

    Example:
        >>> list(spans_ahead(None, [0, 4], [4, 8]))  # no file: nothing to hint
        [(0, 4), (4, 8)]
    """
    local = None if file is None else _hinted(file)
    if local is None or len(starts) < 2:
        return zip(starts, ends)
    return _hinted_spans(local, _hinter_of(file), starts, ends, file.readahead)


def _hinter_of(file: HintedFile) -> _Hinter:
    hinter = file.__dict__.get("_hinter")
    if hinter is None:
        hinter = file.__dict__["_hinter"] = _Hinter()
    return hinter


def _hinted_spans(
    local: LocalFile, hint: _Hinter, starts: list[int], ends: list[int], window: int
) -> Iterator[tuple[int, int]]:
    s, e = np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)
    n = len(starts)
    hint(local, s[:window], e[:window])  # the first window: its reads still go out together
    for lo in range(0, n, window):
        nxt = lo + window
        if nxt < n:
            hint(local, s[nxt : nxt + window], e[nxt : nxt + window])
        yield from zip(starts[lo:nxt], ends[lo:nxt])


def read_many_ahead(file: HintedFile, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
    """``file.storage.read_many(ranges)``, for a file read with ``pread``: each window of ranges is
    hinted before the window before it is read, so the reads find their pages (or their reads under way).

    Example:
        >>> from sjsonl.data.source import IndexedFile
        >>> import tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
        >>> _ = open(path, "w").write("[1]\\n[2]\\n")
        >>> read_many_ahead(IndexedFile(path, mmap=False), [(4, 7), (0, 3)])
        [b'[2]', b'[1]']
    """
    local = _hinted(file)
    storage = file.storage
    if local is None or len(ranges) < 2:
        return storage.read_many(ranges)
    window = file.readahead
    bounds = np.asarray(ranges, dtype=np.int64).reshape(-1, 2)
    hint = _hinter_of(file)
    hint(local, bounds[:window, 0], bounds[:window, 1])
    out: list[bytes] = []
    for lo in range(0, len(ranges), window):
        nxt = lo + window
        if nxt < len(ranges):
            hint(local, bounds[nxt : nxt + window, 0], bounds[nxt : nxt + window, 1])
        out += storage.read_many(ranges[lo:nxt])
    return out


#: Records in the first window an iteration over a remote object reads (about a batch: the first batch
#: waits for one window's round trips), and the most a window grows to (doubling each window).
FIRST_WINDOW, LAST_WINDOW = 64, 512


def reads_in_windows(file: HintedFile) -> bool:
    """Whether an order iterated over ``file`` is read in windows now: its storage is a remote object
    (``reads_in_windows``) not mapped from a sealed cache — once mapped, it is read as a local file is.

    Example:
        >>> from sjsonl.storage import MemoryFile
        >>> reads_in_windows(type("F", (), {"storage": MemoryFile(b"")})())
        False
    """
    storage = file.storage
    return getattr(storage, "reads_in_windows", False) and getattr(storage, "buffer", None) is None


def fetches_ahead(file: HintedFile) -> bool:
    """Whether :func:`reads_in_windows` and the next windows are fetched while one is consumed (a remote
    object without the chunk cache, whose filler would otherwise be crowded out).

    Example:
        >>> from sjsonl.storage import MemoryFile
        >>> fetches_ahead(type("F", (), {"storage": MemoryFile(b"")})())
        False
    """
    return reads_in_windows(file) and getattr(file.storage, "fetches_ahead", False)


def windows_of(blocks: Iterable[np.ndarray], last: int = LAST_WINDOW) -> Iterator[np.ndarray]:
    """The indices of ``blocks`` (arrays, taken in turn as they are needed) in windows of
    :data:`FIRST_WINDOW` records, doubling up to ``last``, cut across the blocks' bounds: an order handed
    over in blocks (view iteration, :class:`sjsonl.torch.IterableDataset`: 8,192 positions at a time) is read
    in windows that keep their size from one block to the next, instead of starting small again at each.

    Example:
        >>> [len(w) for w in windows_of([np.arange(100), np.arange(100, 300)])]
        [64, 128, 108]
        >>> [len(w) for w in windows_of([np.arange(150)], last=64)]
        [64, 64, 22]
    """
    if last < 1:
        raise InvalidArgumentError(f"windows must hold at least one record, got last={last}")
    size = min(FIRST_WINDOW, last)
    held: list[np.ndarray] = []
    count = 0
    for block in blocks:
        held.append(block)
        count += len(block)
        while count >= size:
            joined = held[0] if len(held) == 1 else np.concatenate(held)
            yield joined[:size]
            held, count = [joined[size:]], count - size
            size = min(last, size * 2)
    if count:
        yield held[0] if len(held) == 1 else np.concatenate(held)


def coalesced_runs(starts: list[int], ends: list[int], gap: int, most: int) -> list[list]:
    """Spans ``[starts[k], ends[k])`` merged, in file order, into reads ``[lo, hi, members]``: a span
    closer than ``gap`` bytes to the read before it joins it, while the read stays within ``most`` bytes.

    Example:
        >>> coalesced_runs([100, 0, 10], [110, 10, 20], gap=5, most=1 << 20)
        [[0, 20, [1, 2]], [100, 110, [0]]]
    """
    runs: list[list] = []
    for k in sorted(range(len(starts)), key=starts.__getitem__):
        start, end = starts[k], ends[k]
        if runs and start - runs[-1][1] <= gap and end - runs[-1][0] <= most:
            runs[-1][1] = max(runs[-1][1], end)
            runs[-1][2].append(k)
        else:
            runs.append([start, end, [k]])
    return runs


def windows_fetched_ahead(
    storage: Storage, blocks: Iterable[np.ndarray], spans_at: Any, most: int
) -> Generator[tuple[list[int], list[int], list[list], list[bytes]], None, None]:  # fmt: skip
    """``(starts, ends, runs, blobs)`` of each of the :func:`windows_of` ``blocks`` (arrays of record
    indices) in turn: the records' spans (``spans_at(window)``), their :func:`coalesced_runs` and the bytes
    of each run — the next windows fetched while one is consumed where the storage ``fetches_ahead`` (see
    the module).

    Example:
        >>> from sjsonl.storage import MemoryFile
        >>> data = b"".join(b"%02d\\n" % i for i in range(100))  # record i: bytes [3i, 3i + 2)
        >>> def spans_at(ix):
        ...     return (ix * 3).tolist(), (ix * 3 + 2).tolist()
        >>> got = windows_fetched_ahead(MemoryFile(data), [np.arange(99, -1, -1)], spans_at, 1 << 20)
        >>> [(len(starts), blobs[0]) for starts, _, _, blobs in got]  # (runs in file order)
        [(64, b'36'), (36, b'00')]
    """
    gap = storage.coalesce_gap
    ahead = WINDOWS if getattr(storage, "fetches_ahead", False) else 0
    # Without reads ahead (a chunk cache filling behind the reads), windows stay a batch's worth: larger
    # ones would send hundreds of ranged reads at once, ahead of the filler's chunk requests.
    last = LAST_WINDOW if ahead else FIRST_WINDOW

    def plan() -> Iterator[tuple[tuple[list[int], list[int], list[list]], list[tuple[int, int]]]]:
        for window in windows_of(blocks, last):
            starts, ends = spans_at(window)
            runs = coalesced_runs(starts, ends, gap, most)
            yield (starts, ends, runs), [(a, b) for a, b, _ in runs]

    # closing() makes closing this generator stop the reads at once, not when the inner one is collected
    with closing(fetch_ahead(storage.read_many, plan(), windows=ahead)) as windows:
        for (starts, ends, runs), blobs in windows:
            yield starts, ends, runs, blobs
