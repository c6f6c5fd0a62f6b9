"""A block shuffle for slow storage: blocks of consecutive records in an exact random order, records
shuffled within windows of blocks — every read a sequential run of a block, O(1) memory.

``BlockShuffle(n, block_size=B, window=W, seed, epoch)`` cuts ``[0, n)`` into blocks of ``B`` consecutive
records (the last may be shorter), visits the blocks in the order of an exact :class:`Permutation` of the
blocks, and groups the visited blocks ``W`` at a time into *windows*; within a window its ``≤ W·B``
records come out in the order of another exact permutation, keyed by ``(seed, epoch, window)``. A pass
therefore reads ``W`` runs of ``B`` consecutive records per window — a disk or object store sees large
sequential reads — while the order of the records within the window is exactly random. Nothing of size
``n`` is stored: both levels are Feistel permutations, evaluated on demand.

Shuffle quality (``B·W`` records per window). Over the whole pass the blocks are exactly shuffled, so a
record lands anywhere: the mean displacement ``|position - index|`` is ``≈ n/3``, as for an exact shuffle.
What is lost is the independence of *neighbours*: two records adjacent in the file are in the same block
with probability ``(B-1)/B``, and then less than ``B·W`` positions apart (an exact shuffle keeps them that
close with probability ``≈ 2·B·W/n``). Measured for ``n = 10⁶`` by ``benchmarks/bench_cold.py``::

    order              mean |displ.|/n  P(neighbours ≤ B·W apart)  P(≤ 1024 apart)  256-record stretches
                                                                                      per batch of 32
    exact shuffle      0.333            0.032 (B·W = 16384)        0.002            31.9
    B=256,  W=64       0.332            0.996                      0.122            25.4
    B=64,   W=16       0.334            0.984 (B·W = 1024)         0.984            14.0
    B=1024, W=64       0.338            0.999 (B·W = 65536)        0.033            30.2

The last column is how many different 256-record stretches of the file a batch of 32 consecutive
positions draws from (32 means unrelated records). A batch draws from at most ``W`` blocks, so make ``W``
well above the batch size and ``B·W`` as large as the window's reads may be; the defaults of
:meth:`~sjsonl.data.views.Views.block_shuffle` are ``B=256, W=64``. For data on a local disk or in the page
cache use the exact :meth:`~sjsonl.data.views.Views.shuffle`: it costs nothing extra there.

Example:
    >>> s = BlockShuffle(10, block_size=3, window=2, seed=0)
    >>> order = s.take(np.arange(10)).tolist()
    >>> sorted(order) == list(range(10)), order == [s[i] for i in range(10)]
    (True, True)
"""

from __future__ import annotations

import hashlib

import numpy as np

from sjsonl.errors import InvalidArgumentError
from sjsonl.sampling.permutation import Permutation, check_positions, checked_position

_SCAN = 1 << 20  # blocks whose slots are computed per numpy pass when locating the short block


def _window_seed(seed: int, epoch: int, window: int) -> int:
    """A 62-bit seed for one window's permutation, from BLAKE2b (the same in every process)."""
    material = f"sjsonl.BlockShuffle/v1/seed={seed}/epoch={epoch}/window={window}".encode()
    return int.from_bytes(hashlib.blake2b(material, digest_size=8).digest(), "little") >> 2


