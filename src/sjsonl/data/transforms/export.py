"""Export: 🤗 ``to_list``, ``to_dict``, ``to_pandas`` and ``iter(batch_size=)`` (batches as dicts of lists).

Example:
    >>> import os, tempfile
    >>> from sjsonl import JSONLDataset
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "w").write('{"a": 1}\\n{"a": 2, "b": "x"}\\n{"a": 3}\\n')
    >>> ds = JSONLDataset(path)
    >>> list(ds.iter(batch_size=2))
    [{'a': [1, 2], 'b': [None, 'x']}, {'a': [3]}]
    >>> ds.to_dict(), ds.to_pandas().shape
    ({'a': [1, 2, 3], 'b': [None, 'x', None]}, (3, 2))
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any

from sjsonl.data.transforms.map import rows_to_batch
from sjsonl.data.transforms.protocol import D
from sjsonl.errors import InvalidArgumentError


def _dicts(rows: list[Any]) -> list[dict]:
    return [r if isinstance(r, dict) else {"value": r} for r in rows]


def batch_of(rows: list[Any]) -> dict[str, list]:
    """Rows as 🤗's batch: a dict of equal-length lists (a row that is not an object is ``{"value": row}``).

    Example:
        >>> batch_of([{"a": 1}, {"b": 2}, 3])
        {'a': [1, None, None], 'b': [None, 2, None], 'value': [None, None, 3]}
    """
    return rows_to_batch(_dicts(rows))


def iter_batches(
    ds: Iterable[Any], batch_size: int, drop_last_batch: bool = False
) -> Iterator[dict[str, list]]:
    """🤗 ``Dataset.iter``: batches of ``batch_size`` rows as dicts of lists, read sequentially."""
    if batch_size < 1:
        raise InvalidArgumentError("batch_size must be at least 1")
    it = iter(ds)
    while True:
        rows = list(islice(it, batch_size))
        if not rows or (drop_last_batch and len(rows) < batch_size):
            return
        yield batch_of(rows)


def to_list(ds: D) -> list[Any]:
    """🤗 ``to_list``: every row, in order (all in memory)."""
    return list(ds)


def to_dict(ds: D) -> dict[str, list]:
    """🤗 ``to_dict``: the columns as lists (all in memory)."""
    return batch_of(list(ds))


def to_pandas(ds: D) -> Any:
    """🤗 ``to_pandas``: a ``pandas.DataFrame`` of every row (needs pandas)."""
    from sjsonl.errors import require

    pd = require("pandas", "hf")
    return pd.DataFrame.from_records(_dicts(list(ds)))
