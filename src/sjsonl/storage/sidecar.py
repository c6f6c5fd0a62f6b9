"""Files kept beside an index (bad lines, schema, token lengths, seek points): one container, trusted only as
far as it is verified.

What sjsonl reads besides the data decides what a record is as much as the index does, so every such file is
held to the index's rules. Each is one container::

    offset  bytes
    0       8      magic: b"SJSONL" + two letters naming the kind (ARTIFACT_MAGICS below)
    8       4      container version (1), little-endian uint32, as every number here
    12      4      zero
    16      8      body length B
    24      4      CRC-32 of the whole file, these four bytes counted as zero
    28      4      zero
    32      32     SHA-256 of the key: canonical JSON (sorted keys) of what the body is valid for — the data
                   version (its stamp) and the index it extends (its CRC-32)
    64      B      the body, in the kind's own format (an int64 array there is aligned: read in place)

A reader (:func:`read_sidecar`) uses a file only when: it is a regular file owned by this user (or root) and
writable by no one else, in a directory with the same rule (:func:`~sjsonl.storage.trust.untrusted_reason`,
the index's rule); magic, version, lengths and size agree and the CRC-32 matches; the key's digest is the one
expected; and the kind's own range checks pass (the ``check`` it is given: record numbers inside the index,
seek points inside the data and consistent with the index's line starts, a schema that fits sampled records).
Missing, or valid for another data version or index (stale: the index was rebuilt), it is quietly
recomputed. Anything else is ignored and recomputed with one :class:`ArtifactWarning` per file version per
process (the index itself too, :mod:`sjsonl.index.build`) — never used, never a traceback. Writes are atomic;
one that cannot be made (a read-only place) only means recomputing next time.

The magics, so a file sjsonl wrote is known by its bytes whatever its name: every sidecar and a compact index
*start* with one of :data:`ARTIFACT_MAGICS`; a plain index is a ``.npy`` (``np.load`` reads it) that *ends*
with :data:`INDEX_TRAILER_MAGIC`.

================  =============  ==============================================  =======================
magic             kind           constant (in the module that owns the format)   file
================  =============  ==============================================  =======================
``SJSONLpk`` (1)  compact index  ``sjsonl.index.store.PACKED_MAGIC``              ``<stem>.index.packed``
``SJSONLix`` (2)  plain index    ``sjsonl.index.store.TRAILER_MAGIC``             ``<stem>.index.npy``
``SJSONLbl``      bad lines      ``sjsonl.records.badlines.BADLINES_MAGIC``               ``.index.badlines``
``SJSONLsc``      schema         ``sjsonl.records.schema.SCHEMA_MAGIC``                   ``.index.schema``
``SJSONLtl``      token lengths  ``sjsonl.data.packing.lengths.TOKENS_MAGIC``    ``.index.tokens``
``SJSONLgz``      gzip points    ``sjsonl.storage.seekpoints.GZIP_SEEK_MAGIC``    ``.index.seekpoints``
``SJSONLbz``      bzip2 blocks   ``sjsonl.storage.seekpoints.BZIP2_SEEK_MAGIC``   ``.index.seekpoints``
``SJSONLlv``      leaf digests   ``sjsonl.index.leaves.LEAVES_MAGIC``             ``.index.leaves``
``SJSONLcm``      corpus         ``sjsonl.data.manifest.MANIFEST_MAGIC``          ``corpora/*.manifest`` (3)
================  =============  ==============================================  =======================

(1) the first 8 bytes, as for every sidecar; (2) the *last* 8 bytes; (3) in the private cache, not beside the
data: one a dataset of many files (:mod:`sjsonl.data.manifest`). A temp file of an atomic write
(``<final name>.<host>-<pid>.<random>.tmp``) holds the same bytes once written.

Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "d.index.thing")
    >>> write_sidecar(path, b"SJSONLxx", {"v": 1}, b"body")
    True
    >>> bytes(read_sidecar(path, b"SJSONLxx", {"v": 1})), read_sidecar(path, b"SJSONLxx", {"v": 2})
    (b'body', None)
"""

