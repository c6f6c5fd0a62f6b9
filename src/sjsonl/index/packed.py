"""Compact index files: ``<stem>.index.packed``, about 1–1.6 bytes a record instead of 4 or 8, read in
place — memory-mapped, any offset in O(1), nothing decompressed up front.

The plain ``.npy`` index stays the default (and ``np.load`` keeps reading it); a compact one is written
when asked (``JSONLDataset(path, compact=True)``, ``sjsonl index --compact``) or, with ``compact=None``,
when the plain one would be :data:`AUTO_COMPACT_BYTES` or more. The encoding is in :mod:`.packed_codec`.

File layout (little-endian)::

    header   64 bytes   b"SJSONLpk", format version (uint32), log2 of the block size (uint32),
                        records, blocks, residual bytes (uint64 each), zero padding
    blocks   16 bytes a block: base offset, packed (bit position, width, min gap)
    packed   the residual bit stream, 8 zero bytes after it
    trailer  the same as a plain index's: metadata JSON (data stamp, record count, layout, the logical
             dtype of the offsets and the CRC-32 of the offsets in that dtype), its length, b"SJSONLix"

The CRC-32 is that of the *decoded* offsets, exactly what the plain index of the same data records, so
seek points, schema caches and the checks of a copy in another process work the same for both formats.
A reader verifies as for a plain index (:func:`~sjsonl.index.store.read_index` reads either, by the
file's first bytes): sizes at open (O(1)); then block headers consistent, every offset decoded, its
CRC-32, strict order and bounds (O(records), once per file per process, deferrable).

Example:
    >>> import os, tempfile, numpy as np
    >>> from sjsonl.storage import DataStamp
    >>> from sjsonl.index.store import meta_of, read_index
    >>> path = os.path.join(tempfile.mkdtemp(), "d.index.packed")
    >>> offsets = np.array([0, 9, 30, 31], dtype=np.uint32)
    >>> _ = write_packed_index(path, offsets, meta_of(offsets, DataStamp(40, 1, "ab"), "/d.jsonl"))
    >>> found = read_index(path)
    >>> found.offsets[2], found.offsets[1:].tolist(), found.offsets.dtype
    (30, [9, 30, 31], dtype('uint32'))
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from sjsonl.errors import InvalidArgumentError
from sjsonl.index.layout import (
    _TAIL,
    PACKED_MAGIC,
    TRAILER_MAGIC,
    IndexMeta,
    _fail,
    artifact_path,
    iter_candidate_index_paths,
)
from sjsonl.index.packed_codec import MAX_WIDTH, POS_BITS, NumpyView, encode
from sjsonl.storage import map_readonly
from sjsonl.storage.atomic import _atomic_write

PACKED_SUFFIX = ".index.packed"
PACKED_VERSION = 1
#: Records per block, as a power of two: 128 measured best (benchmarks/bench_index_size.py) — 256
#: saves 0.05-0.08 bytes a record and costs twice the extractions on a random read.
DEFAULT_LOG2_BLOCK = 7
#: ``compact=None`` writes a compact index when the plain one would be this large or larger
#: (64 Mi records below 4 GiB of data, 32 Mi above): small indexes stay plain ``.npy``.
AUTO_COMPACT_BYTES = 256 << 20
_HEADER = struct.Struct("<8sIIQQQ")
_HEADER_BYTES = 64


def _native() -> Any:
    """The compiled decoder, unless ``$SJSONL_SCAN=numpy`` asks for numpy (one switch for all of
    sjsonl's compiled code) or it was not built."""
    if os.environ.get("SJSONL_SCAN", "").lower() == "numpy":
        return None
    try:
        from sjsonl.index import _packed  # type: ignore[attr-defined]
    except ImportError:
        return None
    return _packed


#: The compiled decoder in use, or None for numpy; both give the same offsets.
NATIVE = _native()


def packed_index_path(index_path: str) -> str:
    """The compact index's name beside the plain one: ``d/x.index.npy`` → ``d/x.index.packed``.

    Example:
        >>> packed_index_path("/data/train.index.npy")
        '/data/train.index.packed'
    """
    return artifact_path(index_path, ".packed")


def wants_compact(compact: bool | None, records: int, dtype: np.dtype) -> bool:
    """Whether to write a compact index: as asked, or (``None``) when the plain one would be at least
    :data:`AUTO_COMPACT_BYTES`.

    Example:
        >>> wants_compact(None, 1000, np.dtype(np.uint32)), wants_compact(None, 2**26, np.dtype(np.uint32))
        (False, True)
    """
    if compact is not None:
        return bool(compact)
    return records * np.dtype(dtype).itemsize >= AUTO_COMPACT_BYTES


def index_names(data_path: str, index_dir: str | None, compact: bool | None = None) -> list[str]:
    """Every index file name of ``data_path`` to try, place by place: plain, then compact (the reverse
    when ``compact`` is True).

    Example:
        >>> [os.path.basename(p) for p in index_names("/d/t.jsonl", "/tmp/ix")]  # doctest: +ELLIPSIS
        ['t-....index.npy', 't-....index.packed']
    """
    return list(iter_index_names(data_path, index_dir, compact))


def iter_index_names(data_path: str, index_dir: str | None, compact: bool | None = None) -> Iterator[str]:
    """:func:`index_names` one by one, each place made only when the ones before it are passed over
    (:func:`~sjsonl.index.layout.iter_candidate_index_paths`)."""
    for place in iter_candidate_index_paths(data_path, index_dir):
        pair = (place, packed_index_path(place))
        yield from pair[::-1] if compact else pair


def format_on_disk(data_path: str, index_dir: str | None) -> bool | None:
    """True when a compact index file of ``data_path`` is in one of its places (fresh or not), else None:
    a stale or corrupt compact index is rebuilt compact — the format, once chosen, stays."""
    names = index_names(data_path, index_dir)
    return any(p.endswith(".packed") and os.path.exists(p) for p in names) or None


def explicit_is_compact(index_path: str, compact: bool | None) -> bool:
    """The format of an index file named by the caller: its name says (``*.packed`` compact, anything
    else plain — a ``.npy`` is always what ``np.load`` reads); a contradicting ``compact`` is refused."""
    named = index_path.endswith(".packed")
    if compact is not None and bool(compact) != named:
        want = "compact" if compact else "plain"
        raise InvalidArgumentError(
            f"index_path {index_path} names a {'compact' if named else 'plain'} index but compact={compact} "
            f"asks for a {want} one: name a compact index *.index.packed, a plain one *.index.npy"
        )
    return named


class PackedOffsets:
    """The offsets of a compact index, read in place: what :class:`~sjsonl.data.source.IndexedFile` uses as
    ``offsets`` like an array — ``len``, ``o[i]`` (a Python int), ``o[lo:hi]`` and ``o[indices]``
    (decoded numpy arrays of :attr:`dtype`), ``astype``, ``tolist``, ``np.asarray(o)`` — and whose
    :attr:`data` is the object for the hot path (``data[i]`` decoded in C when it was built).

    Example:
        >>> from sjsonl.index.packed_codec import encode
        >>> headers, packed = encode(np.array([0, 5, 11], np.uint64), 7)
        >>> blob = headers.tobytes() + packed.tobytes()
        >>> o = PackedOffsets(blob, 3, 7, 0, headers.nbytes, len(packed), np.dtype(np.uint32))
        >>> len(o), o[-1], o[[2, 0]].tolist(), o.data[1]
        (3, 11, [11, 0], 5)
    """

    is_compact = True

    def __init__(
        self, buf: Any, n: int, log2_block: int, blocks_at: int, packed_at: int, packed_bytes: int, dtype: Any
    ) -> None:
        self._layout = (buf, log2_block, blocks_at, packed_at, packed_bytes)
        self.n, self.dtype, self.log2_block = n, np.dtype(dtype), log2_block
        blocks = -(-n >> log2_block) if n else 0  # ceil(n / block)
        self.headers = np.frombuffer(buf, dtype="<u8", count=2 * blocks, offset=blocks_at).reshape(blocks, 2)
        self.packed = np.frombuffer(buf, dtype=np.uint8, count=packed_bytes, offset=packed_at)
        self.nbytes = self.headers.nbytes + packed_bytes  # bytes of the encoding (what is mapped)
        self.numpy_view = NumpyView(self.headers, self.packed, n, log2_block)
        native = NATIVE
        self.data: Any = (
            self.numpy_view
            if native is None
            else native.PackedView(buf, n, log2_block, blocks_at, packed_at, packed_bytes)
        )

    def __len__(self) -> int:
        return self.n

    @property
    def shape(self) -> tuple[int]:
        return (self.n,)

    def decode(self, lo: int = 0, hi: int | None = None) -> np.ndarray:
        """Offsets ``lo..hi-1`` as a numpy array of :attr:`dtype` (one pass per block)."""
        hi = self.n if hi is None else hi
        out = np.empty(max(0, hi - lo), dtype=np.uint64)
        self.data.decode(lo, hi, out)
        return out if self.dtype == np.uint64 else out.astype(self.dtype)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            return self.data[int(key)]
        if isinstance(key, slice):
            lo, hi, step = key.indices(self.n)
            if step == 1:
                return self.decode(lo, max(lo, hi))
            return self.decode()[key] if step < 0 else self.decode(lo, max(lo, hi))[::step]
        idx = np.asarray(key)
        if idx.dtype == bool:
            return self.decode()[idx]
        flat = np.ascontiguousarray(idx, dtype=np.int64).ravel()
        out = np.empty(len(flat), dtype=np.uint64)
        self.data.gather(flat, out)
        return out.astype(self.dtype, copy=False).reshape(idx.shape)

    def astype(self, dtype: Any, copy: bool = True) -> np.ndarray:
        return self.decode().astype(dtype, copy=False)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self.decode()
        return out if dtype is None else out.astype(dtype, copy=False)

    def tolist(self) -> list[int]:
        return self.decode().tolist()

    def limit(self, n: int) -> PackedOffsets:
        """The first ``n`` offsets (an index extended in place since this object's records were counted)."""
        buf, log2_block, blocks_at, packed_at, packed_bytes = self._layout
        return PackedOffsets(buf, min(n, self.n), log2_block, blocks_at, packed_at, packed_bytes, self.dtype)

    def crc32(self) -> int:
        """CRC-32 of the offsets as the plain index stores them (little-endian :attr:`dtype`)."""
        crc = 0
        step = 1 << 20
        little = self.dtype.newbyteorder("<")
        for lo in range(0, self.n, step):
            crc = zlib.crc32(self.decode(lo, min(self.n, lo + step)).astype(little).data, crc)
        return crc

    def __reduce__(self) -> tuple[Any, ...]:
        return (np.asarray, (self.decode(),))  # a pickled copy is the plain array (it has no map)

    def __repr__(self) -> str:
        return f"PackedOffsets(records={self.n}, dtype={self.dtype}, block={1 << self.log2_block})"


#: Either kind of offsets an index serves: a plain array, or a compact index's decoder.
Offsets = np.ndarray | PackedOffsets


def prefix_crc32(offsets: Offsets, n: int) -> int:
    """CRC-32 of the first ``n`` offsets of either kind of index (as the plain index stores them).

    Example:
        >>> offsets = np.array([0, 4, 9], np.uint32)
        >>> prefix_crc32(offsets, 2) == zlib.crc32(offsets[:2].tobytes())
        True
    """
    if isinstance(offsets, PackedOffsets):
        return offsets.limit(n).crc32()
    return zlib.crc32(np.ascontiguousarray(offsets[:n]).data.cast("B"))


def write_packed_index(
    index_path: str, offsets: np.ndarray, meta: IndexMeta, *, log2_block: int = DEFAULT_LOG2_BLOCK
) -> str:
    """Write ``offsets`` (strictly increasing) and ``meta`` as one compact index file, atomically.
    Returns ``index_path``. ``meta`` is the plain index's (:func:`~sjsonl.index.store.meta_of`)."""
    write_packed(index_path, offsets, meta, log2_block=log2_block)
    return index_path


def write_packed(
    index_path: str, offsets: np.ndarray, meta: IndexMeta, *, log2_block: int = DEFAULT_LOG2_BLOCK
) -> os.stat_result:
    """:func:`write_packed_index`, returning the file's status as written."""
    headers, packed = encode(np.asarray(offsets), log2_block, NATIVE)
    return write_packed_blocks(index_path, [headers], [packed], len(offsets), log2_block, meta)


def write_packed_blocks(
    index_path: str, headers: list[Any], packed: list[Any], records: int, log2_block: int, meta: IndexMeta
) -> os.stat_result:
    """Write a compact index file from its encoding, atomically: the block ``headers`` and the bit stream
    ``packed``, each in parts (one array, or an extended index's kept blocks or bytes, straight from the
    old file's map, then its new ones). Returns the file's status as written (before it was moved into
    place)."""
    blocks = sum(len(h) for h in headers)
    stream = sum(len(p) for p in packed)
    head = _HEADER.pack(PACKED_MAGIC, PACKED_VERSION, log2_block, records, blocks, stream)
    blob = meta.to_json()
    status: list[os.stat_result] = []

    def write(f: Any) -> None:
        f.write(head.ljust(_HEADER_BYTES, b"\0"))
        for part in headers:
            f.write(np.ascontiguousarray(part, dtype="<u8"))
        for part in packed:
            f.write(np.ascontiguousarray(part, dtype=np.uint8))
        f.write(blob)
        f.write(_TAIL.pack(len(blob), TRAILER_MAGIC))
        f.flush()
        status.append(os.fstat(f.fileno()))

    os.makedirs(os.path.dirname(index_path) or ".", exist_ok=True)
    _atomic_write(index_path, write)
    return status[0]


def open_packed(fd: int, size: int, meta: IndexMeta, trailer_len: int, path: str) -> PackedOffsets:
    """Map a compact index file (its trailer already read): the O(1) checks of its header and sizes."""
    head = os.pread(fd, _HEADER_BYTES, 0)
    if len(head) < _HEADER_BYTES:
        raise _fail(path, "is cut short (no compact index header)")
    magic, version, log2_block, records, blocks, packed_bytes = _HEADER.unpack_from(head)
    if magic != PACKED_MAGIC or version != PACKED_VERSION or head[_HEADER.size :].strip(b"\0"):
        raise _fail(path, f"is a compact index of another format version ({version}), or corrupt")
    if not 1 <= log2_block <= 16 or records != meta.records or blocks != -(-records >> log2_block):
        raise _fail(path, "does not match its metadata (record or block count)")
    if packed_bytes < 8 or size != _HEADER_BYTES + 16 * blocks + packed_bytes + trailer_len:
        raise _fail(path, "has a size that does not match its header and trailer")
    dtype = np.dtype(meta.dtype)  # an unsigned integer type (checked with the trailer)
    mm = map_readonly(fd, size)  # holds no descriptor: fd is closed by the caller
    at = _HEADER_BYTES + 16 * blocks
    return PackedOffsets(mm, records, log2_block, _HEADER_BYTES, at, packed_bytes, dtype)


def verify_packed(offsets: PackedOffsets, meta: IndexMeta, path: str) -> None:
    """The O(records) checks: block headers consistent with each other and the stream, then every offset
    decoded — its CRC-32, strict order (inside a block it follows from min gaps >= 1) and bounds."""
    block = 1 << offsets.log2_block
    n = offsets.n
    info = offsets.headers[:, 1]
    widths = (info >> np.uint64(40)) & np.uint64(63)
    counts = np.minimum(block, n - np.arange(len(info), dtype=np.int64) * block).astype(np.uint64)
    expected = np.concatenate([[0], np.cumsum((counts - np.uint64(1)) * widths, dtype=np.uint64)])
    used = int(expected[-1])
    single = counts == 1  # a block of one record: no residuals, written with width 0 and min gap 1
    if (
        np.any(widths > MAX_WIDTH)
        or np.any(info >> np.uint64(46) < 1)
        or np.any(info[single] >> np.uint64(40) != 1 << 6)
        or not np.array_equal(info & np.uint64((1 << POS_BITS) - 1), expected[:-1].astype(np.uint64))
        or len(offsets.packed) != (used + 7) // 8 + 8
        or np.any(offsets.packed[(used + 7) // 8 :])
        or (used % 8 and int(offsets.packed[used // 8]) >> (used % 8))
    ):
        raise _fail(path, "is corrupt (its block headers and bit stream do not fit together)")
    crc, last = 0, -1
    limit = int(np.iinfo(offsets.dtype).max)
    little = offsets.dtype.newbyteorder("<")
    step = 1 << 20
    try:
        for lo in range(0, n, step):
            chunk = np.empty(min(n, lo + step) - lo, dtype=np.uint64)
            offsets.data.decode(lo, lo + len(chunk), chunk)
            if int(chunk[0]) <= last or not bool(np.all(chunk[1:] > chunk[:-1])):
                raise _fail(path, "is corrupt (offsets do not increase)")
            last = int(chunk[-1])
            if last > limit:
                raise _fail(path, f"is corrupt (an offset does not fit its {offsets.dtype})")
            crc = zlib.crc32(chunk.astype(little).data, crc)
    except ValueError as exc:  # the decoder's own bounds checks
        raise _fail(path, f"is corrupt ({exc})") from None
    if crc != meta.checksum:
        raise _fail(path, "is corrupt (its checksum does not match)")
    if n and meta.stamp.size >= 0 and last >= meta.stamp.size:
        raise _fail(path, "points past the end of its data")
