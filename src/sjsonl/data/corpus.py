"""Index many files at once, one task per file on any :class:`concurrent.futures.Executor`.

:func:`build_indexes` hands each file to the executor — a stdlib ``ProcessPoolExecutor``, a Dask
cluster's ``client.get_executor()``, Ray's, or none (one file after another in this process). Each task
builds and saves the index of one file where it runs and sends back only a small
:class:`IndexReport`; the offsets stay on disk. One progress bar counts the bytes of finished files. A
file that fails is named with its error and the others are still indexed; the failures are raised
together at the end (:class:`IndexBuildError`).

The workers must see the data and the index directory at the same paths as the caller (a shared
filesystem, or URLs with ``storage_options``), and must have sjsonl installed: a task is the top-level
function :func:`index_file` with plain arguments. Index writes are atomic (temp file + rename), so two
workers indexing the same file never leave a torn index.

Example:
    >>> import os, tempfile
    >>> from concurrent.futures import ThreadPoolExecutor
    >>> from sjsonl import JSONLDataset, build_indexes
    >>> d = tempfile.mkdtemp()
    >>> paths = [os.path.join(d, f"part{i}.jsonl") for i in range(3)]
    >>> for i, p in enumerate(paths):
    ...     _ = open(p, "w").write(f'{{"part": {i}}}\\n' * (i + 1))
    >>> with ThreadPoolExecutor(2) as pool:   # or client.get_executor() of a dask.distributed Client
    ...     written = build_indexes(paths, executor=pool)
    >>> [os.path.basename(w) for w in written]
    ['part0.index.npy', 'part1.index.npy', 'part2.index.npy']
    >>> len(JSONLDataset(paths, build_index_on_load=False))   # opens the saved indexes
    6
"""

from __future__ import annotations

import os
import socket
import time
import warnings
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor, Future, as_completed
from dataclasses import dataclass
from typing import Any

from sjsonl.data.document import layouts_for, open_data_files
from sjsonl.data.indexer import InvalidRecordsError
from sjsonl.errors import BadLineWarning, IndexBuildError, RecordDecodeError, SJSONLError
from sjsonl.index.build import build_layout, load_or_build_index, save_index
from sjsonl.index.packed import format_on_disk
from sjsonl.records.badlines import MAX_REPORTED, BadLines, bad_lines_of, check_policy, scan_file
from sjsonl.runtime.progress import Progress
from sjsonl.storage import is_url, open_storage
from sjsonl.storage.atomic import write_batch
from sjsonl.storage.zip import expand_archives

__all__ = ["IndexBuildError", "IndexReport", "build_indexes", "index_file", "index_files"]

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class IndexReport:
    """What one task sends back: where the index went and what it holds — never the offsets."""

    path: str  #: the data file, as the worker opened it
    index_path: str  #: where its index is (on the worker's filesystem)
    records: int
    nbytes: int  #: bytes indexed (decompressed bytes for ``.gz``/``.zst``)
    stored: int  #: bytes on storage (what the progress bar counts)
    seconds: float  #: time the worker spent on this file
    built: bool  #: False: a fresh index was already there and was kept
    bad_lines: int | None = None  #: lines that are not valid JSON (None: records were not parsed)
    bad_line_messages: tuple[
        str, ...
    ] = ()  #: the first :data:`~sjsonl.records.badlines.MAX_REPORTED`, located
    worker: str = ""  #: ``host:pid`` of the process that ran the task


