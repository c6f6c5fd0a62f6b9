"""Corpus manifests: what a reopen of many files needs — each member's identity and record count — in one
verified file, so that a reopen costs one ``stat`` a file and no index is opened until its file is read.

A :class:`~sjsonl.JSONLDataset` of :data:`MANIFEST_MIN_FILES` or more local files keeps one manifest in the
private cache (``$XDG_CACHE_HOME/sjsonl/corpora/``), named by a hash of the list of paths (and of the working
directory, when a path is relative) and of ``field=``. It is a sidecar container
(:mod:`sjsonl.storage.sidecar`: magic ``SJSONLcm``, CRC-32, key digest, trusted only when owned by this user
in a directory no one else can write) whose body is one int64 row per member: size, mtime and ctime in
nanoseconds, device, inode — the member's ``stat`` when it was indexed — and its record count.

A member is taken from the manifest only when its ``stat`` now is the row's, field for field; any other
member (new, grown, rewritten, replaced, unreadable) is opened as before, its index found, extended or
built, and the manifest written again. A member taken from the manifest is opened at its first read, its
index checked then as every index is, and its record count compared with the manifest's: a file that
changed in between — within the clock tick of its times, say — raises
:class:`~sjsonl.errors.StaleDataError` there, never a record counted from another version.

Remote files and zip members have no manifest: a ``stat`` of them is a request or a read of the archive's
directory (their datasets open every member, as before).

Example:
    >>> import os, tempfile
    >>> paths = [os.path.join(tempfile.mkdtemp(), "a.jsonl")]
    >>> _ = open(paths[0], "w").write("1\\n2\\n")
    >>> key = manifest_key(paths, None)
    >>> rows = stat_rows(paths)
    >>> write_manifest(key, rows, np.array([2]))
    True
    >>> read_manifest(key, 1)[:, -1].tolist()      # the record counts
    [2]
"""

from __future__ import annotations

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
    "MANIFEST_MAGIC", "MANIFEST_MIN_FILES", "manifest_key", "read_manifest", "stat_rows", "write_manifest"
]  # fmt: skip

MANIFEST_MAGIC = b"SJSONLcm"
#: Datasets of fewer files open every member at once (a manifest would save them little, and fill the cache).
MANIFEST_MIN_FILES = 64
_VERSION = 1
_STAT_COLUMNS = 5  # size, mtime_ns, ctime_ns, device, inode
_MISSING = -1  # a stat row of a path that could not be stat'ed: never equal to a stored row


def manifest_key(paths: Sequence[str | os.PathLike[str]], field: str | None) -> dict[str, Any] | None:
    """What a manifest of ``paths`` read under ``field=`` is valid for, or ``None`` when one cannot serve
    them (a URL or a zip member among them)."""
    texts = [os.fspath(p) for p in paths]
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


def stat_rows(paths: Sequence[str | os.PathLike[str]]) -> np.ndarray:
    """One row a path: size, mtime_ns, ctime_ns, device, inode of the file it names now (symlinks followed;
    all ``-1`` where it cannot be stat'ed)."""
    rows = np.full((len(paths), _STAT_COLUMNS), _MISSING, dtype=np.int64)
    stats = []
    for p in paths:
        try:
            st = os.stat(p)
        except (OSError, ValueError):
            stats.append((_MISSING,) * _STAT_COLUMNS)
            continue
        stats.append((st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_dev, st.st_ino))
    if stats:
        rows[:] = stats
    return rows


def read_manifest(key: dict[str, Any], members: int) -> np.ndarray | None:
    """The verified rows of the manifest under ``key`` (``members`` × 6: the stat row and the record count),
    or ``None``: none saved, saved for other paths, or failing a check (then ignored with one
    :class:`~sjsonl.errors.ArtifactWarning`)."""

    def check(body: memoryview) -> np.ndarray:
        if len(body) != members * (_STAT_COLUMNS + 1) * 8:
            raise ValueError(f"it holds {len(body)} bytes, not {members} members' rows")
        rows = np.frombuffer(body, dtype="<i8").reshape(members, _STAT_COLUMNS + 1)
        if members and int(rows[:, -1].min()) < 0:
            raise ValueError("it holds a negative record count")
        return rows

    found = read_sidecar(_manifest_path(key), MANIFEST_MAGIC, key, check)
    return None if found is None else np.array(found, dtype=np.int64)


def write_manifest(key: dict[str, Any], stat: np.ndarray, counts: np.ndarray) -> bool:
    """Save the manifest of members with these ``stat`` rows and record ``counts``; ``False`` where the
    cache cannot be written (the next open then opens every member, as without one). Not fsynced: a
    manifest torn by a crash of the system fails its CRC-32 and is rebuilt."""
    rows = np.column_stack([stat, counts]).astype("<i8")
    path = _manifest_path(key)
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    except OSError:
        return False
    with write_batch():
        return write_sidecar(path, MANIFEST_MAGIC, key, np.ascontiguousarray(rows))
