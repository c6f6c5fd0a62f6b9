"""The encoding of a compact index: block-wise frame of reference on the gaps between record starts.

Records are grouped in blocks of ``2**log2_block`` (128 by default). Each block has a 16-byte header —
two little-endian uint64: ``base``, the offset of its first record, and ``info``, which packs the bit
position of the block's residuals (bits 0-39), their width ``w`` (bits 40-45) and ``min``, the block's
smallest gap (bits 46-63, capped at 2**18 - 1). Record ``k > 0`` of a block starts at
``base + k * min + r[0] + ... + r[k-1]``, where ``r[j]`` is gap ``j`` minus ``min``, stored in ``w``
bits, least significant bit first, in one bit stream for the whole index (8 zero bytes after it, so a
decoder may always load 8 bytes). Reading one offset is one header load and at most ``block - 1``
fixed-width extractions — no other block is touched, so random access is O(1).

Why this and not Elias–Fano: on the benchmark corpora it is as small or smaller at 128-record blocks
(see ``benchmarks/bench_index_size.py``) and much simpler to decode in C and in numpy; and because
``min >= 1`` gaps are at least one byte, strictly increasing offsets inside a block follow from the
encoding itself (the verifier checks the block boundaries).

This module is the numpy side — the encoder (used always) and a decoder with the same interface as the
compiled ``_packed.PackedView`` (used when the extension was not built, or ``$SJSONL_SCAN=numpy``).

Example:
    >>> from typing import Any

import numpy as np
    >>> offsets = np.array([0, 10, 25, 27, 100], dtype=np.uint32)
    >>> headers, packed = encode(offsets, 1)          # blocks of two records
    >>> view = NumpyView(headers, packed, len(offsets), 1)
    >>> [view[i] for i in range(5)], view.span(4, 120)
    ([0, 10, 25, 27, 100], (100, 120))
"""

from __future__ import annotations

from typing import Any

import numpy as np

POS_BITS = 40  # bit positions up to 2**40: 128 GiB of residuals, some 80 billion records
MAX_WIDTH = 56  # a residual plus its bit shift fits one 8-byte load
MAX_MIN = (1 << 18) - 1
_CHUNK_BLOCKS = 1 << 13  # blocks encoded (or decoded to verify) at a time: bounded temporary memory


def bit_length(values: np.ndarray) -> np.ndarray:
    """Bits needed for each of ``values`` (uint64), vectorised: ``int.bit_length`` of each.

    Example:
        >>> bit_length(np.array([0, 1, 2, 255, 256], dtype=np.uint64)).tolist()
        [0, 1, 2, 8, 9]
    """
    out = np.zeros(values.shape, dtype=np.uint64)
    v = values.astype(np.uint64, copy=True)
    for step in (32, 16, 8, 4, 2, 1):  # binary search on the highest set bit, all values at once
        big = v >= (np.uint64(1) << np.uint64(step))
        out[big] += np.uint64(step)
        v[big] >>= np.uint64(step)
    return out + (v > 0)