def index_file(
    path: PathLike,
    *,
    index_dir: str | None = None,
    workers: int | None = None,
    progress: bool | None = False,
    rebuild: bool = False,
    on_bad_lines: str | None = None,
    field: str | None = None,
    storage_options: dict[str, Any] | None = None,
    compact: bool | None = None,
) -> IndexReport:
    """Build and save the index of one file (reusing a fresh one unless ``rebuild``): the task that
    :func:`build_indexes` runs on each worker. Raises what indexing the file raised.

    ``on_bad_lines``: ``None`` does not parse records; ``"skip"`` / ``"warn"`` also find the lines that
    are not valid JSON (saved beside the index, where ``JSONLDataset(on_bad_lines="skip")`` reads them);
    ``"error"`` raises :class:`~sjsonl.data.indexer.InvalidRecordsError` when there are any.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
        >>> _ = open(path, "w").write('{"a": 1}\\n{oops\\n')
        >>> r = index_file(path, on_bad_lines="skip")
        >>> r.records, r.bad_lines, os.path.basename(r.index_path)
        (2, 1, 'd.index.npy')
    """
    t0 = time.perf_counter()
    storage = open_storage(path, storage_options)
    layouts = layouts_for(storage, field)
    if rebuild:
        if compact is None:  # a compact index stays compact when rebuilt
            compact = format_on_disk(storage.path, index_dir)
        offsets, stamp, layout = build_layout(storage, workers=workers, progress=progress, layout=layouts[0])
        # save_index raises when the index cannot be saved: one only in a worker's memory helps no one
        written = save_index(storage, offsets, stamp, index_dir=index_dir, layout=layout, compact=compact)
        records, built = len(offsets), True
    else:  # what an open does: reuse, extend after an append, convert the format, or build
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            loaded = load_or_build_index(
                storage, index_dir=index_dir, workers=workers, progress=progress, layouts=layouts,
                compact=compact,
            )  # fmt: skip
        for w in caught:  # passed on, except the one that says the index stayed in memory (raised below)
            if loaded.path is not None:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        if loaded.path is None:
            reasons = "; ".join(str(w.message) for w in caught)
            raise SJSONLError(f"the index of {storage.path} could not be saved: {reasons}")
        written, stamp, records = loaded.path, loaded.stamp, len(loaded.offsets)
        built = loaded.origin != "found"
    bad: Sequence[Any] | None = None
    if on_bad_lines is not None:
        policy = check_policy(on_bad_lines)
        # what JSONLDataset(on_bad_lines="skip") finds, and saves beside the index for it to read
        files = open_data_files(
            [path], build_index_on_load=False, index_dir=index_dir, field=field,
            storage_options=storage_options,
            workers=workers,  # in a daemonic worker (Dask's) the parse runs in-process (runtime.parallel)
            progress=progress,
        )  # fmt: skip
        bad = _bad_lines_of_files(files, workers, progress)
        if policy == "error" and bad:
            located = [
                RecordDecodeError(b.path, b.line, b.offset, b.excerpt, b.reason) for b in bad[:MAX_REPORTED]
            ]
            raise InvalidRecordsError(located[:MAX_REPORTED], len(bad))
    return IndexReport(
        path=storage.path,
        index_path=written,
        records=records,
        nbytes=stamp.size,
        stored=stamp.stored,
        seconds=time.perf_counter() - t0,
        built=built,
        bad_lines=None if bad is None else len(bad),
        bad_line_messages=() if bad is None else tuple(str(b) for b in bad[:MAX_REPORTED]),
        worker=f"{socket.gethostname()}:{os.getpid()}",
    )


def _local_size(path: str) -> int | None:
    """Bytes of a local file (what the progress bar's total counts); None for a URL or a missing file."""
    if is_url(path):
        return None
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def _expand(paths: PathLike | Sequence[PathLike]) -> tuple[list[str], dict[str, BaseException]]:
    """The files to index (a ``.zip`` stands for its data members) and the paths that named none."""
    items: list[str] = []
    failed: dict[str, BaseException] = {}
    for p in [paths] if isinstance(paths, (str, os.PathLike)) else paths:
        try:
            items += [os.fspath(m) for m in expand_archives([p])]
        except (SJSONLError, OSError) as exc:
            failed[os.fspath(p)] = exc
    return items, failed


def _outcomes(
    items: list[str], executor: Executor | None, progress: bool | None, task: dict[str, Any]
) -> Iterator[tuple[int, IndexReport | BaseException]]:
    """``(position in items, report or error)`` as each file's task finishes."""
    if task.get("on_bad_lines") is not None:
        check_policy(task["on_bad_lines"])  # a wrong option is one error now, not one per file
    if executor is None:
        listed: dict[str, list[str]] = {}  # one batch of index writes (each directory swept once)
        for i, path in enumerate(items):
            try:
                with write_batch(listed):
                    got: IndexReport | BaseException = index_file(path, progress=progress, **task)
            except (SJSONLError, OSError) as exc:
                got = exc
            yield i, got
        return
    sizes = [_local_size(p) for p in items]
    known = sum(s for s in sizes if s is not None)
    total = known if None not in sizes else None  # a URL's size is learnt only from its report
    bar = Progress(total, f"indexing {len(items)} files", progress, size_hint=known)
    futures: dict[Future, int] = {}
    try:
        for i, path in enumerate(items):
            futures[executor.submit(index_file, path, progress=False, **task)] = i
        for fut in as_completed(futures):
            try:
                got = fut.result()
            except Exception as exc:  # whatever the task or the executor raised: this one file failed
                got = exc
            i = futures[fut]
            if bar.update is not None:
                bar.update(got.stored if isinstance(got, IndexReport) else sizes[i] or 0)
            yield i, got
    finally:  # an early exit (Ctrl-C, a consumer that stops) leaves no task queued behind it
        for fut in futures:
            fut.cancel()
        bar.close()


