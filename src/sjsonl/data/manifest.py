"""Corpus manifests: what a reopen of many files needs — each member's identity and record count, and the
offsets of its small files — in one verified file, so that a reopen costs one ``stat`` a file and no file is
opened until it is read.

A :class:`~sjsonl.JSONLDataset` of :data:`MANIFEST_MIN_FILES` or more local files keeps one manifest in the
private cache (``$XDG_CACHE_HOME/sjsonl/corpora/``), named by a hash of the list of paths (and of the working
directory, when a path is relative) and of ``field=``. It is a sidecar container
(:mod:`sjsonl.storage.sidecar`: magic ``SJSONLcm``, CRC-32, key digest, trusted only when owned by this user
in a directory no one else can write) whose body is one int64 row per member — size, mtime and ctime in
nanoseconds, device, inode (the member's ``stat`` when it was indexed), its record count, and for a small
JSON Lines file (:data:`~sjsonl.index.adopted.SMALL_FILE_BYTES`) the CRC-32 of its bytes and where its
offsets start in the uint32 offsets that follow the rows (``-1`` both for a file with an index file of its
own).

A member is taken from the manifest only when its ``stat`` now is the row's, field for field; any other
member (new, grown, rewritten, replaced, unreadable) is scanned or opened as before, and the manifest
written again. A member taken from the manifest is opened at its first read — its index file found and
checked then, or its offsets adopted after the CRC-32 of its bytes matched
(:func:`~sjsonl.index.adopted.adopt_offsets`) — and its record count and ``stat`` compared with the
manifest's: a file that changed in between raises :class:`~sjsonl.errors.StaleDataError` there, never a
record counted or located in another version.

Remote files and zip members have no manifest: a ``stat`` of them is a request or a read of the archive's
directory (their datasets open every member, as before).

Example:
    >>> import os, tempfile
    >>> paths = [os.path.join(tempfile.mkdtemp(), "a.jsonl")]
    >>> _ = open(paths[0], "w").write("1\\n2\\n")
    >>> key = manifest_key(paths, None)
    >>> rows = new_rows(stat_rows(paths))
    >>> rows[0, COUNT] = 2
    >>> write_manifest(key, rows, np.zeros(0, dtype=np.uint32))
    True
    >>> read_manifest(key, 1)[0][:, COUNT].tolist()      # the record counts
    [2]
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from sjsonl.storage import is_url
from sjsonl.storage.atomic import write_batch
from sjsonl.storage.base import MEMBER_SEP
from sjsonl.storage.sidecar import read_sidecar, write_sidecar
from sjsonl.storage.trust import private_cache_root

__all__ = [
    "COUNT", "CRC", "MANIFEST_MAGIC", "MANIFEST_MIN_FILES", "NEVER", "START", "STAT", "forget_manifest",
    "manifest_key", "new_rows", "read_manifest", "same_stat", "stat_row", "stat_rows", "write_manifest",
]  # fmt: skip

MANIFEST_MAGIC = b"SJSONLcm"
#: Datasets of fewer files open every member at once (a manifest would save them little, and fill the cache).
MANIFEST_MIN_FILES = 64
_VERSION = 2
STAT = slice(0, 5)  #: a row's stat: size, mtime_ns, ctime_ns, device, inode
COUNT, CRC, START = 5, 6, 7  #: a row's record count, and a small file's CRC-32 and first offset (or -1)
_COLUMNS = 8
_MISSING = -1  # a stat row of a path that could not be stat'ed
NEVER = -2  #: a stored stat field no file's stat equals: the row is read again at the next open


def manifest_key(texts: Sequence[str], field: str | None) -> dict[str, Any] | None:
    """What a manifest of the files at paths ``texts`` read under ``field=`` is valid for, or ``None`` when
    one cannot serve them (a URL or a zip member among them). Its ``"cwd"`` is set when a path is not
    absolute."""
    joined = "\0".join(texts)
    if MEMBER_SEP in joined or any(is_url(t) for t in texts if ":" in t):
        return None
    relative = any(not t.startswith(os.sep) for t in texts)
    digest = hashlib.sha256(joined.encode("utf-8", "surrogateescape")).hexdigest()
    return {
        "version": _VERSION,
        "paths": digest,
        "count": len(texts),
        "cwd": os.getcwd() if relative else "",
        "field": field,
    }


def _manifest_path(key: dict[str, Any]) -> str:
    name = hashlib.sha256(repr(sorted(key.items())).encode("utf-8", "surrogateescape")).hexdigest()[:40]
    return os.path.join(private_cache_root(), "corpora", f"{name}.manifest")


def stat_row(path: str | os.PathLike[str]) -> tuple[int, ...]:
    """Size, mtime_ns, ctime_ns, device, inode of the file ``path`` (absolute, or relative to the working
    directory; no ``~``) names now — symlinks followed; all ``-1`` where it cannot be stat'ed."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return (_MISSING,) * STAT.stop
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_dev, st.st_ino)


