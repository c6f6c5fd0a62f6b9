"""Seek points saved beside an index (``<stem>.index.seekpoints``): their format, and the checks that decide
whether a reader may use them.

A gzip file's seek points (indexed_gzip's export: per point a compressed offset, bit, decompressed offset and
the 32 KiB of data before it) and a bzip2 file's block offsets (compressed bit offset → decompressed byte
offset) spare a full decompression per process. They decide which bytes a read returns, so they are held to
the index's rules: a sidecar (:mod:`sjsonl.storage.sidecar`: magic, key, CRC-32, owner and mode), bound to the
data version (its stamp) and to the index it goes with (its CRC-32), and range-checked against the data:

- gzip: the header names this file's compressed and decompressed sizes; points increase in both
  offsets and stay inside them; the table and windows fill the body exactly. With the index's offsets
  (:func:`check_gzip_points` ``line_starts``) every window is also checked against them: each record start
  it covers follows a newline there, and any other newline in it ends a line that only blank lines follow —
  so a point moved to another decompressed offset, or a window edited where lines break, is refused even
  under a recomputed checksum.
- bzip2: bit offsets strictly increase inside the file, and each is where a block or an end-of-stream marker
  starts (its 48-bit magic is read there); decompressed offsets start at 0, grow with every block and end at
  the file's size.

Anything that fails costs speed, never a wrong record: the points are rebuilt as reads go.

Example:
    >>> from sjsonl.storage.base import DataStamp
    >>> seek_key("gzip", DataStamp(10, 1, "ab", stored_size=30), 7)["index"]
    7
"""

from __future__ import annotations

import bisect
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from sjsonl.storage.base import DataStamp
from sjsonl.storage.sidecar import Sidecar, open_sidecar

#: The first bytes of a gzip ``.seekpoints`` file (see :mod:`sjsonl.storage.sidecar`).
GZIP_SEEK_MAGIC = b"SJSONLgz"
#: The first bytes of a bzip2 ``.seekpoints`` file (see :mod:`sjsonl.storage.sidecar`).
BZIP2_SEEK_MAGIC = b"SJSONLbz"
SEEK_VERSION = 1

_GZIDX = struct.Struct("<5sBBQQIII")  # id, version, flags, compressed, decompressed, spacing, window, points
_POINT = np.dtype([("cmp", "<u8"), ("uncmp", "<u8"), ("bits", "u1"), ("data", "u1")])
_WINDOW = 32768
_MAX_POINTS_BYTES = 64 << 20  # plus an eighth of the data: points keep 32 KiB a spacing (1 MiB by default)
_WS = np.zeros(256, bool)
_WS[list(b" \t\r\n\0")] = True  # and NUL: rapidgzip's windows zero the bytes no later data refers to
_BZ_BLOCK, _BZ_END = 0x314159265359, 0x177245385090  # the 48-bit magics of a bzip2 block and stream end


def seek_key(kind: str, stamp: DataStamp, index_checksum: int) -> dict[str, Any]:
    """What a seek-point file is valid for: this kind, the data version and the index (its CRC-32)."""
    return {"kind": kind, "version": SEEK_VERSION, "stamp": stamp.to_dict(), "index": index_checksum}


@dataclass
class SavedPoints:
    """Where a storage's seek points are saved and what they must be valid for (``kind``, the data version
    ``stamp``, the index's CRC-32); ``identity``, once :meth:`verify` checked the file against the index:
    a later :meth:`load` (another process's) takes only that version of the file."""

    path: str
    magic: bytes
    kind: str
    stamp: DataStamp
    index_checksum: int
    identity: tuple[int, ...] | None = None

    def _open(self, check: Callable[[memoryview], Any]) -> Sidecar | None:
        key = seek_key(self.kind, self.stamp, self.index_checksum)
        return open_sidecar(self.path, self.magic, key, check)

    def verify(self, check: Callable[[memoryview], Any]) -> bool:
        """Check the file now (``check`` given what only the caller knows, e.g. the index's offsets)."""
        found = self._open(check)
        self.identity = None if found is None else found.identity
        return found is not None

    def load(self, check: Callable[[memoryview], Any]) -> Any:
        """What ``check`` makes of the saved points, or ``None``."""
        found = self._open(check)
        if found is None or (self.identity is not None and found.identity != self.identity):
            return None  # (replaced since it was verified: a rebuild meanwhile — only speed is lost)
        return found.value


