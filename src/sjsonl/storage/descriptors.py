"""A budget of open descriptors for local data files: thousands of files open with a bounded set.

A dataset of 1,500 shards must open under ``ulimit -n 1024``. Each :class:`~sjsonl.storage.LocalFile`
keeps its descriptor while it is among the :func:`limit` most recently used; the least recently used one
gives its descriptor up and reopens the file on its next use — by path, checked to be the same file
(device and inode) holding the same version (:meth:`LocalFile._open`), as a pickled copy does. A memory
map outlives its descriptor, so a mapped file reads on without one; only its version checks reopen it.

A descriptor is never taken from a file in use: short uses (a ``pread`` and its ``fstat``) hold the
file's lock, long ones (an index scan reading the descriptor on threads) hold the file
(:meth:`~sjsonl.storage.LocalFile.holding`); the budget skips both. A number freed by ``close`` can be
reused by the next ``open`` at once, so closing one in use could make a reader read another file.

The limit is a quarter of the soft ``RLIMIT_NOFILE`` (256 under the usual 1024), at least 8 and at most
4096: the rest stays for the caller's own files, sockets and DataLoader pipes.

Example:
    >>> budget = DescriptorBudget(limit=2)
    >>> budget.limit
    2
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any


def default_limit() -> int:
    """A quarter of the soft limit on open files, between 8 and 4096.

    Example:
        >>> 8 <= default_limit() <= 4096
        True
    """
    # sysconf, not resource.getrlimit: the same soft limit without importing a module at the first open
    try:
        soft = os.sysconf("SC_OPEN_MAX")
    except (OSError, ValueError):
        return 256
    if soft <= 0:  # unlimited or unknown
        return 4096
    return max(8, min(4096, soft // 4))


class DescriptorBudget:
    """The open descriptors of local data files, least recently used first (see the module docstring)."""

    def __init__(self, limit: int | None = None) -> None:
        self._fixed = limit
        self._limit: int | None = limit
        # Re-entrant, because a garbage collection may run inside a critical section (any allocation can
        # start one) and finalize a LocalFile, whose __del__ calls closed() on this same thread: with a plain
        # Lock that deadlocked a test worker for good. A close arriving that way is deferred until the
        # section ends, so the section never sees its dict change under it.
        self._lock = threading.RLock()
        self._busy = False
        self._deferred: list[int] = []
        self._open: OrderedDict[int, weakref.ref[Any]] = OrderedDict()

    @contextlib.contextmanager
    def _section(self) -> Iterator[None]:
        with self._lock:
            self._busy = True
            try:
                yield
            finally:
                self._busy = False
                while self._deferred:
                    self._open.pop(self._deferred.pop(), None)

    @property
    def limit(self) -> int:
        if self._limit is None:
            self._limit = default_limit()
        return self._limit

    def opened(self, file: Any) -> None:
        """``file`` opened a descriptor: count it, and take descriptors from the least recently used
        files beyond the limit."""
        key = id(file)
        with self._section():
            self._open[key] = weakref.ref(file)
            self._open.move_to_end(key)
            over = len(self._open) - self.limit
            # the oldest few (more than needed: some may be in use and keep theirs; `file` is the newest)
            victims = list(itertools.islice(self._open.values(), over * 2 + 4)) if over > 0 else []
        for ref in victims:
            if over <= 0:
                break
            other = ref()
            if other is file:
                break
            if other is None or other.give_up_descriptor():
                over -= 1

    def used(self, file: Any) -> None:
        """``file`` used its descriptor: most recently used now (bookkeeping only near the limit)."""
        if len(self._open) * 2 > self.limit:
            with self._section():
                if id(file) in self._open:
                    self._open.move_to_end(id(file))

    def closed(self, file: Any) -> None:
        """``file`` closed its descriptor."""
        with self._lock:
            if self._busy:  # a finalizer run inside this thread's own section: after it, not now
                self._deferred.append(id(file))
            else:
                self._open.pop(id(file), None)

    def __len__(self) -> int:
        return len(self._open)

    def after_fork(self) -> None:
        """In a forked child: a lock another thread of the parent held is a new one here."""
        self._lock = threading.RLock()
        self._busy, self._deferred = False, []
        self._limit = self._fixed


#: The budget every local data file of this process draws on.
BUDGET = DescriptorBudget()
os.register_at_fork(after_in_child=BUDGET.after_fork)
