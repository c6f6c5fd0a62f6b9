"""An index's O(records) checks on a background thread, so that opening a dataset costs O(1).

Opening a dataset reads the index's header and trailer, binds it to the data (size, times, identity, the
head and tail fingerprinted) and maps its offsets; the checks that read every offset — the CRC-32, strict
order, bounds — take milliseconds per million records (about 4 ms for 1.7 M). :class:`BackgroundCheck` runs
them on a daemon thread started at open (:func:`~sjsonl.index.store.check_by_reads`: by reads, not through
the map, which would fault if the file were rewritten in place meanwhile), while the caller goes on building
its model or its loader; the first read of an offset waits for the result (:meth:`result`), so no record is
ever read through offsets that were not checked. The CRC and the comparisons release the GIL.

A fork waits for every check under way (``os.register_at_fork``): a child never inherits a lock held by a
thread that does not exist in it, and inherits the finished result instead of a half-done one.

Example:
    >>> import os, tempfile, numpy as np
    >>> from sjsonl.index.store import meta_of, write_index
    >>> from sjsonl.storage import DataStamp
    >>> path = os.path.join(tempfile.mkdtemp(), "d.index.npy")
    >>> offsets = np.array([0, 4], dtype=np.uint8)
    >>> _ = write_index(path, offsets, meta_of(offsets, DataStamp(8, 1, "ab"), "/d.jsonl"))
    >>> BackgroundCheck(path).result().offsets.tolist()
    [0, 4]
"""

from __future__ import annotations

import _thread
import os
import threading

from sjsonl.index.layout import IndexFile
from sjsonl.index.store import check_by_reads, read_index

_RUNNING: set[BackgroundCheck] = set()
_RUNNING_LOCK = threading.Lock()


class BackgroundCheck:
    """:func:`~sjsonl.index.store.read_index` of ``index_path``, checks included, on a daemon thread."""

    def __init__(self, index_path: str) -> None:
        self.index_path = index_path
        self._error: BaseException | None = None
        self._done = threading.Lock()  # held while the check runs
        self._done.acquire()
        with _RUNNING_LOCK:
            _RUNNING.add(self)
        # a bare thread: threading.Thread.start() waits for the thread to run first, which costs the open
        # about half a millisecond in a fresh process
        _thread.start_new_thread(self._run, ())

    def _run(self) -> None:
        try:
            check_by_reads(self.index_path)  # reads, not the map: the file may be rewritten in place
        except BaseException as exc:  # handed to the reader, which decides (rebuild, or raise)
            self._error = exc
        finally:
            with _RUNNING_LOCK:
                _RUNNING.discard(self)
            self._done.release()

    def wait(self) -> None:
        """Return once the check is done."""
        with self._done:
            pass

    def result(self) -> IndexFile:
        """The checked index, once the check is done (mapped now: the checks are not made again, unless
        the file changed since); raises what the check raised."""
        self.wait()
        if self._error is not None:
            raise self._error
        return read_index(self.index_path)


def _wait_for_checks() -> None:
    with _RUNNING_LOCK:
        running = list(_RUNNING)
    for check in running:
        check.wait()


os.register_at_fork(before=_wait_for_checks)