def _block_fields(vals: np.ndarray, block: int) -> tuple[np.ndarray, ...]:
    """For the records ``vals`` (a whole number of blocks but the last): per block its base, count,
    min gap, residual width, and the (blocks, block - 1) residuals with their validity mask."""
    m = len(vals)
    nb = -(-m // block)
    padded = np.empty(nb * block, dtype=np.int64)
    padded[:m] = vals
    padded[m:] = vals[-1] if m else 0
    grid = padded.reshape(nb, block)
    gaps = np.diff(grid, axis=1)
    counts = np.minimum(block, m - np.arange(nb, dtype=np.int64) * block)
    valid = np.arange(1, block)[None, :] < counts[:, None]
    if np.any(gaps[valid] <= 0):
        raise ValueError("offsets must strictly increase")
    mins = np.where(valid, gaps, np.iinfo(np.int64).max).min(axis=1)
    mins = np.where(counts > 1, np.minimum(mins, MAX_MIN), 1)
    residuals = np.where(valid, gaps - mins[:, None], 0).astype(np.uint64)
    widths = bit_length(residuals.max(axis=1)) if block > 1 else np.zeros(nb, np.uint64)
    if np.any(widths > MAX_WIDTH):
        raise ValueError("a record is too large for a compact index")
    return grid[:, 0].astype(np.uint64), counts, mins.astype(np.uint64), widths, residuals, valid


def encode(offsets: np.ndarray, log2_block: int, native: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """``(headers, packed)``: the (blocks, 2) uint64 block headers and the residual bit stream (uint8,
    with its 8 bytes of padding) of strictly increasing ``offsets``. Raises ``ValueError`` otherwise.

    ``native``: the compiled module (``_packed``), whose ``plan`` and ``pack`` write the same bytes
    some 30x faster; ``None`` encodes with numpy."""
    block = 1 << log2_block
    n = len(offsets)
    nb = -(-n // block)
    if native is not None:
        offsets = np.ascontiguousarray(offsets)
        if offsets.dtype.kind != "u" or not offsets.dtype.isnative:
            offsets = offsets.astype(np.uint64)
        headers = np.zeros((nb, 2), dtype=np.uint64)
        total = native.plan(offsets, log2_block, headers)
        packed = np.zeros((total + 7) // 8 + 8, dtype=np.uint8)
        native.pack(offsets, log2_block, headers, packed)
        return headers.astype("<u8", copy=False), packed
    if n and int(np.max(offsets)) >= 1 << 63:
        raise ValueError("offsets beyond 2**63")
    firsts = offsets[block::block]  # each block's first offset must exceed the last of the block before
    if not bool(np.all(firsts > offsets[block - 1 :: block][: len(firsts)])):
        raise ValueError("offsets must strictly increase")
    headers = np.zeros((nb, 2), dtype="<u8")
    bits = np.zeros(nb, dtype=np.uint64)
    chunk = _CHUNK_BLOCKS * block
    for lo in range(0, n, chunk):  # pass 1: widths, hence every block's bit position
        base, counts, mins, widths, _r, _v = _block_fields(offsets[lo : lo + chunk], block)
        b0 = lo // block
        headers[b0 : b0 + len(base), 0] = base
        headers[b0 : b0 + len(base), 1] = widths << np.uint64(40) | mins << np.uint64(46)
        bits[b0 : b0 + len(base)] = (counts.astype(np.uint64) - 1) * widths
    starts = np.concatenate([[0], np.cumsum(bits, dtype=np.uint64)]).astype(np.uint64)
    total = int(starts[-1])
    if total >= 1 << POS_BITS:
        raise ValueError("too many records for a compact index")
    headers[:, 1] |= starts[:-1]
    packed = np.zeros((total + 7) // 8 + 8, dtype=np.uint8)
    for lo in range(0, n, chunk):  # pass 2: the residuals, bit by bit of their width, all at once
        _b, _c, _m, widths, residuals, valid = _block_fields(offsets[lo : lo + chunk], block)
        b0 = lo // block
        first = int(starts[b0]) & ~7
        span = int(starts[b0 + len(widths)]) - first
        if span == 0:
            continue
        stream = np.zeros(span, dtype=bool)
        pos = (starts[b0 : b0 + len(widths), None] - np.uint64(first)) + np.arange(
            block - 1, dtype=np.uint64
        )[None, :] * widths[:, None]
        for t in range(int(widths.max())):
            sel = valid & (widths[:, None] > np.uint64(t))
            stream[(pos + np.uint64(t))[sel]] = ((residuals >> np.uint64(t)) & np.uint64(1))[sel].astype(bool)
        chunk_bytes = np.packbits(stream, bitorder="little")
        packed[first // 8 : first // 8 + len(chunk_bytes)] |= chunk_bytes
    return headers, packed


class NumpyView:
    """The numpy decoder, with the interface of the compiled ``_packed.PackedView``: ``view[i]``,
    ``len(view)``, ``span(i, end)``, ``decode(lo, hi, out)`` and ``gather(indices, out)`` (``out`` a
    uint64 array). Slow per record (a block decoded for each), as fast as numpy for ranges."""

    def __init__(self, headers: np.ndarray, packed: np.ndarray, n: int, log2_block: int) -> None:
        self.headers, self.packed, self.n, self.shift = headers, packed, n, log2_block
        self.nbits = (len(packed) - 8) * 8

    def __len__(self) -> int:
        return self.n

    def blocks(self, b0: int, b1: int) -> np.ndarray:
        """Offsets of every record of blocks ``b0..b1-1`` (uint64). Raises ``ValueError`` on a corrupt
        block header (a width over 56 bits, residuals past the end of the stream)."""
        block = 1 << self.shift
        hdr = self.headers[b0:b1]
        info = hdr[:, 1]
        pos = info & np.uint64((1 << POS_BITS) - 1)
        widths = (info >> np.uint64(40)) & np.uint64(63)
        mins = info >> np.uint64(46)
        counts = np.minimum(block, self.n - np.arange(b0, b1, dtype=np.int64) * block)
        if np.any(widths > MAX_WIDTH) or np.any(pos + widths * (counts - 1).astype(np.uint64) > self.nbits):
            raise ValueError("compact index is corrupt (a block header)")
        where = pos[:, None] + np.arange(block - 1, dtype=np.uint64)[None, :] * widths[:, None]
        at = np.minimum(where >> np.uint64(3), np.uint64(len(self.packed) - 8)).astype(np.intp)
        words = self.packed[at[..., None] + np.arange(8)].view("<u8")[..., 0]
        masks = (np.uint64(1) << widths) - np.uint64(1)
        values = (words >> (where & np.uint64(7))) & masks[:, None]
        grid = np.concatenate([hdr[:, :1], values + mins[:, None]], axis=1)
        out = np.cumsum(grid, axis=1, dtype=np.uint64).ravel()
        return out[: min(len(out), self.n - b0 * block)]

    def __getitem__(self, i: int) -> int:
        i = int(i)
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError("record index out of range")
        # one record: the block's first k residuals as one Python int, summed field by field (a few µs;
        # decoding the whole block with numpy costs ~100 µs of call overhead)
        b, k = i >> self.shift, i & ((1 << self.shift) - 1)
        base = int(self.headers[b, 0])
        if k == 0:
            return base
        info = int(self.headers[b, 1])
        pos, width, least = info & ((1 << POS_BITS) - 1), (info >> 40) & 63, info >> 46
        if width > MAX_WIDTH or pos + k * width > self.nbits:
            raise ValueError("compact index is corrupt (a block header)")
        stream = self.packed[pos >> 3 : (pos + k * width + 7) >> 3].tobytes()
        bits = int.from_bytes(stream, "little") >> (pos & 7)
        mask, total = (1 << width) - 1, 0
        for _ in range(k if width else 0):
            total += bits & mask
            bits >>= width
        return base + k * least + total

    def span(self, i: int, end: int) -> tuple[int, int]:
        if not 0 <= i < self.n:
            raise IndexError("record index out of range")
        return self[i], (self[i + 1] if i + 1 < self.n else int(end))

    def decode(self, lo: int, hi: int, out: np.ndarray) -> None:
        if lo < 0 or hi > self.n or lo > hi:
            raise IndexError("range out of bounds")
        if lo == hi:
            return
        b0, b1 = lo >> self.shift, ((hi - 1) >> self.shift) + 1
        skip = lo - (b0 << self.shift)
        out[: hi - lo] = self.blocks(b0, b1)[skip : skip + hi - lo]

    def gather(self, indices: np.ndarray, out: np.ndarray) -> None:
        idx = np.asarray(indices, dtype=np.int64).ravel()
        idx = np.where(idx < 0, idx + self.n, idx)
        if len(idx) and (idx.min() < 0 or idx.max() >= self.n):
            raise IndexError("record index out of range")
        if not len(idx):
            return
        order = np.unique(idx >> self.shift)  # decode each block needed once
        decoded = (
            np.concatenate([self.blocks(int(b), int(b) + 1) for b in order]) if len(order) < 64 else None
        )
        if decoded is None:
            full = np.empty(self.n, dtype=np.uint64)
            self.decode(0, self.n, full)
            out[: len(idx)] = full[idx]
            return
        starts = np.searchsorted(order, idx >> self.shift) << self.shift
        out[: len(idx)] = decoded[starts + (idx & ((1 << self.shift) - 1))]


def encode_appended(
    headers: np.ndarray, packed: np.ndarray, n: int, log2_block: int, more: np.ndarray, native: Any = None
) -> tuple[int, np.ndarray, int, np.ndarray]:
    """The encoding of ``n`` encoded offsets (``headers``, ``packed``) followed by ``more`` (each larger
    than the last), as ``(kept, tail_headers, kept_bytes, tail_packed)``: the first ``kept`` block headers
    stay as they are and ``tail_headers`` follow them; the first ``kept_bytes`` of the bit stream stay as
    they are and ``tail_packed`` follows them — the same bytes as encoding every offset at once, in work
    proportional to ``more``. Only the last block, if it is not full, is encoded again.

    Example:
        >>> offsets = np.array([0, 10, 25, 27, 100, 130, 131], dtype=np.uint64)
        >>> h, p = encode(offsets[:3], 1)
        >>> kept, tail, kept_bytes, tail_packed = encode_appended(h, p, 3, 1, offsets[3:])
        >>> whole = encode(offsets, 1)
        >>> np.array_equal(np.concatenate([h[:kept], tail]), whole[0])
        True
        >>> np.array_equal(np.concatenate([p[:kept_bytes], tail_packed]), whole[1])
        True
    """
    block = 1 << log2_block
    kept = n >> log2_block  # whole blocks, kept
    last = np.empty(n - kept * block, dtype=np.uint64)
    NumpyView(headers, packed, n, log2_block).decode(kept * block, n, last)
    tail = np.concatenate([last, np.asarray(more, dtype=np.uint64)])
    new_headers, new_packed = encode(tail, log2_block, native)
    at = 0  # the bit where the kept blocks' residuals end
    if kept:
        info = int(headers[kept - 1, 1])
        at = (info & ((1 << POS_BITS) - 1)) + (block - 1) * ((info >> 40) & 63)
    used = 0  # bits of the tail's residuals
    if len(new_headers):
        info = int(new_headers[-1, 1])
        used = (info & ((1 << POS_BITS) - 1)) + (len(tail) - 1 - (len(new_headers) - 1) * block) * (
            (info >> 40) & 63
        )
    if at + used >= 1 << POS_BITS:
        raise ValueError("too many records for a compact index")
    new_headers = new_headers.copy()
    new_headers[:, 1] += np.uint64(at)
    byte, shift = at >> 3, at & 7  # the stream's bytes before `byte` are kept
    out = np.zeros((at + used + 7) // 8 + 8 - byte, dtype=np.uint8)
    body = new_packed[: (used + 7) // 8]
    if shift:
        out[0] = packed[byte] & ((1 << shift) - 1)  # the kept blocks' last bits; the rest is re-encoded
        wide = body.astype(np.uint16) << np.uint16(shift)
        out[: len(body)] |= (wide & np.uint16(0xFF)).astype(np.uint8)
        out[1 : 1 + len(body)] |= (wide >> np.uint16(8)).astype(np.uint8)
    else:
        out[: len(body)] |= body
    return kept, new_headers, byte, out