def same_stat(path: str | os.PathLike[str], row: np.ndarray) -> bool:
    """Whether the file ``path`` names now has the stat ``row`` (a manifest row's :data:`STAT` fields)."""
    return stat_row(path) == tuple(row.tolist())


def stat_rows(paths: Sequence[str | os.PathLike[str]]) -> np.ndarray:
    """:func:`stat_row` of each path, as an int64 array."""
    rows = np.full((len(paths), STAT.stop), _MISSING, dtype=np.int64)
    found: list[tuple[int, ...]] = []
    missing = (_MISSING,) * STAT.stop
    for p in paths:  # (stat_row inlined: this loop is most of a reopen of many files)
        try:
            st = os.stat(p)
        except (OSError, ValueError):
            found.append(missing)
            continue
        found.append((st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_dev, st.st_ino))
    if found:
        rows[:] = found
    return rows


def new_rows(stat: np.ndarray) -> np.ndarray:
    """Manifest rows for members with these ``stat`` rows: no records counted, no offsets kept yet."""
    rows = np.full((len(stat), _COLUMNS), -1, dtype=np.int64)
    rows[:, STAT] = stat
    rows[:, COUNT] = 0
    return rows


def read_manifest(key: dict[str, Any], members: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The verified rows (``members`` × 8) and small files' offsets of the manifest under ``key``, or
    ``None``: none saved, saved for other paths, or failing a check (then ignored with one
    :class:`~sjsonl.errors.ArtifactWarning`)."""

    def check(body: memoryview) -> tuple[np.ndarray, np.ndarray]:
        head = members * _COLUMNS * 8
        if len(body) < head or (len(body) - head) % 4:
            raise ValueError(f"it holds {len(body)} bytes, which are not {members} members' rows and offsets")
        rows = np.frombuffer(body, dtype="<i8", count=members * _COLUMNS).reshape(members, _COLUMNS)
        offsets = np.frombuffer(body, dtype="<u4", offset=head)
        counts, kept = rows[:, COUNT], np.flatnonzero(rows[:, START] >= 0)
        if members and int(counts.min()) < 0:
            raise ValueError("it holds a negative record count")
        starts, kept_counts = rows[kept, START], counts[kept]
        if len(kept) and (int(starts.max()) > len(offsets) or int(kept_counts.max()) > len(offsets)):
            raise ValueError("a member's offsets run past the offsets it holds")
        if len(kept) and int((starts + kept_counts).max()) > len(offsets):
            raise ValueError("a member's offsets run past the offsets it holds")
        _check_offsets(rows[kept], offsets)
        return rows.copy(), offsets.copy()

    return read_sidecar(_manifest_path(key), MANIFEST_MAGIC, key, check)  # type: ignore[no-any-return]


def _check_offsets(kept: np.ndarray, offsets: np.ndarray) -> None:
    """The checks an index file's offsets pass (:mod:`sjsonl.index.store`), for each small file's offsets in
    the manifest: strictly increasing, and inside the file's size."""
    counts = kept[:, COUNT]
    take = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    own = offsets[np.repeat(kept[:, START], counts) + take].astype(np.int64)
    if len(own) and bool((own >= np.repeat(kept[:, 0], counts)).any()):
        raise ValueError("a member's offsets point past the end of its file")
    firsts = take == 0  # a file's first offset follows the last file's: no order between them
    if len(own) > 1 and bool((np.diff(own) <= 0)[~firsts[1:]].any()):
        raise ValueError("a member's offsets do not increase")


def forget_manifest(key: dict[str, Any]) -> None:
    """Remove the manifest under ``key`` (one whose row no longer describes its file: the next open reads
    every member again)."""
    with contextlib.suppress(OSError):
        os.unlink(_manifest_path(key))


def write_manifest(key: dict[str, Any], rows: np.ndarray, offsets: np.ndarray) -> bool:
    """Save the manifest of members with these ``rows`` (see :func:`new_rows`) and small files' ``offsets``;
    ``False`` where the cache cannot be written (the next open then scans or opens every member, as
    without one). Not fsynced: a manifest torn by a crash of the system fails its CRC-32 and is rebuilt."""
    path = _manifest_path(key)
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    except OSError:
        return False
    with write_batch():
        return write_sidecar(
            path, MANIFEST_MAGIC, key, np.ascontiguousarray(rows, "<i8"), np.ascontiguousarray(offsets, "<u4")
        )
