"""A pass over one file's records in chunks, results in file order: on worker processes for Python passes
(the schema and bad-line passes where nothing is compiled; they hold the GIL), on threads for compiled ones
(the type pass of :mod:`sjsonl.records.fast_types`, which releases it) — with a progress bar counting bytes.

Example:
    >>> list(iter_chunks(5, 2))
    [(0, 2), (2, 4), (4, 5)]
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sjsonl.runtime.parallel import map_in_order, worker_count
from sjsonl.runtime.progress import Progress

_CHUNK_RECORDS = 50_000  # a process's unit of work: small enough to share out, large enough to cost ~0.1 s
#: A thread's unit of work: records of about this many bytes (~4 ms of the compiled type pass).
CHUNK_BYTES = 4 << 20


def iter_chunks(n: int, step: int) -> Iterator[tuple[int, int]]:
    """``[lo, hi)`` record ranges of ``step`` records covering ``[0, n)``.

    Example:
        >>> list(iter_chunks(5, 2))
        [(0, 2), (2, 4), (4, 5)]
    """
    for lo in range(0, n, step):
        yield lo, min(n, lo + step)


def map_record_chunks(
    f: Any,
    fn: Callable[[Any, int, int], Any],
    workers: int | None,
    progress: bool | None,
    desc: str,
    min_records: int,
    *,
    threads: bool = False,
) -> Iterator[Any]:
    """``fn(f, lo, hi)`` over the record chunks of an :class:`~sjsonl.data.source.IndexedFile`, results in
    file order, with a progress bar counting bytes. Files of ``min_records`` records or more run in
    ``workers`` processes (:mod:`sjsonl.runtime.parallel`: decoding is CPU-bound Python that holds the GIL;
    the pool never re-runs the user's script); ``workers`` None means the workers ``f`` was opened with, else
    the default. ``threads``: ``fn`` releases the GIL — chunks of about :data:`CHUNK_BYTES` on up to
    ``workers`` threads instead, whatever the size, for a memory-mapped file (the reads of other storages,
    compressed or remote, are not shared among threads: one thread reads them in order)."""
    nbytes = int(f.end)
    if workers is None:  # e.g. load_dataset(workers=1): the dataset's own worker count holds here too
        workers = getattr(f, "_index_args", {}).get("workers")
    if threads:
        bounds = list(
            iter_chunks(f.n, max(1, CHUNK_BYTES * f.n // max(1, nbytes)))
        )  # by the mean record size
        mapped = getattr(f.storage, "buffer", None) is not None
        results = _on_threads(fn, f, bounds, min(len(bounds), worker_count(workers)) if mapped else 1)
    else:
        bounds = list(iter_chunks(f.n, _CHUNK_RECORDS))
        processes = worker_count(workers) if f.n >= min_records else 1
        results = map_in_order(fn, bounds, processes, shared=f)  # f goes to each worker once
    bar = Progress(nbytes, f"{desc} {os.path.basename(f.path)}", progress)
    offsets = f.offsets
    try:
        for (lo, hi), result in zip(bounds, results):
            yield result
            if bar.update:
                bar.update((int(offsets[hi]) if hi < f.n else nbytes) - int(offsets[lo]))
    finally:
        results.close()  # a pass left early (an error here): its workers end now
        bar.close()


def _on_threads(
    fn: Callable[[Any, int, int], Any], f: Any, bounds: Sequence[tuple[int, int]], threads: int
) -> Generator[Any, None, None]:
    if threads <= 1:
        yield from (fn(f, lo, hi) for lo, hi in bounds)
        return
    f.storage.buffer()  # the file mapped here, once, not by racing threads
    pool = ThreadPoolExecutor(threads, thread_name_prefix="sjsonl-chunks")
    try:
        yield from pool.map(lambda b: fn(f, *b), bounds)
    finally:
        pool.shutdown(cancel_futures=True)  # a pass left early: no chunk starts after it
