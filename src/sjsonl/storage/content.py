"""The content hash of a file's bytes: what an index is checked against when a file's status changed
but its size and mtime did not (``os.utime`` can set those back; nothing can set back the bytes).

The bytes ``[0, size)`` are cut into leaves of :data:`LEAF_BYTES` at fixed offsets; each leaf is hashed
with xxh3-64 and the hash of the file is xxh3-128 over the size and the leaf digests. Fixed leaves let the
index build hash each chunk while it is still in the cache from the newline scan (a chunk is a leaf), and
let an append reuse the digests of the leaves it does not touch.

Example:
    >>> from sjsonl.storage import MemoryFile
    >>> data = MemoryFile(b'{"a": 1}\\n')
    >>> digests = leaf_digests(data.read, 0, data.size)
    >>> content_of(digests, data.size) == content_hash(data.read, data.size)
    True
    >>> content_hash(data.read, 8) == content_hash(data.read, 9)   # a prefix is another content
    False
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import xxhash

#: Bytes per leaf: the index build's read chunk (``sjsonl.index.scan.FILE_CHUNK_BYTES``).
LEAF_BYTES = 2 << 20

Read = Callable[[int, int], bytes]


def leaf_digest(data: bytes | memoryview) -> int:
    """The digest of one leaf's bytes.

    Example:
        >>> leaf_digest(b"x") == leaf_digest(memoryview(b"x"))
        True
    """
    return xxhash.xxh3_64_intdigest(data)


def leaf_digests(read: Read, first_leaf: int, size: int, threads: int = 1) -> list[int]:
    """Digests of leaves ``first_leaf, …`` of ``[0, size)`` (the last may be short), read with ``read`` —
    on up to ``threads`` threads (``read`` must allow it): ``pread`` and xxh3 release the GIL, and two
    threads hash a page-cached GiB in about 60% of the time one takes. The pool lives for this call only.

    Example:
        >>> len(leaf_digests(lambda lo, hi: bytes(hi - lo), 0, LEAF_BYTES + 1))
        2
        >>> leaf_digests(lambda lo, hi: bytes(hi - lo), 0, 5 * LEAF_BYTES, threads=2) == leaf_digests(
        ...     lambda lo, hi: bytes(hi - lo), 0, 5 * LEAF_BYTES)
        True
    """
    starts = range(first_leaf * LEAF_BYTES, size, LEAF_BYTES)

    def one(lo: int) -> int:
        return leaf_digest(read(lo, min(size, lo + LEAF_BYTES)))

    if threads <= 1 or len(starts) < 2 * threads:
        return [one(lo) for lo in starts]
    with ThreadPoolExecutor(threads, thread_name_prefix="sjsonl-hash") as pool:
        return list(pool.map(one, starts))


def content_of(digests: Sequence[int], size: int) -> str:
    """The content hash from all of ``[0, size)``'s leaf digests, in order.

    Example:
        >>> content_of([], 0) == content_hash(lambda lo, hi: b"", 0)
        True
    """
    expected = -(-size // LEAF_BYTES)
    if len(digests) != expected:
        raise ValueError(f"{len(digests)} leaf digests for {size} bytes (expected {expected})")
    h = xxhash.xxh3_128(size.to_bytes(8, "little"))
    for d in digests:
        h.update(d.to_bytes(8, "little"))
    return h.hexdigest()


def content_hash(read: Read, size: int) -> str:
    """The content hash of ``[0, size)``, read leaf by leaf with ``read(lo, hi)``.

    Example:
        >>> content_hash(lambda lo, hi: b"ab"[lo:hi], 2) != content_hash(lambda lo, hi: b"ba"[lo:hi], 2)
        True
    """
    return content_of(leaf_digests(read, 0, size), size)
