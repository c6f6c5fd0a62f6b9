"""Reads of a known future: the windows of ranges an iteration will read next, fetched while the window before
them is consumed.

A shuffled pass over a remote object knows its whole order before it starts (the seed, the epoch, the
rank and worker), so the records it will need next are known too. Read one window at a time, each
window waits for its round trips and the connections idle while it is decoded; :func:`fetch_ahead`
keeps the next windows' reads under way instead — up to ``windows`` of them beyond the one consumed,
while at most ``most_bytes`` are fetched ahead — and hands the results out in the order of the plan. It
starts slowly: one window ahead until the first is delivered, one more for each window delivered after
that, up to ``windows`` — so the first window's requests are not queued behind the later ones'
(measured: the first batch of an ``IterableDataset`` at 30 ms per request 0.5–0.9 s against 1.0–1.7 s
with every window sent at once, the records a second the same).

What comes out never changes: each window is read by the storage's own ``read_many`` (its retries,
hedges, version pin and chunk cache included) and delivered in order; an error — of a read, or of the
plan itself — is raised where its window comes, after every window before it.

Bounds, per process: the reads run on one pool of :data:`THREADS` threads shared by every iteration (a
mixture of many remote sources iterates them all at once), and windows go ahead only while the
process's bytes ahead stay under :data:`PROCESS_BYTES` — each iteration always has its next window
under way, so none starves. Windows are counted in records, so one of very large records can exceed
``most_bytes`` alone. Stopping early (``close()`` on the iterator, or dropping it) stops drawing the
plan and cancels the windows not started; those under way finish and are discarded. The pool is made
per process, after a fork, never inherited.

Example:
    >>> data = b"0123456789"
    >>> def read_many(ranges):
    ...     return [data[s:e] for s, e in ranges]
    >>> plan = [("a", [(0, 2), (5, 6)]), ("b", [(8, 10)])]
    >>> list(fetch_ahead(read_many, plan))
    [('a', [b'01', b'5']), ('b', [b'89'])]
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from sjsonl.errors import InvalidArgumentError

Key = TypeVar("Key")
Ranges = Sequence[tuple[int, int]]

#: Windows read ahead at most: with a window's ranges going out together, two already keep a host's
#: connections busy while one is decoded; four ride out a slow window (a hedge, a retry).
WINDOWS = 4
#: Bytes fetched ahead at most by one iteration, beyond the window consumed.
MOST_BYTES = 64 << 20
#: Reading threads per process, shared by every iteration, and the bytes all of them fetch ahead at most.
THREADS, PROCESS_BYTES = 16, 256 << 20

_lock = threading.Lock()
_pool: tuple[int, ThreadPoolExecutor] | None = None  # (pid, pool): a forked child makes its own
_ahead_bytes = [0]  # bytes the process's iterations have ahead (under _lock)
_under_way = [0]  # windows submitted and not finished (under _lock)


def windows_under_way() -> int:
    """Windows this process's iterations have submitted that have not finished (read, failed or
    cancelled) — 0 once every iteration has stopped and its last reads have ended.

    Example:
        >>> list(fetch_ahead(lambda ranges: [b""] * len(ranges), [(0, [(0, 1)])]))
        [(0, [b''])]
        >>> windows_under_way()
        0
    """
    with _lock:
        return _under_way[0]


def _read(read_many: Callable[[Ranges], list[bytes]], ranges: Ranges) -> list[bytes]:
    try:
        return read_many(ranges)
    finally:  # (before the result is set: whoever sees it sees the count without it)
        with _lock:
            _under_way[0] -= 1


def _process_pool() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None or _pool[0] != os.getpid():
            _pool = (
                os.getpid(),
                ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="sjsonl-fetch-ahead"),
            )
            _ahead_bytes[0] = _under_way[0] = 0
        return _pool[1]


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()  # (a reading thread may have held it at the fork)


os.register_at_fork(after_in_child=_after_fork_in_child)


def fetch_ahead(
    read_many: Callable[[Ranges], list[bytes]],
    plan: Iterable[tuple[Key, Ranges]],
    windows: int = WINDOWS,
    most_bytes: int = MOST_BYTES,
) -> Generator[tuple[Key, list[bytes]], None, None]:
    """``(key, read_many(ranges))`` for each ``(key, ranges)`` of ``plan``, in order, the next windows' reads
    under way while one is consumed (see the module; ``windows=0``: none, each read in the consuming thread
    when it is wanted). ``plan`` is drawn in the consuming thread; only ``read_many`` runs in the reading
    threads.

    Example:
        >>> calls = []
        >>> def read_many(ranges):
        ...     calls.append(ranges)
        ...     return [b"x" * (e - s) for s, e in ranges]
        >>> it = fetch_ahead(read_many, ((k, [(0, k)]) for k in range(1, 100)), windows=2)
        >>> next(it), next(it)
        ((1, [b'x']), (2, [b'xx']))
        >>> it.close()
        >>> len(calls) < 10  # reads stop with the iteration: at most the windows ahead were asked for
        True
    """
    if windows < 0 or most_bytes < 0:
        raise InvalidArgumentError(
            f"fetch_ahead needs windows >= 0 and most_bytes >= 0: {windows=}, {most_bytes=}"
        )
    if windows == 0:  # nothing ahead: each window read when it is wanted, in this thread
        return ((key, read_many(ranges)) for key, ranges in plan)
    return _ahead(read_many, iter(plan), windows, most_bytes)


def _ahead(
    read_many: Callable[[Ranges], list[bytes]],
    source: Iterator[tuple[Any, Ranges]],
    windows: int,
    most_bytes: int,
) -> Generator[tuple[Any, list[bytes]], None, None]:
    pending: deque[tuple[Any, Future[list[bytes]], int]] = deque()  # (key, its read, its bytes)
    pool = _process_pool()
    delivered, drawn = 0, False  # windows handed out; the plan exhausted (or failed)

    def room() -> bool:
        if not pending:
            return True  # the next window always goes
        with _lock:
            return sum(size for _, _, size in pending) < most_bytes and _ahead_bytes[0] < PROCESS_BYTES

    def fill() -> None:
        nonlocal drawn
        most = min(windows, delivered + 1)  # a slow start: the first window has the connections first
        while not drawn and len(pending) < most and room():
            try:
                step = next(source, None)
            except Exception as exc:  # the plan failed: raised where its window comes, nothing drawn after
                failed: Future[list[bytes]] = Future()
                failed.set_exception(exc)
                pending.append((None, failed, 0))
                drawn = True
                return
            if step is None:
                drawn = True
                return
            key, ranges = step
            size = sum(max(0, e - s) for s, e in ranges)
            with _lock:
                _ahead_bytes[0] += size
                _under_way[0] += 1
            pending.append((key, pool.submit(_read, read_many, ranges), size))

    def release(size: int, future: Future[list[bytes]] | None = None) -> None:
        """A window's bytes no longer ahead (and, cancelled before it ran, no longer under way)."""
        cancelled = future is not None and future.cancel()
        with _lock:
            _ahead_bytes[0] -= size
            _under_way[0] -= cancelled

    try:
        fill()
        while pending:
            key, future, size = pending.popleft()
            release(size)
            fill()  # the windows after it go out before this one is waited for and consumed
            result = future.result()
            delivered += 1
            yield key, result
    finally:
        for _, future, size in pending:  # (a window under way finishes in its thread, and is dropped)
            release(size, future)
