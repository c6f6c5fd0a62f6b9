"""``appends="trust"``: a file that grew is taken for an append after a few reads, not a hash of every byte.

By default (``appends="verify"``) an index is extended over a file that grew only when every indexed byte
still has its content hash (:mod:`.append`): for a 100 GB file a producer appends to while a job trains,
each reopen or ``refresh()`` reads the 100 GB again. A producer that only ever appends can say so, and
the check becomes O(1): the indexed bytes are *trusted* to be unchanged when

- the file is the one indexed, grown in place: the same device and inode, larger, its mtime and ctime
  not earlier than when it was indexed (a replaced file, one cut back, or one whose times went back
  is checked the default way — every byte hashed);
- the head and tail of the indexed bytes (64 KiB each, the stamp's fingerprint) are unchanged;
- the leaf that holds the end of the indexed bytes, every leaf from the last record's start on (the
  scan reads them anyway) and :data:`SAMPLED_LEAVES` sampled leaves (:func:`checked_leaves`: a function
  of the index version, so each append samples others) still have the digests they had — 2 MiB leaves of
  the content hash (:mod:`sjsonl.storage.content`), kept beside the index as ``<stem>.index.leaves``.

Work per reopen is then those few leaves, a scan of the bytes appended, and the index written: O(appended
bytes) + O(1) for a plain index (extended in place); a compact one is also copied into its new file (its
whole blocks as they are, about 1.1-1.6 bytes a record: no decode, no encode but of its last block). A
writer still appending while the refresh scans makes only the leaves that scan read be hashed again. (A
new process checks the index file itself once, as every open does: a CRC-32 over its offsets.) The leaf
digests are a verified artifact like any
other (:mod:`sjsonl.storage.sidecar`: checksummed, owner/mode rules, bound to the data version by the
content hash they must add up to); written only under ``appends="trust"``, when the index is built or
extended (an index built without it is extended the default way once, which writes them).

**What it cannot catch**: an edit in place of indexed bytes outside what is re-read (not the first or
last 64 KiB, not the last record's leaves, not a sampled leaf), made while the file grew or before it
grew. The index is then extended as if the file were only appended to, and records over the edited bytes
are read as the file holds them now — changed values, or, if the edit moved line ends, records cut in
the wrong places (a read that does not parse raises; one that parses is returned). The index then
records a content hash the bytes no longer have: a later default open finds the edit only when the file
grew again (an open that sees no change hashes nothing, in either mode). Nothing else is lost:
truncation, a rewritten tail, a replaced file, a file that kept its size but changed, and an append that
continues a last line without a line ending are all caught as by default.

Example:
    >>> import os, shutil, tempfile
    >>> from sjsonl.storage import DataStamp
    >>> where = tempfile.mkdtemp()
    >>> index = os.path.join(where, "d.index.npy")
    >>> leaves = [leaf_digest(b"[1]\\n[22]\\n")]
    >>> stamp = DataStamp(9, 1, "ab", content=content_of(leaves, 9))
    >>> save_leaves(index, stamp, leaves)
    True
    >>> load_leaves(index, stamp) == leaves, load_leaves(index, DataStamp(9, 1, "ab"))
    (True, None)
    >>> shutil.rmtree(where)
"""

from __future__ import annotations

import numpy as np
import xxhash

from sjsonl.errors import InvalidArgumentError
from sjsonl.index.layout import artifact_path
from sjsonl.storage import DataStamp, LocalFile
from sjsonl.storage.atomic import write_batch
from sjsonl.storage.content import LEAF_BYTES, content_of, leaf_digest
from sjsonl.storage.sidecar import read_sidecar, write_sidecar

#: What ``appends=`` accepts: every indexed byte hashed again when a file grew (the default), or trusted.
APPENDS = ("verify", "trust")
#: Leaves sampled at each trusted reopen, besides the last one: 2 MiB each.
SAMPLED_LEAVES = 2
LEAVES_MAGIC = b"SJSONLlv"
LEAVES_SUFFIX = ".leaves"


def check_appends(appends: str) -> str:
    """``appends`` if it is one of :data:`APPENDS`, else an :class:`~sjsonl.errors.InvalidArgumentError`.

    Example:
        >>> check_appends("trust")
        'trust'
    """
    if appends not in APPENDS:
        raise InvalidArgumentError(f"appends must be 'verify' or 'trust', not {appends!r}")
    return appends


