"""Index maps: position in a view → index in the base dataset, without copying records.

Every map has ``len(m)``, ``m[i]`` (a Python int) and ``m.take(positions)`` (vectorised, numpy in and
out). Maps compose: a view of a view is a map over a map. All are picklable and use O(1) memory except
:class:`ArrayMap`, which holds the indices it was given.

Example:
    >>> m = RangeMap(ArrayMap([5, 6, 7, 8]), start=1, stop=4, step=2)
    >>> len(m), m[0], m.take(np.array([0, 1])).tolist()
    (2, 6, [6, 8])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from sjsonl.errors import ArgumentTypeError, InvalidArgumentError


class IndexMap(Protocol):
    def __len__(self) -> int: ...

    def __getitem__(self, i: int) -> int: ...

    def take(self, positions: np.ndarray) -> np.ndarray: ...


class IdentityMap:
    """Positions are indices: ``[0, n)``."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return i

    def take(self, positions: np.ndarray) -> np.ndarray:
        return np.asarray(positions, dtype=np.int64)


class ArrayMap:
    """An explicit list of indices (``select``)."""

    def __init__(self, indices) -> None:
        arr = np.asarray(indices)
        if arr.ndim != 1:
            raise InvalidArgumentError("indices must be one-dimensional")
        if arr.dtype.kind not in "iu" and arr.size:
            raise ArgumentTypeError(f"indices must be integers, got {arr.dtype}")
        self.indices = arr.astype(np.int64, copy=False)

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i: int) -> int:
        return int(self.indices[i])

    def take(self, positions: np.ndarray) -> np.ndarray:
        return self.indices[positions]


class RangeMap:
    """``base[start:stop:step]`` with a positive step (``skip``, ``take``, ``shard``)."""

    def __init__(self, base: IndexMap, start: int, stop: int, step: int = 1) -> None:
        start, stop, step = slice(start, stop, step).indices(len(base))
        if step <= 0:
            raise InvalidArgumentError("step must be positive")
        self.base, self.start, self.step = base, start, step
        self.n = len(range(start, stop, step))

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return self.base[self.start + i * self.step]

    def take(self, positions: np.ndarray) -> np.ndarray:
        return self.base.take(self.start + np.asarray(positions, dtype=np.int64) * self.step)


class ComposedMap:
    """``outer`` positions index into ``inner``'s positions (e.g. a shuffle of a selection)."""

    def __init__(self, inner: IndexMap, outer: IndexMap) -> None:
        # outer may be longer than inner: select() may repeat positions (as 🤗 Dataset.select does);
        # the caller checks that outer's values lie in [0, len(inner)).
        self.inner, self.outer = inner, outer

    def __len__(self) -> int:
        return len(self.outer)

    def __getitem__(self, i: int) -> int:
        return self.inner[self.outer[i]]

    def take(self, positions: np.ndarray) -> np.ndarray:
        return self.inner.take(self.outer.take(positions))


class SkipMap:
    """``[0, n)`` without the sorted indices ``skipped`` (bad lines): position ``p`` → the ``p``-th index
    that is not skipped. O(len(skipped)) memory, a binary search per lookup.

    Example:
        >>> m = SkipMap(6, [1, 4])
        >>> len(m), m[1], m.take(np.arange(4)).tolist()
        (4, 2, [0, 2, 3, 5])
    """

    def __init__(self, n: int, skipped) -> None:
        skipped = np.asarray(skipped, dtype=np.int64)
        if len(skipped) > 1 and not bool(np.all(skipped[1:] > skipped[:-1])):  # (np.unique hashes: slow)
            skipped = np.unique(skipped)
        self.n = n - len(skipped)
        # position p maps past every skipped index s_k with s_k - k <= p
        self._shift = skipped - np.arange(len(skipped), dtype=np.int64)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return i + int(np.searchsorted(self._shift, i, side="right"))

    def take(self, positions: np.ndarray) -> np.ndarray:
        pos = np.asarray(positions, dtype=np.int64)
        return pos + np.searchsorted(self._shift, pos, side="right")


class RangesMap:
    """The half-open ranges ``[a, b)`` one after another: what an epoch has left after a resume
    (:func:`sjsonl.sampling.elastic.shard_rest`). O(number of ranges) memory, a binary search per lookup.

    Example:
        >>> m = RangesMap([(2, 4), (7, 9)])
        >>> len(m), m[2], m.take(np.arange(4)).tolist()
        (4, 7, [2, 3, 7, 8])
    """

    def __init__(self, ranges: Sequence[tuple[int, int]]) -> None:
        kept = [(int(a), int(b)) for a, b in ranges if b > a]
        self.starts = np.array([a for a, _ in kept], dtype=np.int64)
        lengths = np.array([b - a for a, b in kept], dtype=np.int64)
        self.ends = np.cumsum(lengths)  # position where each range ends in the concatenation
        self.n = int(self.ends[-1]) if len(kept) else 0

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return int(self.take(np.array([i], dtype=np.int64))[0])

    def take(self, positions: np.ndarray) -> np.ndarray:
        pos = np.asarray(positions, dtype=np.int64)
        k = np.searchsorted(self.ends, pos, side="right")
        before = np.where(k > 0, self.ends[np.maximum(k - 1, 0)], 0)
        return self.starts[k] + (pos - before)
