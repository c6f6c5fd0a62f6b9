"""Balanced record ranges across many files: the read tasks of :mod:`sjsonl.ray` and the partitions of
:mod:`sjsonl.dask`, cut from the record counts the indexes already know — before a byte is read.

The corpus is the files' records one after another (global record numbers ``0 … N-1``); it is cut into
``num_ranges`` contiguous runs whose sizes differ by at most one record (the first ``N % num_ranges`` runs get
one more, as :func:`~sjsonl.sampling.distributed.shard_block` cuts a shard), and each run is then told as the
pieces of files it covers: ``(file, start, stop)`` with ``start``/``stop`` record numbers within that file. A
run may span the end of one file and the start of the next; empty files own no piece.

Example:
    >>> [r.pieces for r in record_ranges([5, 0, 3], 3)]
    [((0, 0, 3),), ((0, 3, 5), (2, 0, 1)), ((2, 1, 3),)]
    >>> [(r.start, r.stop) for r in record_ranges([5, 0, 3], 3)]
    [(0, 3), (3, 6), (6, 8)]
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from sjsonl.errors import InvalidArgumentError
from sjsonl.sampling.distributed import shard_block

__all__ = ["RecordRange", "record_ranges"]


@dataclass(frozen=True)
class RecordRange:
    """Records ``[start, stop)`` of the corpus (global numbers), as ``(file, start, stop)`` pieces.

    Example:
        >>> r = RecordRange(3, 6, ((0, 3, 5), (2, 0, 1)))   # two records of file 0, one of file 2
        >>> len(r), sum(hi - lo for _, lo, hi in r.pieces)
        (3, 3)
    """

    start: int
    stop: int
    pieces: tuple[tuple[int, int, int], ...]

    def __len__(self) -> int:
        return self.stop - self.start


def record_ranges(counts: Sequence[int], num_ranges: int) -> list[RecordRange]:
    """Cut the records of files holding ``counts`` records each into ``num_ranges`` contiguous, balanced
    runs (sizes differ by at most one; fewer runs when there are fewer records, none for none).

    Example:
        >>> [len(r) for r in record_ranges([4, 4, 2], 4)]
        [3, 3, 2, 2]
        >>> record_ranges([2], 5)     # at most one run per record
        [RecordRange(start=0, stop=1, pieces=((0, 0, 1),)), RecordRange(start=1, stop=2, pieces=((0, 1, 2),))]
        >>> record_ranges([0, 0], 3)
        []
    """
    if num_ranges < 1:
        raise InvalidArgumentError(f"num_ranges must be >= 1, got {num_ranges}")
    if any(c < 0 for c in counts):
        raise InvalidArgumentError(f"record counts must be >= 0, got {list(counts)}")
    bounds = [0, *itertools.accumulate(int(c) for c in counts)]
    total = bounds[-1]
    k = min(num_ranges, total)
    out = []
    for i in range(k):
        start, stop = shard_block(total, k, i)
        pieces = []
        f = bisect.bisect_right(bounds, start) - 1  # the file holding record `start`
        at = start
        while at < stop:
            if bounds[f + 1] > at:  # (an empty file has bounds[f] == bounds[f + 1]: no piece)
                end = min(stop, bounds[f + 1])
                pieces.append((f, at - bounds[f], end - bounds[f]))
                at = end
            f += 1
        out.append(RecordRange(start, stop, tuple(pieces)))
    return out
