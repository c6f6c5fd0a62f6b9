"""Incremental append: a data file that only grew gets its new bytes scanned and its index extended.

JSON Lines corpora grow by appending (logs, crawls, synthetic data). When the index on disk is stale only
because its file was appended to — a plain local file, larger now, whose indexed bytes are unchanged (the
content hash of :mod:`sjsonl.storage.content`, recorded when it was indexed: every indexed byte is read
again, at memory speed, so an edit anywhere plus an append — mtime set back or not — is a rebuild, never an
extension) — the scan starts at the last indexed record (which may have been cut short when indexed, and is
read again) and the index is extended with the new offsets. Work is a hash of the indexed bytes plus a scan
of the bytes appended — or, for a producer that only appends (``appends="trust"``, :mod:`.leaves`), a few
leaves hashed again instead of all of them. (A compact index, :mod:`.packed`, is rewritten atomically,
in its format: its whole blocks copied as they are, its last block encoded again with the new offsets —
a copy of a file a quarter of the plain index's size or less, no decode.) A file rewritten,
truncated or replaced is rebuilt from scratch by the caller; so are compressed and remote files, and
JSON documents (their records are not lines).

Example:
    >>> import os, tempfile
    >>> from sjsonl.storage import LocalFile
    >>> from sjsonl.index.build import build_offsets, save_index
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "wb").write(b'{"a": 1}\\n{"a": 2}\\n')
    >>> offsets, stamp = build_offsets(LocalFile(path))
    >>> index = save_index(LocalFile(path), offsets, stamp)
    >>> _ = open(path, "ab").write(b'{"a": 3}\\n')
    >>> extend_grown_index(LocalFile(path)).offsets.tolist()
    [0, 9, 18]
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import io
import json
import os
import time
import zlib
from collections.abc import Callable
from dataclasses import replace
from typing import Any, NamedTuple

import numpy as np

from sjsonl.errors import IndexFileError, SJSONLError, StaleDataError
from sjsonl.index.layout import _TAIL, TRAILER_MAGIC, IndexFile, IndexMeta, LoadedIndex
from sjsonl.index.leaves import save_leaves, trusted_leaves
from sjsonl.index.packed import NATIVE, PackedOffsets, index_names, write_packed_blocks
from sjsonl.index.packed_codec import encode_appended
from sjsonl.index.scan import DataChangedWhileScanning, default_workers, offset_dtype, scan_file
from sjsonl.index.store import (
    meta_of,
    read_index,
    remember_verified,
    warn_not_saved,
    write_index,
    write_index_somewhere,
)
from sjsonl.runtime.progress import Progress
from sjsonl.storage import DataStamp, LocalFile, Storage
from sjsonl.storage.atomic import syncing, write_batch
from sjsonl.storage.base import FINGERPRINT_SPAN
from sjsonl.storage.content import LEAF_BYTES, content_of, leaf_digest, leaf_digests
from sjsonl.storage.trust import read_only_reason

#: Appended bytes up to which one thread scans (starting scan threads costs more than they save).
_ONE_THREAD_BYTES = 64 << 20


def _grew_from(storage: LocalFile, stamp: DataStamp, workers: int | None = None) -> list[int] | None:
    """The leaf digests of the indexed bytes if ``storage`` is the data ``stamp`` describes with bytes
    appended — a plain local file, larger now, whose first ``stamp.size`` bytes still have the content
    hash they had (every byte is read: an edit anywhere in them, mtime set back or not, is a rebuild) —
    else ``None``."""
    if stamp.stored_size is not None or stamp.etag or not stamp.content:
        return None
    now = storage.stamp(fingerprint=False)
    if now.size <= stamp.size or storage.fingerprint(stamp.size) != stamp.fingerprint:
        return None  # the cheap test first: most rewrites change the head or the tail
    threads = workers or default_workers()  # (the hash is what an append costs: every indexed byte)
    leaves = leaf_digests(storage.read_unchecked, 0, stamp.size, threads=threads)
    return leaves if content_of(leaves, stamp.size) == stamp.content else None


def _after_last_newline(read: Callable[[int, int], bytes], size: int) -> int:
    """Where the last complete line of ``[0, size)`` ends (0 if there is none)."""
    hi = size
    while hi > 0:
        lo = max(0, hi - (64 << 10))
        at = read(lo, hi).rfind(b"\n")
        if at >= 0:
            return lo + at + 1
        hi = lo
    return 0


class Settled(NamedTuple):
    """What a scan of a local file's lines settled on: the offsets, the stamp of the bytes they index, and
    the content hash's leaf digests of those bytes."""

    offsets: np.ndarray
    stamp: DataStamp
    leaves: list[int]