from __future__ import annotations

import hashlib
import os
import stat
import struct
import warnings
import zlib
from collections.abc import Callable
from typing import Any, NamedTuple

import orjson

from sjsonl.errors import ArtifactWarning as ArtifactWarning

#: The first 8 bytes of every file sjsonl writes beside data, except the plain index (see the table above).
ARTIFACT_MAGICS = (
    b"SJSONLpk", b"SJSONLbl", b"SJSONLsc", b"SJSONLtl", b"SJSONLgz", b"SJSONLbz", b"SJSONLlv", b"SJSONLcm"
)  # fmt: skip
#: The last 8 bytes of a plain ``.npy`` index (whose first bytes are numpy's ``b"\\x93NUMPY"``).
INDEX_TRAILER_MAGIC = b"SJSONLix"

CONTAINER_VERSION = 1
_HEAD = struct.Struct("<8sIIQII32s")  # magic, version, zero, body length, CRC-32, zero, key digest
# What the sidecars of earlier versions started with: stale, not corrupt (recomputed without a warning).
_LEGACY_HEADS = (b'{"key"', b"sjsonl-seekpoints", b"sjsonl-blockpoints")

#: bytes, bytearray, memoryview, a contiguous numpy array: anything the buffer protocol exposes
Buffer = Any


class Sidecar(NamedTuple):
    """A verified sidecar: what the kind's check made of its body, and the file's identity (device,
    inode, size, mtime, ctime) when it was read."""

    value: Any
    identity: tuple[int, ...]


def index_key(f: Any, version: int, *, skipped: bool = True) -> dict[str, Any]:
    """The identity of ``f``'s index (an :class:`~sjsonl.data.source.IndexedFile`) that a sidecar is bound to:
    the data version, what the offsets start (lines, or a JSON document's elements under one field), their
    count and checksum, and (``skipped``) the records left out as bad lines — their count and CRC-32."""
    key = {
        "version": version,
        "stamp": f.stamp.to_dict(),
        "records": int(f.n),
        "checksum": f.checksum,
        "layout": f.layout,
    }
    if skipped:
        bad = f.bad_records
        key["skipped"] = len(bad)
        key["skipped_crc"] = zlib.crc32(bad.astype("<i8").tobytes()) if len(bad) else 0
    return key


def _key_digest(key: Any) -> bytes:
    return hashlib.sha256(orjson.dumps(key, option=orjson.OPT_SORT_KEYS)).digest()


def encode_sidecar(magic: bytes, key: Any, *body: Buffer) -> list[Buffer]:
    """The container around ``body`` (its parts, in order), as buffers to write one after the other.

    Example:
        >>> b"".join(encode_sidecar(b"SJSONLxx", {}, b"abc"))[:8]
        b'SJSONLxx'
    """
    if len(magic) != 8 or not magic.startswith(b"SJSONL"):
        raise ValueError(f"a sidecar magic is 8 bytes starting with b'SJSONL', not {magic!r}")
    digest = _key_digest(key)
    views = [memoryview(part).cast("B") for part in body]
    body_len = sum(len(v) for v in views)
    crc = zlib.crc32(_HEAD.pack(magic, CONTAINER_VERSION, 0, body_len, 0, 0, digest))
    for v in views:
        crc = zlib.crc32(v, crc)
    return [_HEAD.pack(magic, CONTAINER_VERSION, 0, body_len, crc, 0, digest), *views]


def write_sidecar(path: str, magic: bytes, key: Any, *body: Buffer) -> bool:
    """Save ``body`` under ``key`` at ``path`` atomically; ``False`` where the place is not writable (it
    is then recomputed next time)."""
    from sjsonl.storage.atomic import (
        _atomic_write,  # (the index package imports the storage layer, which imports us)
    )

    parts = encode_sidecar(magic, key, *body)
    try:
        _atomic_write(path, lambda fh: [fh.write(p) for p in parts])
    except OSError:
        return False
    return True