def index_files(
    paths: PathLike | Sequence[PathLike],
    *,
    executor: Executor | None = None,
    progress: bool | None = None,
    **task: Any,
) -> Iterator[tuple[str, IndexReport | BaseException]]:
    """``(path, report or error)`` for each file as its task finishes; ``task`` are :func:`index_file`'s
    options. Without an executor the files are indexed here, in order, each with its own progress bar;
    with one, workers show no bars and one bar here counts the bytes of finished files.

    Example:
        >>> import os, tempfile
        >>> d = tempfile.mkdtemp()
        >>> _ = open(os.path.join(d, "a.jsonl"), "w").write("{}\\n")
        >>> for path, got in index_files([os.path.join(d, "a.jsonl"), os.path.join(d, "nope.jsonl")]):
        ...     print(os.path.basename(path), type(got).__name__)
        a.jsonl IndexReport
        nope.jsonl DataFileNotFoundError
    """
    items, failed = _expand(paths)
    yield from failed.items()
    for i, got in _outcomes(items, executor, progress, task):
        yield items[i], got


def build_indexes(
    paths: PathLike | Sequence[PathLike],
    *,
    executor: Executor | None = None,
    index_dir: PathLike | None = None,
    workers: int | None = None,
    progress: bool | None = None,
    rebuild: bool = False,
    on_bad_lines: str | None = None,
    field: str | None = None,
    storage_options: dict[str, Any] | None = None,
    compact: bool | None = None,
) -> list[str]:
    """Make sure every file of ``paths`` has a fresh, saved index; return where each is, in order.

    Args:
        paths: data files (local paths or URLs; a ``.zip`` stands for its data members).
        executor: where the per-file tasks run: any :class:`concurrent.futures.Executor` —
            ``ProcessPoolExecutor``, a Dask ``client.get_executor()`` (``pip install 'sjsonl[cluster]'``),
            Ray's. ``None``: here, one file after another (each scan still uses threads).
        index_dir: where the indexes go (default: beside the data). Workers write there, so on a
            cluster it must be a directory they all share — as must the data's.
        workers: threads each task scans with (default: all cores of its machine, up to 8).
        progress: one progress bar over all files (default: when they are large and stderr is a terminal).
        rebuild: build every index again even when a fresh one is already there.
        on_bad_lines: also parse every record — ``"skip"``/``"warn"`` save the bad lines for
            ``JSONLDataset(on_bad_lines="skip")``, ``"error"`` fails the files that have any.
        field, storage_options, compact: as for :class:`~sjsonl.JSONLDataset`.

    Raises :class:`IndexBuildError` after every file has been tried when any failed, naming each.

    Example:
        >>> import os, tempfile
        >>> d = tempfile.mkdtemp()
        >>> _ = open(os.path.join(d, "a.jsonl"), "w").write("{}\\n")
        >>> try:
        ...     build_indexes([os.path.join(d, "a.jsonl"), d])
        ... except IndexBuildError as exc:
        ...     print(len(exc.failures), len(exc.index_paths))
        1 1
    """
    task = {
        "index_dir": None if index_dir is None else os.fspath(index_dir),
        "workers": workers,
        "rebuild": rebuild,
        "on_bad_lines": on_bad_lines,
        "field": field,
        "storage_options": storage_options,
        "compact": compact,
    }
    items, failures = _expand(paths)
    done: dict[int, IndexReport] = {}
    for i, got in _outcomes(items, executor, progress, task):
        if isinstance(got, IndexReport):
            done[i] = got
        else:
            failures[items[i]] = got
    for r in done.values():
        if on_bad_lines == "warn" and r.bad_lines:
            first = r.bad_line_messages[0] if r.bad_line_messages else ""
            warnings.warn(f"{r.bad_lines} bad lines skipped in {r.path}; first: {first}", BadLineWarning, 2)
    if failures:
        raise IndexBuildError(failures, {items[i]: r.index_path for i, r in sorted(done.items())})
    return [done[i].index_path for i in range(len(items))]


def find_bad_lines(
    path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    workers: int | None = None,
    progress: bool | None = None,
    **open_kwargs: Any,
) -> BadLines:
    """Every line of ``path`` (a file or a list of files) that is not a valid JSON record, in file order
    (a :class:`BadLines` sequence; ``record`` numbers count within each file).

    ``workers`` processes parse large files; ``open_kwargs`` say how files open, as for
    :class:`~sjsonl.JSONLDataset` (``index_dir=``, ``storage_options=``, ``field=``, ``allow_nan=``, …).
    Nothing is cached: this always looks again.
    """
    paths = [path] if isinstance(path, (str, os.PathLike)) else list(path)
    files = open_data_files(paths, workers=workers, progress=progress, **open_kwargs)
    found = [scan_file(f, workers, progress) for f in files]
    return BadLines.join(found, [0] * len(found))


def _bad_lines_of_files(files: Sequence[Any], workers: int | None, progress: bool | None) -> BadLines:
    """The bad lines of ``files`` as one sequence, each file's from its sidecar or found (and saved)."""
    found = [bad_lines_of(f, workers, progress) for f in files]
    return BadLines.join(found, [0] * len(found))