class BlockShuffle:
    """Position ``i`` → record ``s[i]``: blocks of ``block_size`` records exactly shuffled, then records
    exactly shuffled within windows of ``window`` blocks (see the module docs for its quality).

    Args:
        n: records (any ``n >= 0``).
        block_size: consecutive records per block (``>= 1``); the last block holds ``n % block_size``
            when that is not 0.
        window: blocks per window (``>= 1``); ``window=1`` keeps each block's records in a random order
            of their own, a large ``window`` approaches an exact shuffle.
        seed, epoch: together select the order; the same four numbers give the same order everywhere.

    An :class:`~sjsonl.sampling.maps.IndexMap`: ``len(s)``, ``s[i]`` and ``s.take(positions)``; pickles
    as its arguments. Building it costs one pass over the block order when ``n`` is not a multiple of
    ``block_size`` (to find where the short block goes): about 10 ms per million blocks.

    Example:
        >>> s = BlockShuffle(8, block_size=4, window=1, seed=5)
        >>> order = s.take(np.arange(8)).tolist()
        >>> sorted(order[:4]) in ([0, 1, 2, 3], [4, 5, 6, 7])  # each window is one whole block
        True
    """

    def __init__(self, n: int, block_size: int, window: int = 16, seed: int = 0, epoch: int = 0) -> None:
        for name, value in (("block_size", block_size), ("window", window)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise InvalidArgumentError(f"{name} must be an integer >= 1, got {value!r}")
        n = int(n)
        if n < 0:
            raise InvalidArgumentError(f"a block shuffle needs n >= 0, got {n}")
        self.n, self.block, self.window = n, int(block_size), int(window)
        self.seed, self.epoch = int(seed), int(epoch)
        self._blocks = -(-n // self.block)
        self._order = Permutation(self._blocks, seed=self.seed, epoch=self.epoch)
        # The short last block (n % B records) sits at some slot q of the block order; positions after
        # it are shifted back by the records it lacks (d). q = blocks when every block is full.
        self._short = self.block - n % self.block if n % self.block else 0
        self._q = self._slot_of(self._blocks - 1) if self._short else self._blocks
        self._span = self.block * self.window  # positions per window (one window holds d fewer)
        self._cache: tuple[int, Permutation] | None = None

    def _slot_of(self, block: int) -> int:
        for lo in range(0, self._blocks, _SCAN):
            slots = self._order.take(np.arange(lo, min(self._blocks, lo + _SCAN), dtype=np.int64))
            hit = np.flatnonzero(slots == block)
            if hit.size:
                return lo + int(hit[0])
        raise AssertionError("a permutation visits every block")  # pragma: no cover

    # ----------------------------------------------------------------- protocol
    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        i = checked_position(i, self.n, "a block shuffle")
        return int(self.take(np.array([i], dtype=np.int64))[0])

    def take(self, positions: np.ndarray) -> np.ndarray:
        """Records at many positions at once (numpy in, int64 out): one permutation pass per window the
        positions touch, one for the block order."""
        pos = np.asarray(positions)
        if pos.size == 0:
            return np.zeros(pos.shape, dtype=np.int64)
        check_positions(pos, self.n, "a block shuffle")
        flat = pos.reshape(-1).astype(np.int64)
        return self._records(self._within_windows(flat)).reshape(pos.shape)

    def __reduce__(self):
        return (type(self), (self.n, self.block, self.window, self.seed, self.epoch))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BlockShuffle):
            return NotImplemented
        return self.__reduce__() == other.__reduce__()

    def __hash__(self) -> int:
        return hash(self.__reduce__())

    def __repr__(self) -> str:
        return (
            f"BlockShuffle(n={self.n}, block_size={self.block}, window={self.window}, "
            f"seed={self.seed}, epoch={self.epoch})"
        )

    # ----------------------------------------------------------------- the two levels
    def _padded(self, p: np.ndarray) -> np.ndarray:
        """Positions as if every block were full: those past the short block move up by what it lacks."""
        if not self._short:
            return p
        return p + self._short * (p >= self._q * self.block + (self.block - self._short))

    def _window_bounds(self, w: int) -> tuple[int, int]:
        """First position and length of window ``w``."""
        qw = self._q // self.window
        start = w * self._span - (self._short if self._short and w > qw else 0)
        slots = min(self.window, self._blocks - w * self.window)
        return start, slots * self.block - (self._short if self._short and w == qw else 0)

    def _window_order(self, w: int, length: int) -> Permutation:
        cached = self._cache
        if cached is not None and cached[0] == w:
            return cached[1]
        perm = Permutation(length, seed=_window_seed(self.seed, self.epoch, w))
        self._cache = (w, perm)
        return perm

    def _within_windows(self, p: np.ndarray) -> np.ndarray:
        """Each position replaced by the position its window's permutation sends it to."""
        windows = self._padded(p) // self._span
        out = np.empty_like(p)
        first, last = int(windows.min()), int(windows.max())
        groups: list[tuple[int, slice | np.ndarray]]
        if first == last:  # the common case: a block of iteration inside one window
            groups = [(first, slice(None))]
        else:  # positions grouped by window with one sort, not one scan per window
            order = np.argsort(windows, kind="stable")
            ws, cuts = np.unique(windows[order], return_index=True)
            groups = [(int(w), at) for w, at in zip(ws, np.split(order, cuts[1:]))]
        for w, at in groups:
            start, length = self._window_bounds(w)
            out[at] = start + self._window_order(w, length).take(p[at] - start)
        return out

    def _records(self, p: np.ndarray) -> np.ndarray:
        """Window-level positions → records: slot of the block order, then the block's record."""
        u = self._padded(p)
        slot, within = np.divmod(u, self.block)
        return self._order.take(slot) * self.block + within