_WARNED: set[tuple[str, Any]] = set()


def warn_ignored(path: str, why: str, version: Any = None) -> None:
    """One :class:`ArtifactWarning` for ``path`` (per ``version`` of it, per process): ignored, recomputed."""
    if (path, version) in _WARNED:
        return
    _WARNED.add((path, version))
    warnings.warn(f"ignoring {path}: {why}; what it held is recomputed", ArtifactWarning, stacklevel=3)


def read_sidecar(path: str, magic: bytes, key: Any, check: Callable[[memoryview], Any] | None = None) -> Any:
    """The body saved at ``path`` under ``key`` (a memoryview), or what ``check`` makes of it; ``None``
    when there is no such file, it holds another key, or it fails any check (see the module docstring).

    ``check(body)`` range-checks the body against what it describes and returns the value to use; it
    raises ``ValueError`` (its message says why) to have the file ignored."""
    found = open_sidecar(path, magic, key, check)
    return None if found is None else found.value


def open_sidecar(
    path: str, magic: bytes, key: Any, check: Callable[[memoryview], Any] | None = None
) -> Sidecar | None:
    """:func:`read_sidecar` with the file's identity, for a caller that reopens it later and wants to know
    whether it is still the file it verified."""
    from sjsonl.storage.trust import untrusted_reason  # (see write_sidecar)

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:  # a symlink (O_NOFOLLOW), no permission: not ours to trust
        warn_ignored(path, f"it cannot be opened as a regular file ({exc.strerror})")
        return None
    try:
        st = os.fstat(fd)
        identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        if not stat.S_ISREG(st.st_mode):
            warn_ignored(path, "it is not a regular file")
            return None
        reason = untrusted_reason(os.path.dirname(os.path.abspath(path)), st)
        if reason is not None:
            warn_ignored(path, f"it is not trusted: {reason}", identity)
            return None
        blob = _read_all(fd, st.st_size)
    finally:
        os.close(fd)
    try:
        body = _unseal(blob, magic, key)
        if body is None:
            return None  # another key (stale) or an older format: recomputed quietly
        return Sidecar(body if check is None else check(body), identity)
    except (ValueError, TypeError, KeyError, IndexError, OverflowError, RecursionError, zlib.error) as exc:
        warn_ignored(path, str(exc)[:300] or type(exc).__name__, zlib.crc32(blob))
        return None


def _read_all(fd: int, size: int) -> memoryview:
    buf = bytearray(size)
    view = memoryview(buf)
    done = 0
    while done < size:
        got = os.preadv(fd, [view[done:]], done)
        if got == 0:  # shrank while read: what is there is torn, and fails the checks below
            return view[:done]
        done += got
    return view


def _unseal(blob: memoryview, magic: bytes, key: Any) -> memoryview | None:
    """The body of a container, ``None`` for another key or a legacy file; ``ValueError`` if damaged."""
    if bytes(blob[:20]).startswith(_LEGACY_HEADS):
        return None
    if len(blob) < _HEAD.size:
        raise ValueError(f"it is cut short ({len(blob)} bytes, no complete header)")
    got_magic, version, zero, body_len, crc, zero2, digest = _HEAD.unpack_from(blob)
    if got_magic != magic:
        raise ValueError(f"it starts with {got_magic!r}, not {magic!r}")
    if version != CONTAINER_VERSION:
        raise ValueError(f"it is in an unknown container version ({version})")
    if zero or zero2:
        raise ValueError("its header is corrupt")
    if _HEAD.size + body_len != len(blob):
        raise ValueError("its size does not match its header (cut short or padded)")
    head = _HEAD.pack(got_magic, version, 0, body_len, 0, 0, digest)
    if zlib.crc32(blob[_HEAD.size :], zlib.crc32(head)) != crc:
        raise ValueError("it is corrupt (its checksum does not match)")
    if digest != _key_digest(key):
        return None  # valid, but for another data version or index
    return blob[_HEAD.size :]
