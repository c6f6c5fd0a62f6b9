"""What the block-compressed storages (:mod:`.bzip2`, :mod:`.xz`) share: a decompressor that is a seekable
file object (``seek`` + ``read`` of decompressed bytes), one per process, read through the pinned file.

A read at a random offset costs decompressing from the start of the block that holds it: bzip2 blocks are
100–900 KB of input; xz blocks are whatever the writer chose (one block for the whole file, by default,
unless written with ``xz -T0`` or ``--block-size``).

Example:
    >>> import bz2, os, tempfile
    >>> from sjsonl.storage.bzip2 import Bzip2File
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl.bz2")
    >>> _ = open(path, "wb").write(bz2.compress(b"[1]\\n[2]\\n"))
    >>> f = Bzip2File(LocalFile(path))
    >>> f.read(4, 7), f.size
    (b'[2]', 8)
"""

from __future__ import annotations

import os
import threading
from typing import Any

from sjsonl.errors import DataFileError, StaleDataError
from sjsonl.storage.compressed import _PerProcessHandle
from sjsonl.storage.local import LocalFile

__all__ = ["LocalFile", "SeekableStreamFile"]


class SeekableStreamFile(_PerProcessHandle):
    """A storage over a decompressor that seeks: subclasses say how to open one (:meth:`_decompressor`).

    Example:
        >>> import lzma, os, tempfile
        >>> from sjsonl.storage.xz import XzFile
        >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl.xz")
        >>> _ = open(path, "wb").write(lzma.compress(b"[1]\\n[2]\\n"))
        >>> XzFile(LocalFile(path)).read(0, 3)
        b'[1]'
    """

    #: reading through a gap inside a block costs little more than starting the block again
    coalesce_gap = 256 << 10
    module = ""
    _errors: tuple[type[BaseException], ...] = (OSError, ValueError, EOFError, RuntimeError)

    def __init__(self, source: Any) -> None:
        self.source, self.path = source, source.path
        self._state: tuple[int, threading.Lock, Any] | None = None
        self._size: int | None = None

    def _decompressor(self, fileobj: Any) -> Any:
        raise NotImplementedError

    def _open_handle(self, inherited: tuple[threading.Lock, Any] | None) -> Any:
        pinned = getattr(self.source, "pinned", None)
        if not (pinned.stored if pinned is not None else self.source.stamp(fingerprint=False).size):
            return None  # an empty file: no stream to open
        try:
            return self._decompressor(self._compressed())
        except (StaleDataError, DataFileError):  # ours, already saying what is wrong
            raise
        except self._errors as exc:
            raise self._failed(exc) from None

    @property
    def size(self) -> int:
        if self._size is None:
            lock, handle = self._handle()
            if handle is None:
                return 0
            try:
                with lock:
                    self._size = handle.seek(0, os.SEEK_END)
            except self._errors as exc:
                raise self._failed(exc) from None
        return self._size  # type: ignore[return-value]

    def read(self, start: int, end: int) -> bytes:
        if end <= start:
            return b""
        lock, handle = self._handle()
        if handle is None:
            return b""
        try:
            with lock:
                handle.seek(start)
                return handle.read(end - start)  # type: ignore[no-any-return]
        except StaleDataError:
            raise
        except self._errors as exc:
            raise self._failed(exc) from None

    def reset_handles(self) -> None:
        super().reset_handles()
        self._size = None

    def refresh(self) -> None:
        super().refresh()
        self._size = None

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_state"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._state = None
