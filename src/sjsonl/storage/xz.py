"""``.xz`` files read at random offsets through python-xz (the ``compress`` extra).

An xz file is a list of independently compressed blocks, and its index (at the end of the file) says where
each starts: opening one costs reading that index, no pass over the data, and a read decompresses from the
start of its block. So random access is as good as the blocks are small. ``xz`` writes a single block
for the whole file unless told otherwise (``xz -T0`` since 5.4 writes blocks of 3× the dictionary size,
``--block-size=1MiB`` any size): a read then decompresses everything before it. Such a file (any block
over :data:`XZ_MAX_BLOCK` decompressed bytes) is refused for random access with that recipe; it still
streams (``JSONLStream``, ``streaming=True``).

Example:
    >>> import lzma, os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl.xz")
    >>> _ = open(path, "wb").write(lzma.compress(b'{"a": 1}\\n{"a": 2}\\n'))
    >>> XzFile(LocalFile(path)).read(9, 17)
    b'{"a": 2}'
"""

from __future__ import annotations

import errno
import itertools
import threading
from typing import Any

from sjsonl.errors import DataFileError, require
from sjsonl.storage.local import LocalFile
from sjsonl.storage.seekable import SeekableStreamFile

__all__ = ["XZ_MAX_BLOCK", "LocalFile", "XzFile"]

#: The largest block (decompressed bytes) read at random: a read decompresses up to one block.
XZ_MAX_BLOCK = 16 << 20

BIG_BLOCKS = (
    "{path} has a block of {block} decompressed bytes (over {limit}): each random read would decompress up "
    "to that much (xz writes one block for the whole file by default). Recompress it in small blocks, e.g. "
    "xz -dc {path} | xz --block-size=1MiB > blocks.jsonl.xz, or read it as a stream (JSONLStream, "
    "load_dataset(..., streaming=True))."
)


class XzFile(SeekableStreamFile):
    """An xz file read at random offsets, block by block.

    Example:
        >>> import lzma, os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl.xz")
        >>> _ = open(path, "wb").write(lzma.compress(b"[1]\\n[2]\\n"))
        >>> f = XzFile(LocalFile(path))
        >>> f.read(4, 7), f.size
        (b'[2]', 8)
    """

    def __init__(self, source: Any) -> None:
        xz = require("xz", "compress")
        super().__init__(source)
        self._errors = (*SeekableStreamFile._errors, xz.XZError)  # classes pickle by name

    def _decompressor(self, fileobj: Any) -> Any:
        handle = require("xz", "compress").XZFile(fileobj, "r")
        bounds = [*handle.block_boundaries, len(handle)]
        block = max((b - a for a, b in itertools.pairwise(bounds)), default=0)
        if block > XZ_MAX_BLOCK:
            raise DataFileError(
                errno.EINVAL, BIG_BLOCKS.format(path=self.path, block=block, limit=XZ_MAX_BLOCK)
            )
        return handle

    def _open_handle(self, inherited: tuple[threading.Lock, Any] | None) -> Any:
        handle = super()._open_handle(inherited)
        if handle is not None:
            self._size = len(handle)  # the xz index says it: no pass needed
        return handle