def leaves_path(index_path: str) -> str:
    """Where the leaf digests of the data behind ``index_path`` (either format) are kept.

    Example:
        >>> leaves_path("/d/t.index.npy"), leaves_path("/d/t.index.packed")
        ('/d/t.index.leaves', '/d/t.index.leaves')
    """
    return artifact_path(index_path, LEAVES_SUFFIX)


def _key(stamp: DataStamp) -> dict[str, object]:
    return {"version": 1, "size": stamp.size, "content": stamp.content, "leaf_bytes": LEAF_BYTES}


def save_leaves(index_path: str, stamp: DataStamp, leaves: list[int]) -> bool:
    """Keep ``leaves`` (the content hash's leaf digests of the bytes ``stamp`` describes) beside the index;
    ``False`` where the place takes no file (a trusted reopen then hashes every byte, as by default)."""
    if not stamp.content or stamp.stored_size is not None:
        return False
    body = np.array(leaves, dtype="<u8")
    with write_batch():  # not fsynced: torn by a crash, it fails its checks and every byte is hashed
        return write_sidecar(leaves_path(index_path), LEAVES_MAGIC, _key(stamp), body)


def load_leaves(index_path: str, stamp: DataStamp) -> list[int] | None:
    """The leaf digests kept beside ``index_path`` for the data ``stamp`` describes — only when they add
    up to its content hash — else ``None``."""
    if not stamp.content:
        return None

    def check(body: memoryview) -> list[int]:
        if len(body) % 8:
            raise ValueError("its length is not a whole number of digests")
        leaves = np.frombuffer(body, dtype="<u8").tolist()
        if content_of(leaves, stamp.size) != stamp.content:  # (a wrong count raises ValueError too)
            raise ValueError("its digests do not add up to the content hash of the data indexed")
        return leaves

    found: list[int] | None = read_sidecar(leaves_path(index_path), LEAVES_MAGIC, _key(stamp), check)
    return found


def checked_leaves(stamp: DataStamp, count: int = SAMPLED_LEAVES) -> list[int]:
    """The leaves of the indexed bytes a trusted reopen hashes again: the last one, and ``count`` others
    drawn from the index version's content hash (the same for one version; another after each append).

    Example:
        >>> from sjsonl.storage import DataStamp
        >>> checked_leaves(DataStamp(5 * LEAF_BYTES + 1, 1, "ab", content="0" * 32))[0]
        5
        >>> len(set(checked_leaves(DataStamp(5 * LEAF_BYTES + 1, 1, "ab", content="0" * 32))))
        3
    """
    leaves = -(-stamp.size // LEAF_BYTES)
    if not leaves:
        return []
    seed = xxhash.xxh3_64_intdigest(stamp.content.encode())
    others = np.random.default_rng(seed).permutation(leaves - 1)[:count]
    return [leaves - 1, *sorted(int(k) for k in others)]


def trusted_leaves(storage: LocalFile, stamp: DataStamp, index_path: str) -> list[int] | None:
    """The leaf digests of the bytes ``stamp`` describes, taken on trust for a local file that looks
    appended to (the checks in the module docstring) — ``None`` when it does not look so or the
    digests are not kept: the caller then checks every byte."""
    if stamp.stored_size is not None or stamp.etag or not stamp.content or not stamp.file_id:
        return None
    now = storage.stamp(fingerprint=False)
    in_place = now.file_id == stamp.file_id and now.size > stamp.size
    if not (in_place and now.mtime_ns >= stamp.mtime_ns and now.ctime_ns >= stamp.ctime_ns):
        return None  # replaced, cut back, or its clock set back: not the shape of an append
    if storage.fingerprint(stamp.size) != stamp.fingerprint:
        return None
    leaves = load_leaves(index_path, stamp)
    if leaves is None:
        return None
    read = storage.read_unchecked
    for k in checked_leaves(stamp):
        lo = k * LEAF_BYTES
        if leaf_digest(read(lo, min(stamp.size, lo + LEAF_BYTES))) != leaves[k]:
            return None
    return leaves
