"""Many ranges of one remote object at once: a window of requests in flight that halves under throttling and
grows back, and hedged requests for the slowest.

:class:`~sjsonl.storage.remote.RemoteFile` reads a batch's ranges (and the chunk cache's fills) through a
:class:`RangeFetcher`, one per process:

- **The window.** At most ``window`` requests of the process to one host are in flight (one fetcher per
  host and process: :func:`fetcher_for`, so the files of one bucket share it). It starts at half its ceiling
  and follows AIMD, as TCP does: each success adds ``1 / window`` (one more request per window of
  successes), and a throttling answer (S3's ``503 SlowDown``) halves it, at most once a second — a storm
  of 503s brings it down to a few requests within seconds, and it climbs back once they stop. Its ceiling
  is ``$SJSONL_REMOTE_CONCURRENCY`` (64), and never more than the client's connection pool (botocore's
  ``max_pool_connections``, 10 unless ``config_kwargs`` raise it: on the test server, which shares the
  machine's 2 cores, 64 connections per process delivered fewer records a second than 10). 64 is
  Little's law for the rates a training process needs: requests in flight = requests/s × latency, so 64
  at S3's ~30 ms is ~2,000 requests a second per process — past what a node's DataLoader workers
  consume, since a request brings a batch's merged ranges or a few MiB of chunks.
- **Hedging.** A request not answered after ``hedge_after()`` seconds — twice the 95th percentile of the
  process's recent request times, between 0.2 and 2 s (2 s until 32 are known; AWS advises re-issuing the
  slowest requests past a high percentile or about 2 s) — is sent again (and once more after as long
  again); the first answer wins and the others are cancelled. A stalled connection costs ~2 s, not its
  timeout. Only a request's first copy takes a slot of the window (in a steady state, the percentile
  makes hedges about 5% of requests).
- **Background requests** (the chunk cache's filler, fetching MiBs of chunks at a time) take at most half the
  window: a batch's own reads always find room, so the first batches over a fresh cache do not queue behind
  the fill.

Failures come back as the ranges' results, exceptions in place of bytes; the caller retries the transient
ones (:mod:`~sjsonl.storage.retry`). Filesystems without an async API (``file://``) are read with their
own ``cat_ranges``.

Example:
    >>> window = Window(ceiling=8)
    >>> window.size
    4
    >>> window.throttled(now=10.0); window.throttled(now=10.5); window.size  # (once a second at most)
    2
    >>> for _ in range(6):
    ...     window.succeeded()
    >>> window.size
    4
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import Any

from sjsonl.storage.retry import is_throttling

#: Ceiling of the window: requests in flight per process (``$SJSONL_REMOTE_CONCURRENCY`` overrides it).
CONCURRENCY = 64
#: Hedge delay bounds (seconds), and how many request times make the percentile trusted.
HEDGE_MIN, HEDGE_MAX, HEDGE_SAMPLES = 0.2, 2.0, 32
#: Copies of one request at most (the first and two hedges, each sent after another hedge delay).
HEDGE_COPIES = 3


class Window:
    """The AIMD window of requests in flight (see the module)."""

    def __init__(self, ceiling: int = CONCURRENCY) -> None:
        self.ceiling = max(1, ceiling)
        self._size = max(1.0, self.ceiling / 2)
        self._cut_at = float("-inf")

    @property
    def size(self) -> int:
        return int(self._size)

    def succeeded(self) -> None:
        self._size = min(float(self.ceiling), self._size + 1.0 / self._size)

    def throttled(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        if now - self._cut_at >= 1.0:
            self._size, self._cut_at = max(1.0, self._size / 2), now


class RequestTimes:
    """Recent request times, for the hedge delay (see the module).

    Example:
        >>> times = RequestTimes()
        >>> times.hedge_after()
        2.0
        >>> for _ in range(40):
        ...     times.add(0.03)
        >>> times.hedge_after()
        0.2
    """

    def __init__(self) -> None:
        self._recent: deque[float] = deque(maxlen=256)

    def add(self, seconds: float) -> None:
        self._recent.append(seconds)

    def hedge_after(self) -> float:
        if len(self._recent) < HEDGE_SAMPLES:
            return HEDGE_MAX
        ordered = sorted(self._recent)
        p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
        return min(HEDGE_MAX, max(HEDGE_MIN, 2 * p95))


class RangeFetcher:
    """Ranges of one object through an fsspec filesystem, under the window, hedged (see the module).

    Example:
        >>> import fsspec, os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "d.bin")
        >>> _ = open(path, "wb").write(b"0123456789")
        >>> RangeFetcher().fetch(fsspec.filesystem("file"), path, [(0, 3), (5, 7)])  # (not async: cat_ranges)
        [b'012', b'56']
    """

    def __init__(self, ceiling: int | None = None) -> None:
        self.window, self.times = Window(fetch_ceiling() if ceiling is None else ceiling), RequestTimes()
        self.hedged = self.hedge_wins = 0  # copies sent again, and answers a copy gave first (diagnosis)
        self._lock = threading.Lock()
        self._in_flight = self._in_background = 0  # requests in flight; of them, background ones
        self._slots: dict[int, asyncio.Condition] = {}  # per event loop

    def fetch(
        self, fs: Any, key: str, ranges: Sequence[tuple[int, int]], background: bool = False
    ) -> list[Any]:  # fmt: skip
        """The bytes of each range, or the exception its request ended in. ``background`` requests (the chunk
        cache's filler) take at most half the window, so a batch's reads never wait behind them."""
        if not getattr(fs, "async_impl", False) or getattr(fs, "loop", None) is None:
            starts, ends = [s for s, _ in ranges], [e for _, e in ranges]
            return list(fs.cat_ranges([key] * len(ranges), starts, ends, on_error="return"))
        from fsspec.asyn import sync  # type: ignore[import-untyped]

        return sync(fs.loop, self._fetch_all, fs, key, list(ranges), background)  # type: ignore[no-any-return]

    async def _fetch_all(
        self, fs: Any, key: str, ranges: list[tuple[int, int]], background: bool
    ) -> list[Any]:  # fmt: skip
        loop = asyncio.get_running_loop()
        slots = self._slots.get(id(loop))
        if slots is None:
            slots = self._slots[id(loop)] = asyncio.Condition()
        pool = _pool_size(fs)
        reads = (self._one(fs, key, start, end, slots, pool, background) for start, end in ranges)
        return await asyncio.gather(*reads, return_exceptions=True)

    def _room(self, pool: int, background: bool) -> bool:
        limit = min(self.window.size, pool)
        return self._in_flight < limit and (not background or self._in_background < max(1, limit // 2))

    async def _one(
        self, fs: Any, key: str, start: int, end: int, slots: asyncio.Condition, pool: int, background: bool
    ) -> bytes:  # fmt: skip
        async with slots:
            await slots.wait_for(lambda: self._room(pool, background))
            self._in_flight += 1
            self._in_background += background
        try:
            return await self._hedged(fs, key, start, end)
        finally:
            async with slots:
                self._in_flight -= 1
                self._in_background -= background
                slots.notify_all()

    async def _hedged(self, fs: Any, key: str, start: int, end: int) -> bytes:
        t0 = time.monotonic()
        first = asyncio.ensure_future(fs._cat_file(key, start=start, end=end))
        tasks = {first}
        copies = 1
        try:
            while True:
                wait = self.times.hedge_after() if copies < HEDGE_COPIES else None
                done, _ = await asyncio.wait(tasks, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
                if not done:  # slow: send it again; the first answer wins
                    with self._lock:
                        self.hedged += 1
                    tasks.add(asyncio.ensure_future(fs._cat_file(key, start=start, end=end)))
                    copies += 1
                    continue
                ok = [t for t in done if t.exception() is None]
                if ok:
                    if ok[0] is not first:
                        with self._lock:
                            self.hedge_wins += 1
                    self.window.succeeded()
                    self.times.add(time.monotonic() - t0)
                    return ok[0].result()  # type: ignore[no-any-return]
                tasks -= done
                if not tasks:  # every copy sent failed: the last one's error
                    exc = next(iter(done)).exception()
                    assert exc is not None
                    if is_throttling(exc):
                        self.window.throttled()
                    raise exc
        finally:
            for t in tasks:
                t.cancel()


def fetch_ceiling() -> int:
    """The window's ceiling: ``$SJSONL_REMOTE_CONCURRENCY``, else :data:`CONCURRENCY`."""
    raw = os.environ.get("SJSONL_REMOTE_CONCURRENCY", "")
    return int(raw) if raw.strip().isdigit() and int(raw) > 0 else CONCURRENCY


def _pool_size(fs: Any) -> int:
    """The connections the filesystem's client may open at once (s3fs: botocore's ``max_pool_connections``,
    10 unless ``config_kwargs`` say otherwise): requests past it would wait for a connection, and that wait
    would count as slowness and set off hedges."""
    config = getattr(getattr(getattr(fs, "_s3", None), "meta", None), "config", None)
    size = getattr(config, "max_pool_connections", None)
    return int(size) if isinstance(size, int) and size > 0 else 1 << 30


_FETCHERS: dict[tuple[int, str], RangeFetcher] = {}
_FETCHERS_LOCK = threading.Lock()


def _fresh_lock_after_fork() -> None:
    global _FETCHERS_LOCK
    _FETCHERS_LOCK = threading.Lock()  # (a reading thread — the filler, a window read ahead — may hold it)


os.register_at_fork(after_in_child=_fresh_lock_after_fork)


def fetcher_for(url: str) -> RangeFetcher:
    """This process's fetcher for ``url``'s host (protocol and bucket or server).

    Example:
        >>> fetcher_for("s3://bucket/a.jsonl") is fetcher_for("s3://bucket/b.jsonl")
        True
    """
    protocol, _, rest = url.partition("://")
    where = (os.getpid(), f"{protocol}://{rest.split('/', 1)[0]}")
    with _FETCHERS_LOCK:
        fetcher = _FETCHERS.get(where)
        if fetcher is None:
            for stale in [k for k in _FETCHERS if k[0] != where[0]]:  # (a forked child's inherited ones)
                del _FETCHERS[stale]
            fetcher = _FETCHERS[where] = RangeFetcher()
        return fetcher
