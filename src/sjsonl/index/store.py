"""Index files on disk: where they live, how they are written, and how a reader knows it may use one.

The index of ``data.jsonl`` is ``data.index.npy`` beside it: ONE file that ``np.load`` reads as a plain
1-D array of record start offsets, followed by a trailer ``np.load`` ignores — the metadata (the data's
size, mtime and head/tail fingerprint, the record count, the dtype, a CRC-32 of the offsets) as JSON, its
length and a magic tag. Offsets and metadata are one unit, written with one atomic ``os.replace``: a reader
can never pair offsets of one version with metadata of another. (The index of a file that only grew is
extended in place instead, :mod:`sjsonl.index.append`: the new offsets, then the trailer, then the header,
so a reader that opens it part way through finds counts and a CRC-32 that disagree, and rebuilds.)

A reader verifies before use (:func:`read_index`): the trailer parses; the array header is a 1-D
little-endian unsigned array of exactly the recorded length, and header + array + trailer is exactly the
file's size (an empty, truncated or padded file fails); the CRC-32 matches; offsets strictly increase and
stay inside the data. Anything else is an :class:`~sjsonl.errors.IndexFileError` that names the index file
— the layer above rebuilds it. The O(records) part (CRC and order, ~3 ms per million records) runs once per
index file per process: a file with the same identity (device, inode, size, mtime, ctime) is not checked
again.

Where: beside the data by default; in ``index_dir=`` / ``$SJSONL_INDEX_DIR`` when given; in the private
cache directory (``~/.cache/sjsonl/index``, mode 0700) when the data's directory is read-only or other
users can write there (see :mod:`sjsonl.storage.trust`), under a name keyed by the data file's absolute path.
An index directory asked for that cannot be written (read-only, a full disk) sends the index to the cache
too, saying so (:class:`~sjsonl.errors.IndexPlaceWarning`): the user chose that place.
A remote file's index always lives in the cache, keyed by its URL: sjsonl never writes to remote storage.

A compact index (:mod:`.packed`, ``data.index.packed``, about 1–1.6 bytes a record) may stand in
the plain one's place, with the same trailer, guarantees and checks; :func:`read_index` reads either.

Compressed files keep their whole name: ``data.jsonl.gz`` → ``data.jsonl.gz.index.npy``, so it never
shares an index name with a ``data.jsonl`` beside it. A gzip file's seek points go beside its index as
``data.jsonl.gz.index.seekpoints``.

Names and the format's constants live in :mod:`sjsonl.index.layout`: any file name maps to an index name
that fits (see :func:`~sjsonl.index.layout.default_index_path`: a name too long to take the suffixes is cut
and hashed) and that no other data file's maps to. Artifacts are told from data by
their bytes, not their names (:func:`is_index_artifact`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import warnings
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

import numpy as np

from sjsonl.errors import IndexNotSavedWarning, IndexPlaceWarning, SJSONLError, one_line
from sjsonl.index.layout import (
    _MAX_META,
    _TAIL,
    FORMAT_VERSION,
    LEGACY_META_SUFFIX,
    PACKED_MAGIC,
    TRAILER_MAGIC,
    IndexFile,
    IndexMeta,
    UntrustedIndexError,
    _fail,
    candidate_index_paths,
    index_dir_from_env,
)
from sjsonl.index.packed import open_packed, packed_index_path, verify_packed, write_packed
from sjsonl.storage import DataStamp, map_readonly
from sjsonl.storage.atomic import _atomic_write, _temp_tag  # noqa: F401  (_temp_tag: tests read temp names)
from sjsonl.storage.local import open_regular_file
from sjsonl.storage.trust import untrusted_reason

#: Index files verified in this process, by identity: the O(records) checks run once per file.
_VERIFIED: set[tuple[int, ...]] = set()


def read_index(index_path: str, *, trust_check: bool = True, verify: bool = True) -> IndexFile:
    """Open, parse and verify an index file — plain ``.npy`` or compact (:mod:`.packed`, told apart by
    the file's first bytes); map its offsets (read-only, O(1) memory). ``verify=False``
    leaves out the O(records) checks (CRC-32, order, bounds) unless this process already made them: the
    caller runs them before the first use of an offset (a dataset of many files checks each on first use).

    Raises ``FileNotFoundError`` when there is none, :class:`UntrustedIndexError` when other users could
    have written it, and :class:`~sjsonl.errors.IndexFileError` naming the file for anything malformed.

    Example:
        >>> import os, tempfile, numpy as np
        >>> from sjsonl.storage import DataStamp
        >>> path = os.path.join(tempfile.mkdtemp(), "d.index.npy")
        >>> offsets = np.array([0, 4], dtype=np.uint8)
        >>> _ = write_index(path, offsets, meta_of(offsets, DataStamp(8, 1, "ab"), "/d.jsonl"))
        >>> found = read_index(path)
        >>> found.offsets.tolist(), found.meta.records, np.load(path).tolist()   # np.load still reads it
        ([0, 4], 2, [0, 4])
        >>> _ = open(path, "r+b").truncate(100)                                  # a torn copy
        >>> read_index(path)
        Traceback (most recent call last):
        ...
        sjsonl.errors.IndexFileError: index file ... is not a complete sjsonl index (no trailer): cut short...
    """
    fd, st = _open_index(index_path, trust_check)
    try:
        identity = _identity(st)
        meta, trailer_len = _read_trailer(fd, st.st_size, index_path)
        if os.pread(fd, 8, 0) == PACKED_MAGIC:
            offsets: Any = open_packed(fd, st.st_size, meta, trailer_len, index_path)
            check: Callable[[Any, IndexMeta, str], None] = verify_packed
        else:
            header_len = _read_npy_header(fd, st.st_size, meta, index_path)
            mm = map_readonly(fd, st.st_size)  # the array keeps it alive; no fd needed after
            offsets = _offsets_view(mm, meta, header_len, index_path)
            if st.st_size != header_len + offsets.nbytes + trailer_len:
                raise _fail(index_path, "has a size that does not match its header and trailer")
            check = _verify
    finally:
        os.close(fd)
    verified = identity in _VERIFIED
    if verify and not verified:
        check(offsets, meta, index_path)
        _VERIFIED.add(identity)
        verified = True
    return IndexFile(offsets, meta, index_path, identity, verified)


def _identity(st: os.stat_result) -> tuple[int, ...]:
    """What names one version of an index file in :data:`_VERIFIED`: device, inode, size and times."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def remember_verified(index_path: str, written: os.stat_result) -> None:
    """Count the index file at ``index_path`` as verified in this process if it is still the one this
    process wrote from offsets it scanned (``written``: its status when written — the same device,
    inode, size and mtime): checking it again would only compare those offsets with themselves. Any
    later change to the file changes its identity, and it is checked again."""
    try:
        st = os.stat(index_path)
    except OSError:
        return
    if (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) == (
        written.st_dev, written.st_ino, written.st_size, written.st_mtime_ns,
    ):  # fmt: skip
        _VERIFIED.add(_identity(st))


def _open_index(index_path: str, trust_check: bool) -> tuple[int, os.stat_result]:
    """(fd, status) of an index file that is there, regular, and trusted (unless ``trust_check`` is off)."""
    try:
        fd, st = open_regular_file(index_path)
    except SJSONLError as exc:
        if isinstance(exc, OSError) and exc.errno == errno.ENOENT:
            raise FileNotFoundError(errno.ENOENT, "no index file", index_path) from None
        raise _fail(index_path, f"cannot be used: {exc}") from None
    if trust_check:
        reason = untrusted_reason(os.path.dirname(index_path), st)
        if reason is not None:
            os.close(fd)
            raise UntrustedIndexError(f"index file {index_path} is not trusted: {reason}")
    return fd, st


def check_by_reads(index_path: str) -> None:
    """:func:`read_index`'s O(records) checks of a plain index, made by reading it in chunks instead of
    through a memory map — for a thread that checks while others may rewrite the file in place (a map
    would fault; a read comes back short, and the file is refused). The index is then known verified to
    :func:`read_index` in this process, by identity (device, inode, size, times). A compact index is
    left to :func:`read_index`, on first use.

    Example:
        >>> import os, tempfile, numpy as np
        >>> from sjsonl.storage import DataStamp
        >>> path = os.path.join(tempfile.mkdtemp(), "d.index.npy")
        >>> offsets = np.array([0, 4], dtype=np.uint8)
        >>> _ = write_index(path, offsets, meta_of(offsets, DataStamp(8, 1, "ab"), "/d.jsonl"))
        >>> check_by_reads(path); read_index(path, verify=False).verified
        True
    """
    fd, st = _open_index(index_path, True)
    try:
        identity = _identity(st)
        if identity in _VERIFIED or os.pread(fd, 8, 0) == PACKED_MAGIC:
            return
        meta, trailer_len = _read_trailer(fd, st.st_size, index_path)
        header_len = _read_npy_header(fd, st.st_size, meta, index_path)
        dtype = np.dtype(meta.dtype)
        if st.st_size != header_len + meta.records * dtype.itemsize + trailer_len:
            raise _fail(index_path, "has a size that does not match its header and trailer")
        step = (16 << 20) // dtype.itemsize

        def chunks() -> Iterator[np.ndarray]:
            for first in range(0, meta.records, step):
                count = min(step, meta.records - first)
                data = os.pread(fd, count * dtype.itemsize, header_len + first * dtype.itemsize)
                if len(data) != count * dtype.itemsize:
                    raise _fail(index_path, "changed while it was checked (cut short)")
                yield np.frombuffer(data, dtype=dtype)

        _verify_chunks(chunks(), meta, index_path)
    finally:
        os.close(fd)
    _VERIFIED.add(identity)


def _read_trailer(fd: int, size: int, path: str) -> tuple[IndexMeta, int]:
    """(metadata, trailer length) from the file's end: the same trailer for either format. Every field is
    checked to be one sjsonl writes, so later steps never meet a value they cannot handle."""
    if size < _TAIL.size:
        raise _fail(path, "is not a complete sjsonl index (no trailer): empty or cut short")
    meta_len, magic = _TAIL.unpack(os.pread(fd, _TAIL.size, size - _TAIL.size))
    if magic != TRAILER_MAGIC:
        raise _fail(path, "is not a complete sjsonl index (no trailer): cut short, or an older format")
    if meta_len > min(_MAX_META, size - _TAIL.size):
        raise _fail(path, "has a trailer of impossible length")
    raw = os.pread(fd, meta_len, size - _TAIL.size - meta_len)
    try:
        meta = IndexMeta.from_json(raw)
    except (ValueError, KeyError, TypeError, RecursionError, AttributeError) as exc:
        raise _fail(path, f"has malformed metadata: {one_line(str(exc))[:200]}") from None
    if meta.version != FORMAT_VERSION:
        raise _fail(path, f"is in another format version ({meta.version})")
    if meta.dtype not in _OFFSET_DTYPES or not 0 <= meta.checksum < 1 << 32:
        raise _fail(path, "has malformed metadata (offset type or checksum)")
    return meta, meta_len + _TAIL.size


#: The offset types an index holds (what sjsonl.index.scan.offset_dtype chooses).
_OFFSET_DTYPES = ("uint8", "uint16", "uint32", "uint64")
#: The only array header sjsonl writes (np.save of a 1-D little-endian unsigned array): matched exactly,
#: not evaluated, so a damaged one is refused as such (numpy's own parser raises whatever it meets).
_NPY_HEADER = re.compile(
    rb"\{'descr': '(<u[248]|\|u1)', 'fortran_order': False, 'shape': \(([1-9][0-9]*|0),\), \} *\n"
)


def _read_npy_header(fd: int, size: int, meta: IndexMeta, path: str) -> int:
    """The length of a plain index's ``.npy`` header, checked against its metadata."""
    head = os.pread(fd, min(size, 65536 + 16), 0)
    version = head[6:8]
    if not head.startswith(b"\x93NUMPY") or version not in (b"\x01\x00", b"\x02\x00", b"\x03\x00"):
        raise _fail(path, "has no valid .npy header")
    start = 10 if version == b"\x01\x00" else 12
    if len(head) < start:
        raise _fail(path, "has no valid .npy header (cut short)")
    end = start + int.from_bytes(head[8:start], "little")
    found = _NPY_HEADER.fullmatch(head[start:end]) if end <= len(head) and end % 16 == 0 else None
    if found is None:
        raise _fail(path, "has no valid .npy header (not the one sjsonl writes)")
    descr, shape = found.groups()
    if int(shape) != meta.records or np.dtype(descr.decode()) != np.dtype(meta.dtype):
        raise _fail(path, "does not match its metadata (shape or dtype)")
    return end


def _offsets_view(mm: Any, meta: IndexMeta, header_len: int, path: str) -> np.ndarray:
    dtype = np.dtype(meta.dtype)  # one of _OFFSET_DTYPES (checked with the trailer)
    if len(mm) < header_len + meta.records * dtype.itemsize:
        raise _fail(path, "is shorter than its header says")
    # a plain ndarray over the map (np.memmap's Python-level __getitem__ is slow on the hot path)
    return np.frombuffer(mm, dtype=dtype, count=meta.records, offset=header_len)


def _verify(offsets: np.ndarray, meta: IndexMeta, path: str) -> None:
    """The O(records) checks: the CRC-32 of the offsets, strict order, and bounds in the data."""
    _verify_chunks([offsets], meta, path)


def _verify_chunks(chunks: Iterable[np.ndarray], meta: IndexMeta, path: str) -> None:
    """:func:`_verify` over the offsets in consecutive chunks (the whole map, or reads of the file)."""
    crc, increasing, last = 0, True, None
    for chunk in chunks:
        # ndarray.data is memoryview(chunk); numpy's stubs type ndarray as a Buffer only on Python >= 3.12
        crc = zlib.crc32(chunk.data.cast("B"), crc)
        if increasing and len(chunk):
            increasing = (last is None or int(chunk[0]) > last) and bool(np.all(chunk[1:] > chunk[:-1]))
            last = int(chunk[-1])
    if crc != meta.checksum:
        raise _fail(path, "is corrupt (its checksum does not match)")
    if not increasing:
        raise _fail(path, "is corrupt (offsets do not increase)")
    if last is not None and meta.stamp.size >= 0 and last >= meta.stamp.size:
        raise _fail(path, "points past the end of its data")


def meta_of(
    offsets: np.ndarray,
    stamp: DataStamp,
    data_path: str,
    layout: str = "",
    *,
    crc_of: tuple[int, int] = (0, 0),
) -> IndexMeta:
    """The metadata to write with ``offsets`` (record count, dtype, CRC-32) for data ``stamp``; ``layout``
    says what they start ("": lines; see :mod:`sjsonl.index.elements`). ``crc_of=(k, crc)``: ``crc`` is
    already the CRC-32 of the first ``k`` offsets (an extended index), so only the rest is hashed."""
    known, checksum = crc_of
    checksum = zlib.crc32(np.ascontiguousarray(offsets[known:]).data.cast("B"), checksum)
    return IndexMeta(stamp, len(offsets), str(offsets.dtype), data_path, checksum, layout=layout)


def write_index(
    index_path: str, offsets: np.ndarray, meta: IndexMeta, *, compact: bool = False, known: bool = False
) -> str:
    """Write ``offsets`` and ``meta`` as one index file, atomically. Returns ``index_path``.

    ``compact``: in the compact format (:func:`~sjsonl.index.packed.write_packed_index`), not ``.npy``.
    ``known``: the offsets were found by this process's scan and ``meta`` made from them
    (:func:`meta_of`), so the file counts as verified here (:func:`remember_verified`).
    A format-1 metadata file beside it (``*.index.meta.json``, which other tools took for data) is
    removed."""
    if compact:
        status = write_packed(index_path, offsets, meta)
        if known:
            remember_verified(index_path, status)
        return index_path
    directory = os.path.dirname(index_path) or "."
    os.makedirs(directory, exist_ok=True)
    blob = meta.to_json()
    written: list[os.stat_result] = []

    def write(f: IO[bytes]) -> None:
        np.save(f, np.ascontiguousarray(offsets), allow_pickle=False)
        f.write(blob)
        f.write(_TAIL.pack(len(blob), TRAILER_MAGIC))
        f.flush()
        written.append(os.fstat(f.fileno()))

    _atomic_write(index_path, write)
    if known:
        remember_verified(index_path, written[0])
    legacy = (index_path[:-4] if index_path.endswith(".npy") else index_path) + LEGACY_META_SUFFIX
    with contextlib.suppress(OSError):
        os.unlink(legacy)
    return index_path


#: Errors that say "not here" (read-only, a full disk or quota, a file size limit): the next place is tried.
_CANNOT_WRITE = (errno.EPERM, errno.EACCES, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def write_index_somewhere(
    data_path: str,
    offsets: np.ndarray,
    meta: IndexMeta,
    index_dir: str | None,
    *,
    compact: bool = False,
    known: bool = False,
) -> str:
    """Write to the first trusted place that takes it (see :func:`candidate_index_paths`); the private
    cache, created with mode 0700, is the last resort. ``compact``: as ``<stem>.index.packed``; the
    index in the other format at the same place, if any, is removed (one index per place). ``known`` as
    for :func:`write_index`."""
    places = candidate_index_paths(data_path, index_dir)
    asked = index_dir_from_env(index_dir)
    refused: OSError | None = None  # why the directory asked for did not take it
    for k, path in enumerate(places):
        other = packed_index_path(path)
        target, other = (other, path) if compact else (path, other)
        try:
            if path == places[-1]:
                os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            written = write_index(target, offsets, meta, compact=compact, known=known)
            with contextlib.suppress(OSError):
                os.unlink(other)
            if refused is not None and asked is not None:
                warn_place_refused(data_path, asked, refused, written)
            return written
        except OSError as exc:
            if exc.errno not in _CANNOT_WRITE or k == len(places) - 1:
                raise
            if k == 0 and os.path.dirname(path) == asked:  # (an untrusted one is not among the places)
                refused = exc
    raise AssertionError("unreachable")


def warn_place_refused(data_path: str, asked: str, exc: OSError, written: str) -> None:
    """Say (once per directory and process) that the index directory asked for could not be written, why,
    and where the index of ``data_path`` went instead."""
    if asked in _PLACE_REFUSED:
        return
    _PLACE_REFUSED.add(asked)
    why = exc.strerror or str(exc)
    where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
    warnings.warn(
        one_line(
            f"could not write the index of {data_path} to the index directory asked for, {asked} (index_dir= "
            f"or $SJSONL_INDEX_DIR): {why}{where}; it went to the private cache instead: {written} (said "
            "once for this directory: other indexes that cannot be written there go to the cache too)"
        ),
        IndexPlaceWarning,
        stacklevel=5,
    )


_PLACE_REFUSED: set[str] = set()


def warn_not_saved(data_path: str, exc: OSError) -> None:
    """Say (once per data file and process) that its index is kept in memory only, and why."""
    if data_path in _NOT_SAVED:
        return
    _NOT_SAVED.add(data_path)
    why = one_line(exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)
    where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
    warnings.warn(
        f"could not save the index of {data_path}: {why}{where}; it is kept in memory for this process",
        IndexNotSavedWarning,
        stacklevel=5,
    )


_NOT_SAVED: set[str] = set()


def write_seek_state(path: str, blob: bytes) -> str:
    """Write a storage's seek state atomically (see :func:`seek_state_path`). Returns ``path``.

    Example:
        >>> import os, tempfile
        >>> path = write_seek_state(os.path.join(tempfile.mkdtemp(), "d.index.seekpoints"), b"points")
        >>> open(path, "rb").read()
        b'points'
    """
    _atomic_write(path, lambda f: f.write(blob))
    return path