def check_gzip_points(body: memoryview, stored: int, size: int, line_starts: Any = None) -> bytes:
    """The indexed_gzip export in ``body`` (zlib-compressed) when it fits a gzip file of ``stored`` bytes
    decompressing to ``size``, and (given) the record starts ``line_starts`` of its index; else
    ``ValueError`` saying why."""
    inflate = zlib.decompressobj()
    points = inflate.decompress(body, _MAX_POINTS_BYTES + size // 8)
    if inflate.unconsumed_tail or not inflate.eof:
        raise ValueError("its points are too large for the data, or cut short")
    if len(points) < _GZIDX.size:
        raise ValueError("its points have no complete header")
    ident, version, flags, compressed, decompressed, spacing, window, n = _GZIDX.unpack_from(points)
    if ident != b"GZIDX" or version != 1 or flags:
        raise ValueError(f"its points are not in indexed_gzip's format 1 ({ident!r}, {version})")
    if compressed != stored or decompressed != size:
        raise ValueError(f"its points describe {compressed} -> {decompressed} bytes, not {stored} -> {size}")
    if window != _WINDOW or spacing < window or (n < 1 and size):
        raise ValueError(f"its points have an impossible spacing, window or count ({spacing}, {window}, {n})")
    if not n:  # an empty stream (an empty gzip member)
        if len(points) != _GZIDX.size:
            raise ValueError("its points do not fill it exactly")
        return points
    table_end = _GZIDX.size + n * _POINT.itemsize
    if len(points) < table_end:
        raise ValueError("its point table is cut short")
    table = np.frombuffer(points, _POINT, count=n, offset=_GZIDX.size)
    cmp, uncmp = table["cmp"].astype(np.int64), table["uncmp"].astype(np.int64)
    with_data = table["data"] == 1
    if (
        np.any(table["data"] > 1)
        or np.any(table["bits"] > 7)
        or np.any(np.diff(cmp) <= 0)
        or np.any(np.diff(uncmp) < 0)  # (equal across an empty gzip member)
        or uncmp[0] != 0
        or int(cmp[-1]) > stored
        or int(uncmp[-1]) > size
    ):
        raise ValueError("its points are out of order or outside the data")
    if len(points) != table_end + int(with_data.sum()) * window:
        raise ValueError("its windows do not fill it exactly")
    if line_starts is not None:
        windows = np.frombuffer(points, np.uint8, offset=table_end).reshape(-1, window)
        for u, win in zip(uncmp[with_data].tolist(), windows):
            _check_window(win, u, line_starts)
    return points


def _check_window(win: np.ndarray, u: int, starts: Any) -> None:
    """``ValueError`` unless ``win`` (the data before decompressed offset ``u``, unknown bytes zeroed) breaks
    lines where the index says records start."""
    lo = max(0, u - len(win))
    known = win[len(win) - (u - lo) :]  # data[lo:u]
    if isinstance(starts, np.ndarray):
        # (the needles in the index's own dtype: numpy would otherwise cast the whole index to int64 —
        # a copy of it per seek point)
        a, b = np.searchsorted(starts, np.array([lo, u], dtype=starts.dtype), side="right").tolist()
    else:  # a compact index's offsets: a binary search decodes a few
        a, b = bisect.bisect_right(starts, lo), bisect.bisect_right(starts, u)
    ends = np.asarray(starts[a:b], dtype=np.int64) - 1 - lo  # the newline before each record start
    at_ends = known[ends]
    fits = (at_ends == 0x0A) | (at_ends == 0)
    if a == 0 and len(ends):  # the first record may follow a byte-order mark instead
        fits[0] |= at_ends[0] == 0xBF
    if not fits.all():
        raise ValueError(f"the window of its point at {u} does not break lines where the index says")
    newlines = np.flatnonzero(known == 0x0A)
    others = np.setdiff1d(newlines, ends, assume_unique=True)
    if not len(others):
        return
    # each other newline ends a record's line or a blank one, so only whitespace follows it up to the next
    # line break (a known newline, or the newline before a record start)
    breaks = np.union1d(newlines, ends)
    nxt = breaks[np.searchsorted(breaks, others, side="right").clip(max=len(breaks) - 1)]
    nxt = np.where(nxt > others, nxt, len(known))
    text = np.concatenate([[0], np.cumsum(~_WS[known])])
    if np.any(text[nxt] - text[others + 1] > 0):
        raise ValueError(f"the window of its point at {u} breaks lines where the index has none")


def check_bzip2_blocks(
    body: memoryview, stored: int, size: int, read_many: Callable[[list[tuple[int, int]]], list[bytes]]
) -> np.ndarray:
    """The (bit offset, byte offset) pairs in ``body`` when they fit a bzip2 file of ``stored`` bytes
    decompressing to ``size`` (``read_many`` reads byte ranges of it, compressed); else ``ValueError``."""
    if len(body) % 16 or not len(body):
        raise ValueError("its block table is cut short")
    pairs = np.frombuffer(body, "<i8").reshape(-1, 2).astype(np.int64)
    bits, offsets = pairs[:, 0], pairs[:, 1]
    if bits[0] < 32 or np.any(np.diff(bits) <= 0) or int(bits[-1]) + 48 > 8 * stored:
        raise ValueError("its blocks are out of order or outside the file")
    raw = read_many([(b // 8, b // 8 + 7) for b in bits.tolist()])
    # the 48 bits at each bit offset, most significant first (as bzip2 packs them)
    magics = [
        (int.from_bytes(r.ljust(7, b"\0"), "big") >> (8 - b % 8)) & ((1 << 48) - 1)
        for r, b in zip(raw, bits.tolist())
    ]
    ends = np.array([m == _BZ_END for m in magics])
    if not all(m in (_BZ_BLOCK, _BZ_END) for m in magics) or not ends[-1]:
        raise ValueError("its block offsets do not point at bzip2 blocks")
    grows = np.diff(offsets)
    if (
        offsets[0] != 0
        or offsets[-1] != size
        or np.any(grows[~ends[:-1]] <= 0)
        or np.any(grows[ends[:-1]] != 0)
    ):
        raise ValueError("its decompressed offsets do not fit the blocks or the data")
    return pairs
