"""``.bz2`` files read at random offsets through indexed_bzip2's block offsets (the ``compress`` extra).

bzip2 compresses independent blocks of 100–900 KB (``-1``…``-9``); a read decompresses from the start of the
block that holds its offset. Finding the blocks takes one full pass — the index scan makes it — and their
offsets (compressed bit offset → decompressed byte offset, a few bytes per block) are saved beside the
index (``.seekpoints``, bound to the data version and the index and checked as for gzip:
:mod:`.seekpoints`), so reopening, and every worker process, starts with them instead of decompressing the
file again.

Example:
    >>> import bz2, os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl.bz2")
    >>> _ = open(path, "wb").write(bz2.compress(b'{"a": 1}\\n{"a": 2}\\n'))
    >>> Bzip2File(LocalFile(path)).read(9, 17)
    b'{"a": 2}'
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from sjsonl.errors import require
from sjsonl.storage.base import DataStamp
from sjsonl.storage.local import LocalFile
from sjsonl.storage.seekable import SeekableStreamFile
from sjsonl.storage.seekpoints import BZIP2_SEEK_MAGIC, SavedPoints, check_bzip2_blocks, seek_key
from sjsonl.storage.sidecar import encode_sidecar, warn_ignored

__all__ = ["Bzip2File", "LocalFile"]


class Bzip2File(SeekableStreamFile):
    """A bzip2 file (one or several streams) read at random offsets, block by block.

    Example:
        >>> import bz2, os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl.bz2")
        >>> _ = open(path, "wb").write(bz2.compress(b"[1]\\n[2]\\n"))
        >>> f = Bzip2File(LocalFile(path))
        >>> list(f.chunks(4)), f.size
        ([b'[1]\\n', b'[2]\\n'], 8)
    """

    def __init__(self, source: Any) -> None:
        require("indexed_bzip2", "compress")  # a missing extra is an error on open, not on the first read
        super().__init__(source)
        self._saved: SavedPoints | None = (
            None  # block offsets saved beside the index, for this data and index
        )

    def _decompressor(self, fileobj: Any) -> Any:
        # parallelization=1: one thread per handle; DataLoader workers already use the cores
        ibz2 = require("indexed_bzip2", "compress")
        handle = ibz2.IndexedBzip2File(fileobj, parallelization=1)
        points = self._load_points()
        if points:
            try:
                handle.set_block_offsets(points)
            except Exception:  # unusable points only cost speed: a seek rebuilds them
                handle = ibz2.IndexedBzip2File(self._compressed(), parallelization=1)
        return handle

    def _open_handle(self, inherited: tuple[threading.Lock, Any] | None) -> Any:
        handle = super()._open_handle(inherited)
        if handle is not None and inherited is not None and inherited[1] is not None and not self._saved:
            lock, parent = inherited  # after a fork: start from the parent's blocks when it is not mid-read
            if lock.acquire(blocking=False):
                try:
                    if parent.block_offsets_complete():
                        handle.set_block_offsets(parent.block_offsets())
                finally:
                    lock.release()
        return handle

    # ---- block offsets saved beside the index (called by the index layer, as for gzip)
    def export_seek_state(self, stamp: DataStamp, index_checksum: int = 0) -> bytes | None:
        """This process's block offsets as a ``.seekpoints`` file for ``stamp`` and the index with CRC-32
        ``index_checksum`` (``None`` unless complete)."""
        state = self._state
        if state is None or state[2] is None:
            return None
        with state[1]:
            if not state[2].block_offsets_complete():
                return None
            offsets = state[2].block_offsets()
        pairs = np.array(sorted(offsets.items()), dtype="<i8").reshape(-1, 2)
        return b"".join(encode_sidecar(BZIP2_SEEK_MAGIC, seek_key("bzip2", stamp, index_checksum), pairs))

    def attach_seek_state(
        self, path: str, stamp: DataStamp, index_checksum: int = 0, line_starts: Any = None
    ) -> None:
        """Use the block offsets in ``path`` (if saved for ``stamp`` and this index, and they pass their
        checks) in new handles. (``line_starts``: as for gzip; blocks carry no data to check them against.)"""
        self._saved = SavedPoints(path, BZIP2_SEEK_MAGIC, "bzip2", stamp, index_checksum)
        self._size = stamp.size if stamp.size >= 0 else None

    def distrust_saved_state(self, why: str) -> bool:
        """Bytes read did not end lines where the index says records end: if block offsets were saved,
        stop using them (one warning) and say so — the caller reads again. Else ``False``."""
        saved = self._saved
        if saved is None:
            return False
        warn_ignored(saved.path, why, saved.identity or why)
        self._saved = None
        self.reset_handles()
        return True

    def _load_points(self) -> dict[int, int] | None:
        saved = self._saved
        if saved is None:
            return None
        stamp = saved.stamp
        pairs = saved.load(
            lambda body: check_bzip2_blocks(body, stamp.stored, stamp.size, self.source.read_many)
        )
        return None if pairs is None else {int(a): int(b) for a, b in pairs.tolist()}

    def refresh(self) -> None:
        super().refresh()
        self._saved = None
