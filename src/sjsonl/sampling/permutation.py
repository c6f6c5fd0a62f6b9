"""An exact pseudo-random permutation of ``[0, n)`` in O(1) memory: a keyed Feistel network + cycle walking.

``Permutation(n, seed, epoch)[i]`` is the index visited at position ``i``. Nothing of size ``n`` is ever
stored: each position is *encrypted* with a small block cipher whose block is the smallest power of two
``2**w >= n``; outputs that land in ``[n, 2**w)`` are encrypted again ("cycle walking") until they fall in
range. A cipher is a bijection of ``[0, 2**w)``, so cycle walking restricted to ``[0, n)`` is a bijection of
``[0, n)`` — exact for every ``n``, including ``n = 2**k + 1`` (the width is sized so that ``2**w >= n``,
i.e. from the *count*, not from the largest index ``n - 1``, which loses a bit exactly at ``2**k + 1``).

The cipher is an alternating unbalanced Feistel network: the ``w`` bits are split into a high part of
``w // 2`` and a low part of ``w - w // 2`` bits; each round XORs a keyed multiply-shift hash of one part
(the top bits of ``(part ^ key) * odd_multiplier`` mod 2**64, which depend on every bit of the part) into
the other, and the parts swap roles. Odd widths need no padding to an even width, so the domain stays
below ``2 n`` (on average fewer than two encryptions per position), and a round is four vectorised numpy
operations.

Round keys come from BLAKE2b of ``(n, seed, epoch)``, so the order is the same in every process and
Python version (no ``hash()``), and different ``(seed, epoch)`` pairs give unrelated orders.

Example:
    >>> p = Permutation(10, seed=0, epoch=0)
    >>> sorted(p) == list(range(10))
    True
    >>> p[3] == int(p.take(np.array([3]))[0])
    True
    >>> len(Permutation(2**20 + 1)), Permutation(5, seed=1).take(np.arange(5)).dtype
    (1048577, dtype('int64'))
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import numpy as np

from sjsonl.errors import ArgumentTypeError, InvalidArgumentError, RecordIndexError

_ROUNDS = 8
_M64 = (1 << 64) - 1
_TAKE_CHUNK = 1 << 20  # positions encrypted per numpy pass in take(): bounds the temporaries (~8 MB each)


def _width(n: int) -> int:
    """Smallest ``w >= 1`` with ``2**w >= n`` — the condition is on the count ``n`` itself."""
    w = max(1, (n - 1).bit_length())
    assert (1 << w) >= n
    return w


def _round_keys(n: int, seed: int, epoch: int) -> tuple[list[int], list[int]]:
    """Per-round XOR keys and odd multipliers, from BLAKE2b of ``(n, seed, epoch)``."""
    material = f"sjsonl.Permutation/v2/n={n}/seed={int(seed)}/epoch={int(epoch)}".encode()
    digest = hashlib.blake2b(material, digest_size=16 * _ROUNDS // 2).digest()
    digest += hashlib.blake2b(material + b"/2", digest_size=16 * _ROUNDS // 2).digest()
    words = [int.from_bytes(digest[8 * i : 8 * i + 8], "little") for i in range(2 * _ROUNDS)]
    return words[:_ROUNDS], [w | 1 for w in words[_ROUNDS:]]


def checked_position(i: int, n: int, what: str) -> int:
    """``i`` as a position in ``[0, n)`` (negatives count from the end), else a RecordIndexError.

    Example:
        >>> checked_position(-1, 5, "an order")
        4
    """
    i = int(i)
    if i < 0:
        i += n
    if not 0 <= i < n:
        raise RecordIndexError(f"position {i} out of range for {what} of {n}")
    return i


def check_positions(pos: np.ndarray, n: int, what: str) -> None:
    """Raise unless every one of the (non-empty) integer ``pos`` lies in ``[0, n)``."""
    if pos.dtype.kind not in "iu":
        raise ArgumentTypeError(f"positions must be integers, got {pos.dtype}")
    lo, hi = int(pos.min()), int(pos.max())
    if lo < 0 or hi >= n:
        raise RecordIndexError(f"position {lo if lo < 0 else hi} out of range for {what} of {n}")


class Permutation:
    """A keyed bijection of ``[0, n)``: position ``i`` → index ``p[i]``, in O(1) memory.

    Args:
        n: size of the domain (any ``n >= 0``).
        seed, epoch: together select the order; the same pair gives the same order everywhere.

    Satisfies the :class:`~sjsonl.sampling.maps.IndexMap` protocol: ``len(p)``, ``p[i]`` (a Python int)
    and ``p.take(positions)`` (vectorised, int64 out). Pickles as its three arguments.

    Example:
        >>> p = Permutation(6, seed=42, epoch=1)
        >>> order = p.take(np.arange(6)).tolist()
        >>> sorted(order), order == [p[i] for i in range(6)]
        ([0, 1, 2, 3, 4, 5], True)
        >>> Permutation(6, seed=42, epoch=2).take(np.arange(6)).tolist() != order
        True
    """

    def __init__(self, n: int, seed: int = 0, epoch: int = 0) -> None:
        n = int(n)
        if n < 0:
            raise InvalidArgumentError(f"a permutation needs n >= 0, got {n}")
        if n >= 1 << 62:
            raise InvalidArgumentError("n must be below 2**62")
        self.n, self.seed, self.epoch = n, int(seed), int(epoch)
        self._w = _width(n)
        self._hi = self._w // 2  # width of the high part before the first round (may be 0 when w == 1)
        self._keys, self._mults = _round_keys(n, self.seed, self.epoch)
        self._ukeys = [np.uint64(k) for k in self._keys]
        self._umults = [np.uint64(m) for m in self._mults]

    # ----------------------------------------------------------------- protocol
    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        i = checked_position(i, self.n, "a permutation")
        x = self._encrypt_int(i)
        while x >= self.n:
            x = self._encrypt_int(x)
        return x

    def take(self, positions: np.ndarray) -> np.ndarray:
        """Indices at many positions at once (numpy in, int64 out); cycle walking re-encrypts only the
        lanes still out of range."""
        pos = np.asarray(positions)
        if pos.size == 0:
            return np.zeros(pos.shape, dtype=np.int64)
        check_positions(pos, self.n, "a permutation")
        flat = pos.reshape(-1)
        out = np.empty(flat.shape, dtype=np.int64)
        for a in range(0, flat.size, _TAKE_CHUNK):
            out[a : a + _TAKE_CHUNK] = self._take_in_range(flat[a : a + _TAKE_CHUNK])
        return out.reshape(pos.shape)

    def __iter__(self) -> Iterator[int]:
        for a in range(0, self.n, 8192):
            yield from self.take(np.arange(a, min(self.n, a + 8192), dtype=np.int64)).tolist()

    def __reduce__(self):
        return (type(self), (self.n, self.seed, self.epoch))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Permutation):
            return NotImplemented
        return (self.n, self.seed, self.epoch) == (other.n, other.seed, other.epoch)

    def __hash__(self) -> int:
        return hash((Permutation, self.n, self.seed, self.epoch))

    def __repr__(self) -> str:
        return f"Permutation(n={self.n}, seed={self.seed}, epoch={self.epoch})"

    # ----------------------------------------------------------------- the cipher
    def _take_in_range(self, pos: np.ndarray) -> np.ndarray:
        y = self._encrypt(pos.astype(np.uint64))
        n = np.uint64(self.n)
        walking = np.flatnonzero(y >= n)
        # Cycle walking, vectorised: each pass re-encrypts only the lanes that are still >= n. The
        # domain is < 2n, so each pass keeps on average under half the lanes; it ends because every
        # cycle of the cipher that contains an in-range value returns to one.
        while walking.size:
            z = self._encrypt(y[walking])
            y[walking] = z
            walking = walking[z >= n]
        return y.view(np.int64)

    def _encrypt(self, x: np.ndarray) -> np.ndarray:
        """One pass of the cipher over a uint64 array: four numpy operations per round."""
        hw, lw = self._hi, self._w - self._hi
        hi = x >> np.uint64(lw)
        lo = x & np.uint64((1 << lw) - 1)
        f = np.empty_like(x)
        for key, mult in zip(self._ukeys, self._umults):
            # Round: hi ^= top hw bits of (lo ^ key) * mult — a multiply-shift hash, whose top bits depend
            # on every bit of lo. Then the parts swap roles (unbalanced widths alternate).
            if hw:
                np.bitwise_xor(lo, key, out=f)
                np.multiply(f, mult, out=f)
                np.right_shift(f, np.uint64(64 - hw), out=f)
                np.bitwise_xor(hi, f, out=hi)
            hi, lo, hw, lw = lo, hi, lw, hw
        np.left_shift(hi, np.uint64(lw), out=hi)
        return np.bitwise_or(hi, lo, out=hi)

    def _encrypt_int(self, x: int) -> int:
        """The same cipher on one Python int (the scalar path of ``p[i]``; equal to ``_encrypt``)."""
        hw, lw = self._hi, self._w - self._hi
        hi, lo = x >> lw, x & ((1 << lw) - 1)
        for key, mult in zip(self._keys, self._mults):
            if hw:
                hi ^= (((lo ^ key) * mult) & _M64) >> (64 - hw)
            hi, lo, hw, lw = lo, hi, lw, hw
        return (hi << lw) | lo
