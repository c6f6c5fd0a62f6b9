"""Storage layer: a data file as byte ranges.

One small interface, :class:`Storage` — ``size``, ``read(start, end)`` and, where the bytes can be mapped,
``buffer()`` for zero-copy slicing — with one implementation per kind of data:

- :class:`MappedFile` — a local uncompressed file, read through a memory map whose slices are copied under
  a guard (the fast path; a truncation in place raises instead of SIGBUS);
- :class:`LocalFile` — a local file read with ``pread`` (``mmap=False``; and under the decompressors);
- :class:`~sjsonl.storage.compressed.GzipFile` — ``.gz``, random access through indexed_gzip seek points
  (the index build decompresses with rapidgzip when installed: :mod:`~sjsonl.storage.gzip_build`);
- :class:`~sjsonl.storage.compressed.SeekableZstdFile` — ``.zst`` in the seekable zstd format;
- :class:`~sjsonl.storage.bzip2.Bzip2File` — ``.bz2``, random access by bzip2 blocks (indexed_bzip2);
- :class:`~sjsonl.storage.xz.XzFile` — ``.xz``, random access by xz blocks (python-xz);
- :class:`~sjsonl.storage.zip.ZipMemberFile` — a member of a ``.zip`` (``train.zip::train.jsonl``);
- :class:`~sjsonl.storage.remote.RemoteFile` — any fsspec URL (``s3://…``), read by byte ranges.

:func:`open_storage` picks one from the path; a compressed remote file (``s3://b/x.jsonl.gz``) is a
compressed storage over a remote one. Offsets are always *logical* (decompressed) bytes. Handles that carry
a file position (indexed_gzip and zstd readers, fsspec filesystems) are opened lazily in each process,
dropped on pickling, and reopened when the process id changes, so forked workers never share one.

Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "wb").write(b'{"a": 1}\\n')
    >>> f = open_storage(path)
    >>> type(f).__name__, f.size, f.read(0, 8)
    ('MappedFile', 9, b'{"a": 1}')

Local files are *pinned*: opened once, and read from that open file for the storage's life (see
:mod:`sjsonl.storage.local`), so a file replaced under the same name is never read at the old offsets.
"""

from __future__ import annotations

import errno
import os
from typing import Any

from sjsonl.errors import DataFileError
from sjsonl.storage.base import (
    FINGERPRINT_SPAN,
    DataStamp,
    MemoryFile,
    RangeView,
    Storage,
    byte_view,
    count_newlines,
    has_glob_magic,
    is_url,
    resolve_path,
    stat_data_file,
    suffix_of,
)
from sjsonl.storage.formats import HEAD_BYTES, check_format, format_of_name
from sjsonl.storage.local import GUARDED, LocalFile, MappedFile, map_readonly, open_regular_file
from sjsonl.storage.pinned import PinnedReader
from sjsonl.storage.zip import split_member

GZIP_SUFFIXES = (".gz", ".gzip")
ZSTD_SUFFIXES = (".zst", ".zstd")
BZIP2_SUFFIXES = (".bz2",)
XZ_SUFFIXES = (".xz",)

__all__ = [
    "BZIP2_SUFFIXES",
    "FINGERPRINT_SPAN",
    "GZIP_SUFFIXES",
    "XZ_SUFFIXES",
    "ZSTD_SUFFIXES",
    "DataStamp",
    "LocalFile",
    "MappedFile",
    "MemoryFile",
    "PinnedReader",
    "RangeView",
    "Storage",
    "byte_view",
    "count_newlines",
    "has_glob_magic",
    "is_url",
    "map_readonly",
    "open_regular_file",
    "open_storage",
    "resolve_path",
    "stat_data_file",
]


def open_storage(
    path: str | os.PathLike[str], storage_options: dict[str, Any] | None = None, *, mmap: bool = True
) -> Storage:
    """The storage for ``path``: chosen by its form (URL or local) and its suffix (``.gz``, ``.zst``).

    A local uncompressed file is memory-mapped unless ``mmap=False`` (then read with ``pread``, at about
    twice the cost per short record). Either way a file truncated or rewritten in place raises
    :class:`~sjsonl.errors.StaleDataError`, never SIGBUS: the map's slices are copied under a guard
    (:class:`~sjsonl.storage.local.MappedFile`); without the compiled guard, ``pread`` is used.
    ``storage_options`` go to fsspec for URLs (credentials, ``endpoint_url``, …); local paths ignore them,
    so one dict can serve a list that mixes local and remote files. ``file://`` URLs are local files.

    Example:
        >>> import gzip, os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl.gz")
        >>> _ = open(path, "wb").write(gzip.compress(b'{"a": 1}\\n'))
        >>> f = open_storage(path)
        >>> type(f).__name__, f.read(0, 8)
        ('GzipFile', b'{"a": 1}')
    """
    text = os.fspath(path)
    name = suffix_of(text)
    if not is_url(text) and split_member(text)[1] is not None:  # archive.zip::member
        from sjsonl.storage.zip import open_member

        return open_member(text)
    compressed = name.endswith(GZIP_SUFFIXES + ZSTD_SUFFIXES + BZIP2_SUFFIXES + XZ_SUFFIXES)
    if is_url(text) and not text.startswith("file://"):
        from sjsonl.storage.remote import RemoteFile

        source: Any = RemoteFile(text, storage_options)
    else:
        local = text[len("file://") :] if text.startswith("file://") else text
        mapped = mmap and not compressed and GUARDED is not None  # no guard built: pread, never raw mmap
        source = MappedFile(local) if mapped else LocalFile(local)
    # compressed bytes under a text name (or another codec's suffix) are refused now, by their magic
    # number, rather than failing later as text that does not decode
    # (a pread even for a mapped file: mapping it now would cost each open more than the check)
    head = (
        LocalFile.read(source, 0, HEAD_BYTES) if isinstance(source, LocalFile) else source.read(0, HEAD_BYTES)
    )
    check_format(source.path, name, head)
    if format_of_name(name) == "zip":
        raise DataFileError(
            errno.EISDIR,
            f"{text} is a zip archive: its members are the data ({text}::<member>); JSONLDataset, "
            "JSONLStream and load_dataset read them all",
        )
    if name.endswith(GZIP_SUFFIXES):
        from sjsonl.storage.compressed import GzipFile

        return GzipFile(source)
    if name.endswith(ZSTD_SUFFIXES):
        from sjsonl.storage.compressed import SeekableZstdFile

        return SeekableZstdFile(source)
    if name.endswith(BZIP2_SUFFIXES):
        from sjsonl.storage.bzip2 import Bzip2File

        return Bzip2File(source)
    if name.endswith(XZ_SUFFIXES):
        from sjsonl.storage.xz import XzFile

        return XzFile(source)
    return source
