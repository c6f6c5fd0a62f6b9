"""Filling a remote object's chunk cache in the background (:mod:`~sjsonl.storage.chunk_store`).

The first batches over a fresh cache need records from everywhere in the object: fetching their whole chunks
first would make the first batch wait for most of the object. Instead such a read fetches its own ranges (one
round trip), and hands the chunks to a :class:`ChunkFiller` — one daemon thread per process that fetches
them a few at a time (``BATCH`` chunks a fetch at first, then more), in the order they were first wanted,
under the store's chunk locks (so the DataLoader workers of a node do not fetch a chunk twice). Once a chunk
is in, reads of its records are local. A failed fill (the network, a replaced object) is dropped: the read
that needs those bytes fetches them itself and raises what it meets. Whenever its queue empties, the thread
calls ``idle()`` (if given): the remote file seals a store that has become complete there, off the read path.

Example:
    >>> import tempfile, threading
    >>> from sjsonl.storage.chunk_store import ChunkStore
    >>> body = bytes(range(64))
    >>> store = ChunkStore.open(tempfile.mkdtemp(), ("mem://x", 64, "e"), 64, chunk_bytes=16)
    >>> def fill(s, chunks):
    ...     for c in s.missing(chunks):
    ...         lo, hi = s.span(c)
    ...         s.put(c, body[lo:hi])
    >>> filler = ChunkFiller(store, fill)
    >>> filler.want([3, 1]); filler.wait(5)
    True
    >>> store.missing([0, 1, 2, 3])
    [0, 2]
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

#: Chunks the filler takes from its queue for one fetch: BATCH at first, doubled at each fetch up to
#: BATCH_MOST (a slow start: the first fetches share the window and the CPU with the first batches' own
#: reads; once those flow, larger fetches bring the rest of the object in fewer, larger requests).
BATCH, BATCH_MOST = 8, 32


class ChunkFiller:
    """A background thread that fills ``store`` by calling ``fill(store, chunks)``."""

    def __init__(
        self, store: Any, fill: Callable[[Any, Sequence[int]], None], idle: Callable[[], None] | None = None
    ) -> None:
        self.store, self._fill, self._idle = store, fill, idle
        self._poked = False
        self._queue: deque[int] = deque()
        self._queued: set[int] = set()
        self._cond = threading.Condition()
        self._busy = False
        self._batch = BATCH
        self._thread: threading.Thread | None = None

    def want(self, chunks: Sequence[int]) -> None:
        """Queue ``chunks`` (those not queued already) for fetching."""
        with self._cond:
            for c in chunks:
                if c not in self._queued:
                    self._queued.add(c)
                    self._queue.append(c)
            self._start()

    def poke(self) -> None:
        """Run ``idle()`` on the thread soon, with nothing to fetch."""
        with self._cond:
            self._poked = True
            self._start()

    def _start(self) -> None:  # (under the condition)
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="sjsonl-chunk-fill", daemon=True)
            self._thread.start()
        self._cond.notify()

    def wait(self, timeout: float) -> bool:
        """Whether the queue emptied (and the last fetch ended) within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._queue or self._busy or self._poked:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._poked:
                    self._cond.wait()
                batch = [self._queue.popleft() for _ in range(min(self._batch, len(self._queue)))]
                self._batch = min(BATCH_MOST, self._batch * 2)
                self._busy, self._poked = True, False
            try:
                if batch:
                    self._fill(self.store, batch)
                if self._idle is not None and not self._queue:
                    self._idle()
            except Exception:  # the read that needs these bytes fetches them itself and raises
                pass
            with self._cond:
                self._queued.difference_update(batch)
                self._busy = False
                self._cond.notify_all()
