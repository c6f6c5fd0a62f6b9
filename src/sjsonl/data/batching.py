"""Batches as a dataset: ``ds.batch(n)`` — item ``b`` is records ``[b·n, (b+1)·n)`` as a dict of lists.

Like 🤗 ``Dataset.batch``, the result is random-access and has the order-only views (``shuffle`` shuffles
whole batches, ``shard`` splits them across ranks), so a framework-free loop can read, shuffle and
resume batches exactly as it would records. Each batch is one vectorised read of its records.

Example:
    >>> import os, tempfile
    >>> from sjsonl import JSONLDataset
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "w").write("".join(f'{{"i": {i}}}\\n' for i in range(5)))
    >>> batches = JSONLDataset(path).batch(2)
    >>> len(batches), batches[-1], [b["i"] for b in batches.shuffle(seed=3)]
    (3, {'i': [4]}, [[4], [0, 1], [2, 3]])
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from sjsonl.data.transforms.export import batch_of
from sjsonl.data.views import Views, positions_of
from sjsonl.errors import InvalidArgumentError, out_of_range
from sjsonl.sampling.maps import IndexMap


class BatchedDataset(Views):
    """Consecutive records of ``dataset`` (any sjsonl dataset or view) grouped ``batch_size`` at a time.

    Args:
        dataset: the records.
        batch_size: records per batch (the last batch may be shorter).
        drop_last_batch: leave out a last batch shorter than ``batch_size``.
    """

    def __init__(self, dataset: Any, batch_size: int, drop_last_batch: bool = False) -> None:
        if int(batch_size) < 1:
            raise InvalidArgumentError(f"batch_size must be at least 1, got {batch_size}")
        self.dataset, self.batch_size, self.drop_last_batch = dataset, int(batch_size), bool(drop_last_batch)
        n = len(dataset)
        self._len = n // self.batch_size if drop_last_batch else -(-n // self.batch_size)
        self._order: IndexMap | None = None

    def __repr__(self) -> str:
        return f"BatchedDataset({self.dataset!r}, batch_size={self.batch_size}, batches={self._len})"

    def __getitem__(self, b: int | np.integer | slice | Sequence[int] | np.ndarray) -> Any:
        """Batch ``b`` as a dict of lists; slices and integer lists give lists of batches."""
        if isinstance(b, bool) or not isinstance(b, (int, np.integer)):
            return [self[int(i)] for i in positions_of(b, self._len)]  # type: ignore[arg-type]
        i = int(b) + (self._len if b < 0 else 0)
        if not 0 <= i < self._len:
            raise out_of_range(int(b), self._len, "this batched dataset", "batch")
        if self._order is not None:
            i = self._order[i]
        lo = i * self.batch_size
        return batch_of(self.dataset[lo : lo + self.batch_size])

    def __iter__(self) -> Iterator[dict[str, list]]:
        return (self[b] for b in range(self._len))
