"""The batches a map-style loader will ask this process for, read ahead.

A DataLoader over a map-style dataset hands each worker one batch of indices at a time, so the worker cannot
see the next ones: over a remote object read by ranges, each batch costs its own round trips when it is asked
for. Yet the order is known. The loader starts its workers before it first draws from the sampler, so each
worker's copy of the sampler (its seed, epoch and pending resume) gives the whole pass; and the loader deals
the batches to its workers in turn, batch ``b`` to worker ``b % W``. So a worker knows which batches will
come to it, and reads them as one stream of windows fetched ahead
(:meth:`~sjsonl.data.dataset.JSONLDataset.iter_position_blocks`), as the iterable does.

Each batch asked for is checked against the prediction. At the first that differs — another sampler, a
persistent worker in a later epoch, a batch sampler that is not the plain one — the process stops
predicting and reads what it is asked for, as without this. :class:`sjsonl.torch.DistributedSampler`
attaches one to the dataset it is made for (``batches_ahead``; another dataset that shares it, a view made
by copying, reads as asked); a dataset consults it only where it pays: one remote object read
by ranges without the chunk cache, no record transform. (With the cache, the cache's filler brings whole
chunks behind the batches' reads, and windows read ahead would crowd its requests out: measured, a first
epoch through 4 workers at 30 ms fell from 6,000 to 3,800–4,600 records/s.)

What it costs, measured at 30 ms per request with 4 workers over the first 8,000 records: the first batch
waits longer (0.85–1.03 s instead of 0.52–0.58 s: the windows ahead share the first requests' time), and the
windows bring the bytes between nearby records (``SJSONL_REMOTE_GAP``; 3.5–5× the bytes) in a third to
half the requests. ``SJSONL_BATCHES_AHEAD=0`` turns it off.

Example:
    >>> import numpy as np
    >>> [b.tolist() for b in mine(iter([np.arange(7)]), batch=2, worker=1, workers=2)]
    [[2, 3], [6]]
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np


def mine(blocks: Iterator[np.ndarray], batch: int, worker: int, workers: int) -> Iterator[np.ndarray]:
    """The batches of ``batch`` positions that worker ``worker`` of ``workers`` is dealt, from a pass given
    as ``blocks`` of positions (the last batch may be short)."""
    pending, b = np.empty(0, dtype=np.int64), 0
    for block in blocks:
        pending = np.concatenate((pending, block)) if len(pending) else np.asarray(block, dtype=np.int64)
        while len(pending) >= batch:
            if b % workers == worker:
                yield pending[:batch]
            pending, b = pending[batch:], b + 1
    if len(pending) and b % workers == worker:
        yield pending


class BatchesAhead:
    """What a dataset asks for each batch (``__getitems__``): the batch's records from a stream read ahead,
    or None (read it as usual). ``blocks()`` gives the loader's pass in blocks of positions, without
    changing the sampler; ``slot()`` is ``(workers, this worker)``."""

    def __init__(
        self, blocks: Callable[[], Iterator[np.ndarray]], slot: Callable[[], tuple[int, int]]
    ) -> None:
        self._blocks, self._slot = blocks, slot
        self._stream: _Stream | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_stream": None}  # (a stream belongs to the process that reads it)

    def __call__(self, ds: Any, indices: Sequence[int]) -> list[Any] | None:
        stream = self._stream
        if stream is None or stream.pid != os.getpid():
            workers, worker = self._slot()
            stream = self._stream = _Stream(ds, self._blocks, len(indices), worker, workers)
        elif stream.ds is not ds:  # a view sharing this (copied with it): its order or decoding may differ
            return None
        return stream.take(indices)


class _Stream:
    """One process's predicted batches, and the records of the same batches read ahead."""

    def __init__(self, ds: Any, blocks: Callable[[], Iterator[np.ndarray]], batch: int, worker: int,
                 workers: int) -> None:  # fmt: skip
        self.ds, self.pid, self.live = ds, os.getpid(), batch > 0
        # one prediction for the check and the reader (tee holds what the reader took ahead of the check)
        self._expected, ahead = itertools.tee(mine(blocks(), batch, worker, workers))
        self._records = ds.iter_position_blocks(ahead)

    def take(self, indices: Sequence[int]) -> list[Any] | None:
        if not self.live:
            return None
        want = next(self._expected, None)
        if want is None or len(want) != len(indices) or not np.array_equal(want, np.asarray(indices)):
            self.live = False  # not the predicted batch: from now on, what is asked for is read as asked
            self._records.close()
            return None
        return list(itertools.islice(self._records, len(want)))