def complete_lines(
    storage: LocalFile,
    offsets: np.ndarray,
    size: int,
    digests: dict[int, int],
    *,
    grew: bool,
    recheck_from: int = 0,
) -> Settled | None:
    """(offsets, stamp, leaf digests) for the scan of ``[0, size)`` of a local file that was just made:
    ``digests`` are its content-hash leaf digests as scanned (by leaf number). Only complete lines are
    kept when a writer is at work: the file ``grew`` during the scan (the bytes scanned are then hashed
    again, to prove no one rewrote them meanwhile), or its last line has no line ending, is not valid
    JSON yet and the file was written in the last :data:`WRITER_SECONDS` — a line being written. That
    line and the rest show on a later open or ``refresh()``. (The one place the index layer parses
    JSON: a single line, to tell a last line being written from a finished file that lacks a final
    newline.) ``None`` when the bytes scanned were rewritten (the caller scans again). ``recheck_from``:
    the first leaf hashed again when the file grew (those before it the caller took on trust:
    ``appends="trust"``, where a writer at work must not make each refresh a read of the whole file)."""
    read = storage.read_unchecked
    scanned = [digests[k] for k in range(len(digests))]
    if grew and (
        storage.stamp(fingerprint=False).size < size
        or leaf_digests(read, recheck_from, size) != scanned[recheck_from:]
    ):
        return None
    cut = _after_last_newline(read, size)
    if cut < size and not grew and not _being_written(storage, read(cut, size)):
        cut = size  # a finished last line without a line ending: a record
    # (a scalar of the offsets' own dtype: with a Python int numpy would copy them all to int64 first)
    offsets = offsets[: int(np.searchsorted(offsets, offsets.dtype.type(cut)))]
    full = cut // LEAF_BYTES
    if cut == size:  # the scan's last chunk ended here: its digest is the last leaf's
        leaves = scanned
    else:
        leaves = scanned[:full] + ([leaf_digest(read(full * LEAF_BYTES, cut))] if cut % LEAF_BYTES else [])
    now = storage.stamp(fingerprint=False)
    fingerprint = storage.fingerprint(cut)
    # the stamp takes the head/tail hash as the file is now, the content hash as scanned: the leaves
    # holding that head and tail must still hash as scanned (a writer that only appends leaves them so; a
    # file rewritten since the scan — bigger, so it looks grown — would give the index a stamp that
    # accepts other bytes)
    for k in sorted({0, max(0, cut - FINGERPRINT_SPAN) // LEAF_BYTES, max(0, cut - 1) // LEAF_BYTES}):
        if (
            k < len(scanned)
            and leaf_digest(read(k * LEAF_BYTES, min((k + 1) * LEAF_BYTES, size))) != scanned[k]
        ):
            return None
    stamp = replace(now, size=cut, fingerprint=fingerprint, content=content_of(leaves, cut))
    return Settled(offsets, stamp, leaves)


#: A file modified this recently whose last line is unterminated and not valid JSON is being written.
WRITER_SECONDS = 2.0


def _being_written(storage: LocalFile, last_line: bytes) -> bool:
    if not last_line.strip():
        return False  # trailing blanks: no record either way
    if time.time_ns() - storage.stat().st_mtime_ns > WRITER_SECONDS * 1e9:
        return False
    try:
        json.loads(last_line.decode("utf-8"))  # (json, not orjson: NaN and 1e400 are finished records too)
    except ValueError:
        return True  # half a record (or a bad last line in a file just written: shown once it settles)
    return False


def extend_grown_index(
    storage: Storage,
    *,
    index_dir: str | None = None,
    index_path: str | None = None,
    workers: int | None = None,
    progress: bool | None = None,
    appends: str = "verify",
) -> LoadedIndex | None:
    """The index of ``storage`` extended over the bytes appended since it was built, written over the old
    one; ``None`` when no index on disk describes a prefix of the data as it is now. ``appends="trust"``:
    the bytes indexed before are checked as :mod:`.leaves` says (where they can be), not all hashed."""

    if not isinstance(storage, LocalFile):  # compressed, archived, remote: rebuilt by the caller
        return None
    if index_path:
        paths = [os.path.abspath(os.path.expanduser(index_path))]
    else:  # each place's plain index, then its compact one
        paths = index_names(storage.path, index_dir)
    for path in paths:
        try:
            old = read_index(path)
        except (FileNotFoundError, IndexFileError):
            continue
        meta = old.meta
        if meta.layout or os.path.basename(meta.data_path) != os.path.basename(storage.path):
            continue
        kept = trusted_leaves(storage, meta.stamp, path) if appends == "trust" else None
        trusted = kept is not None
        if kept is None:
            kept = _grew_from(storage, meta.stamp, workers)
        if kept is None:
            continue
        grown = _scan_appended(storage, old.offsets, kept, meta.stamp.size, workers, progress, trusted)
        if grown is None:
            return None
        # an append-only producer's refreshes are frequent and cheap: their index writes are not fsynced
        # (write_batch's rule: a crash of the whole system may leave the index torn, then it is rebuilt)
        with write_batch() if appends == "trust" else contextlib.nullcontext():
            found = _save_extended(storage.path, old, grown, index_dir, index_path)
            if appends == "trust" and found.path:
                save_leaves(found.path, grown.stamp, grown.leaves)
        return found
    return None


class Grown(NamedTuple):
    """A grown file's index: the first ``keep`` old offsets, then ``new``; the stamp of the bytes they
    index and the content hash's leaf digests of those bytes."""

    keep: int
    new: np.ndarray
    stamp: DataStamp
    leaves: list[int]


def _save_extended(
    data_path: str, old: IndexFile, grown: Grown, index_dir: str | None, index_path: str | None
) -> LoadedIndex:
    """Write the extended index: where every old offset is kept in their type, the new ones are added to
    the old file itself (a plain index; :func:`_extend_in_place`) or after its kept blocks (a compact
    one, rewritten atomically: :func:`_append_packed`), and served from that file — work and memory
    proportional to what was appended, the old offsets neither copied nor checked again. Else the
    whole index is written again, in its format."""
    meta, new, compact = old.meta, grown.new, isinstance(old.offsets, PackedOffsets)
    records = grown.keep + len(new)
    if grown.keep == len(old.offsets) and new.dtype == np.dtype(meta.dtype):
        crc = zlib.crc32(np.ascontiguousarray(new).data.cast("B"), meta.checksum)  # (meta_of's CRC)
        new_meta = IndexMeta(grown.stamp, records, meta.dtype, data_path, crc)
        add = _append_packed if compact else _extend_in_place
        if add(old, new, new_meta):
            found = read_index(old.path)  # the file this process just wrote: not checked again
            if (found.meta.stamp, found.meta.records, found.meta.checksum) == (grown.stamp, records, crc):
                return LoadedIndex(found.offsets, grown.stamp, old.path, crc, "", origin="extended")
    offsets = np.concatenate([np.asarray(old.offsets[: grown.keep]).astype(new.dtype, copy=False), new])
    new_meta = meta_of(offsets, grown.stamp, data_path)
    written = _write_extended(data_path, old.path, offsets, new_meta, compact, index_dir, index_path)
    served = read_index(written).offsets if compact and written else offsets  # compact: from its map
    return LoadedIndex(served, grown.stamp, written, new_meta.checksum, "", origin="extended")


def _append_packed(old: IndexFile, new: np.ndarray, meta: IndexMeta) -> bool:
    """A compact index with ``new`` offsets after its own, written over it atomically: its whole blocks
    are copied as they are and only its last block, if not full, is encoded again with the new offsets
    (:func:`~sjsonl.index.packed_codec.encode_appended`). False (nothing written) where the old file
    cannot be replaced: the caller writes the index elsewhere."""
    packed = old.offsets
    kept, tail, kept_bytes, stream = encode_appended(
        packed.headers, packed.packed, len(packed), packed.log2_block, new, NATIVE
    )
    headers, bits = [packed.headers[:kept], tail], [packed.packed[:kept_bytes], stream]
    try:
        status = write_packed_blocks(old.path, headers, bits, meta.records, packed.log2_block, meta)
    except OSError:
        return False
    remember_verified(old.path, status)
    return True


def _write_extended(
    data_path: str,
    path: str,
    offsets: np.ndarray,
    meta: IndexMeta,
    compact: bool,
    index_dir: str | None,
    index_path: str | None,
) -> str | None:
    """Write the extended index over the old one, else in the next place that takes it (a read-only place,
    a full disk), else keep it in memory with a warning: an open never fails for want of a place."""
    try:
        return write_index(path, offsets, meta, compact=compact, known=True)
    except OSError as exc:
        failure = exc
    if not index_path:
        try:
            return write_index_somewhere(data_path, offsets, meta, index_dir, compact=compact, known=True)
        except OSError as exc:
            failure = exc
    warn_not_saved(data_path, failure)
    return None


def _scan_appended(
    storage: LocalFile,
    old: Any,
    old_leaves: list[int],
    old_size: int,
    workers: int | None,
    progress: bool | None,
    trusted: bool = False,
) -> Grown | None:
    """The old offsets kept, the starts after the last old record, the stamp of the bytes scanned and
    their leaf digests; None when the last old record no longer starts one, or the whole leaves scanned
    again before the old end no longer have their digests (the caller rebuilds). ``old_leaves``: the
    content-hash leaf digests of the ``old_size`` bytes indexed before (checked by the caller, all of
    them or, ``trusted``, as :mod:`.leaves` says), reused for the leaves not scanned."""
    # Rescan from the last indexed record: it may have been cut short (no final newline) when indexed.
    # Scanning from the newline before it finds it again (its bytes were verified: it still starts a
    # record), and nothing before it changes.
    last = int(old[-1]) if len(old) else 0
    # From the start of the leaf that holds it, so the chunks scanned are content-hash leaves, hashed as
    # they are scanned (the old records found again before `last` are dropped)
    start = (max(last - 1, 0) // LEAF_BYTES) * LEAF_BYTES
    keep = start // LEAF_BYTES
    for _attempt in range(3):
        before = storage.stamp(fingerprint=False)
        storage.pin(before)  # a change during the scan (beyond growth) fails the reads: scan again
        bar = Progress(before.size - start, f"indexing the end of {os.path.basename(storage.path)}", progress)
        # a small tail is scanned faster than scan threads start
        small = before.size - start <= _ONE_THREAD_BYTES
        digests = dict(enumerate(old_leaves[:keep]))
        try:
            with storage.holding() as fd:
                tail = scan_file(
                    fd, before.size, workers=1 if small else workers, on_progress=bar.update, start=start,
                    digests=digests,
                )  # fmt: skip
        except (DataChangedWhileScanning, StaleDataError):
            continue
        finally:
            bar.close()
        tail = tail[int(np.searchsorted(tail, last)) :]
        if len(old) and (not len(tail) or int(tail[0]) != last):
            return None  # e.g. a cut-short BOM completed: the start of the data reads differently now
        if any(digests[k] != old_leaves[k] for k in range(keep, old_size // LEAF_BYTES)):
            return None  # the last record's bytes were rewritten (a whole leaf of them hashes differently)
        new = tail[1 if len(old) else 0 :].astype(offset_dtype(before.size))  # past 4 GiB: uint64
        after = storage.stamp(fingerprint=False)
        if before.describe_change(after, content=False) is not None and after.size <= before.size:
            continue  # rewritten in place meanwhile: scan again
        grew = after.size > before.size
        settled = complete_lines(
            storage, new, before.size, digests, grew=grew, recheck_from=keep if trusted else 0
        )
        if settled is not None:
            storage.pin(settled.stamp)
            # the last old record, cut short when indexed, is left out again when it is still being written
            records = len(old) - 1 if len(old) and settled.stamp.size <= last else len(old)
            return Grown(records, settled.offsets, settled.stamp, settled.leaves)
    raise SJSONLError(f"data file keeps changing while it is indexed: {storage.path}")


def _npy_header(records: int, dtype: np.dtype) -> bytes:
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        out, {"descr": dtype.str, "fortran_order": False, "shape": (records,)}
    )
    return out.getvalue()


def _extend_in_place(old: IndexFile, new_offsets: np.ndarray, meta: IndexMeta) -> bool:
    """Write ``new_offsets`` after the old ones in the old index file itself, then the new trailer, then
    the array header naming the new count — I/O proportional to what was appended, not to the records.
    False (nothing written) when the file changed since it was read or the header would change length.

    Not one atomic replace, but a reader that opens the file part way through sees a header, a count
    and a CRC-32 that disagree (:func:`~sjsonl.index.store.read_index` refuses it, and the index is
    rebuilt), and a crash leaves such a file too; processes that mapped the old index read only the old
    offsets, which stay where they were. Writers take an exclusive ``flock`` on the file."""
    header = _npy_header(meta.records, np.dtype(meta.dtype))
    old_header = _npy_header(old.meta.records, np.dtype(meta.dtype))
    if len(header) != len(old_header):  # a count with more digits crossed the header's padding
        return False
    if read_only_reason(old.path) is not None:
        return False  # (the caller's atomic write refuses it too, and the index goes elsewhere)
    try:
        fd = os.open(old.path, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns) != old.identity:
            return False  # rewritten or extended by another process since it was read
        if os.pread(fd, len(old_header), 0) != old_header:  # not the header np.save writes
            return False
        body_end = len(header) + old.offsets.nbytes
        old_trailer = os.pread(fd, st.st_size - body_end, body_end)
        blob = meta.to_json()
        tail = np.ascontiguousarray(new_offsets).tobytes() + blob + _TAIL.pack(len(blob), TRAILER_MAGIC)
        try:
            _pwrite_all(fd, tail, body_end)
            os.ftruncate(fd, body_end + len(tail))
            if syncing():
                os.fsync(fd)  # the offsets and trailer are durable before the header names them
        except OSError:  # a full disk, a file size limit: put the old index back as it was
            _restore(fd, old.path, old_trailer, body_end)
            return False
        _pwrite_all(fd, header, 0)  # the header is never longer than what it overwrites: it cannot fail short
        if syncing():
            os.fsync(fd)
        remember_verified(old.path, os.fstat(fd))
        return True
    finally:
        os.close(fd)


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    """``pwrite`` all of ``data``, or raise: a short write (a full disk) is an error, never ignored."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        if written <= 0:
            raise OSError(errno.ENOSPC, "short write")
        view, offset = view[written:], offset + written
    view.release()


def _restore(fd: int, path: str, old_trailer: bytes, body_end: int) -> None:
    """Undo a failed extension: the old trailer where it was, the file cut back to its old size (neither
    needs new space). If even that fails, the index file is removed: never a torn index left behind."""
    try:
        _pwrite_all(fd, old_trailer, body_end)
        os.ftruncate(fd, body_end + len(old_trailer))
        os.fsync(fd)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(path)
