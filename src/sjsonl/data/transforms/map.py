"""🤗 ``Dataset.map``, lazy: the function runs when records are read, never over the whole file up front.

``map(function, batched=False, batch_size=1000, remove_columns=None, fn_kwargs=None, with_indices=False,
input_columns=None)`` has 🤗's contract: the function gets a row (a dict) — or, with ``batched=True``, a
batch as a dict of lists — and returns a dict whose keys update the row; ``remove_columns`` are dropped
first (a column the function returns is kept). With ``with_indices`` it also gets the row's position in
the dataset ``map`` was called on (also after later views reorder it).

What lazy changes (see the README table):

- A batched function gets the rows requested *together* — a DataLoader batch, ``ds[list]``, or blocks of
  ``batch_size`` in an iteration — so it must compute each output row from its input row alone (tokenizers
  do; padding to the longest row of a batch does not), and return **one row per input row**: a function that
  drops or adds rows (packing) raises a clear error. Use ``filter`` to drop rows.
- The function is checked once on the first row (errors surface at ``map`` time, as in 🤗).
- ``num_proc`` and ``desc`` are accepted for 🤗 scripts; lazily there is no pass to parallelise or to show:
  the work happens where the records are read — in DataLoader workers, which is the parallelism that pays.
  ``keep_in_memory``, ``load_from_cache_file``, ``cache_file_name``, ``writer_batch_size``, ``features``
  are accepted and have nothing to do: nothing is written.

Example:
    >>> import os, tempfile
    >>> from sjsonl import JSONLDataset
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "w").write('{"q": "ab", "n": 1}\\n{"q": "cde", "n": 2}\\n')
    >>> ds = JSONLDataset(path)
    >>> ds.map(lambda b: {"len": [len(q) for q in b["q"]]}, batched=True, remove_columns=["n"])[:]
    [{'q': 'ab', 'len': 2}, {'q': 'cde', 'len': 3}]
    >>> ds.map(lambda r, i: {"i": i}, with_indices=True).shuffle(seed=1)[0]["i"] in (0, 1)
    True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from sjsonl.data.transforms.pipeline import Pipeline
from sjsonl.data.transforms.protocol import D
from sjsonl.errors import ArgumentTypeError, InvalidArgumentError

# 🤗 keywords that concern its eager Arrow writing: accepted, nothing to do for a lazy map.
IGNORED = frozenset(
    {
        "num_proc",
        "desc",
        "keep_in_memory",
        "load_from_cache_file",
        "cache_file_name",
        "writer_batch_size",
        "features",
        "disable_nullable",
        "new_fingerprint",
        "suffix_template",
        "with_rank",
        "drop_last_batch",
        "try_original_type",
    }
)


def rows_to_batch(rows: Sequence[Any]) -> dict[str, list[Any]]:
    """A list of dict rows as 🤗's batch: a dict of equal-length lists (a missing key gives None).

    Example:
        >>> rows_to_batch([{"a": 1}, {"a": 2, "b": 3}])
        {'a': [1, 2], 'b': [None, 3]}
    """
    keys: dict[str, None] = {}
    for r in rows:
        keys.update(dict.fromkeys(r))
    return {k: [r.get(k) for r in rows] for k in keys}


def batch_to_rows(batch: Mapping[str, Any], n: int | None = None) -> list[dict[str, Any]]:
    """🤗's batch (dict of columns) as a list of dict rows; ``n`` checks the row count.

    Example:
        >>> batch_to_rows({"a": [1, 2], "b": ["x", "y"]})
        [{'a': 1, 'b': 'x'}, {'a': 2, 'b': 'y'}]
    """
    cols = {k: batch[k] for k in batch}
    lengths = {k: len(v) for k, v in cols.items()}
    m = next(iter(lengths.values()), n or 0)
    if any(v != m for v in lengths.values()) or (n is not None and cols and m != n):
        raise InvalidArgumentError(
            f"a batched function returned columns of lengths {lengths} for a batch of {n} rows: sjsonl's map "
            "is lazy and needs one output row per input row (use filter() to drop rows)"
        )
    return [{k: v[i] for k, v in cols.items()} for i in range(m)]


class MapStage:
    """One ``map`` call: the function and 🤗's options (see the module docstring).

    ``positions``, when set, turns base indices into positions in the mapped dataset (``with_indices``).
    """

    def __init__(
        self,
        function: Callable[..., Any] | None,
        *,
        batched: bool = False,
        batch_size: int | None = 1000,
        remove_columns: Sequence[str] = (),
        fn_kwargs: Mapping[str, Any] | None = None,
        input_columns: Sequence[str] | None = None,
        positions: np.ndarray | None = None,
        with_indices: bool = False,
    ) -> None:
        self.function = function
        self.batched = batched
        self.batch_size = (
            batch_size if batched and batch_size and batch_size > 0 else (None if batched else 1)
        )
        self.remove = frozenset(remove_columns)
        self.fn_kwargs = dict(fn_kwargs or {})
        self.input_columns = list(input_columns) if input_columns is not None else None
        self.positions = positions
        self.with_indices = with_indices

    def _indices(self, base: np.ndarray | None, n: int) -> list[int]:
        if base is None:
            raise InvalidArgumentError(
                "with_indices needs the rows' positions; read them through the dataset"
            )
        pos = base if self.positions is None else self.positions[base]
        return pos.tolist()

    def _call(self, value: Any, indices: Any) -> Any:
        args = [value] if self.input_columns is None else [value[c] for c in self.input_columns]
        if self.with_indices:
            args.append(indices)
        return self.function(*args, **self.fn_kwargs)  # type: ignore[misc]

    def _merge(self, row: Any, out: Any) -> Any:
        if not isinstance(row, dict):
            return row if out is None else out  # a non-object row is replaced by the function's value
        if out is None:
            out = {}
        elif not isinstance(out, Mapping):
            raise ArgumentTypeError(
                f"map functions must return a dict (or None), got {type(out).__name__}: as in 🤗, the "
                "returned keys update the row"
            )
        kept = {k: v for k, v in row.items() if k not in self.remove} if self.remove else row
        kept.update(out)
        return kept

    def apply(self, rows: list[Any], base: np.ndarray | None) -> list[Any]:
        if self.function is None:
            return [self._merge(r, None) for r in rows]
        if not self.batched:
            idx = self._indices(base, len(rows)) if self.with_indices else [None] * len(rows)
            return [self._merge(r, self._call(r, i)) for r, i in zip(rows, idx)]
        out: list[Any] = []
        size = self.batch_size or max(1, len(rows))
        for lo in range(0, len(rows), size):
            part = rows[lo : lo + size]
            batch_idx = self._indices(base[lo : lo + size], len(part)) if self.with_indices else None  # type: ignore[index]
            result = self._call(rows_to_batch(part), batch_idx)
            if result is None:
                out.extend(self._merge(r, None) for r in part)
                continue
            if not isinstance(result, Mapping):
                raise ArgumentTypeError(
                    f"batched map functions must return a dict of lists, got {type(result).__name__}"
                )
            out.extend(self._merge(r, o) for r, o in zip(part, batch_to_rows(result, len(part))))
        return out


def _positions(ds: D) -> np.ndarray | None:
    """Base index → position in ``ds``, for ``with_indices`` on a view (None: positions are base indices)."""
    if ds._order is None:
        return None
    base = ds._order.take(np.arange(len(ds), dtype=np.int64))
    inverse = np.full(int(ds._bounds[-1]), -1, dtype=np.int64)
    inverse[base] = np.arange(len(ds), dtype=np.int64)
    if len(np.unique(base)) != len(base):
        raise InvalidArgumentError(
            "map(with_indices=True) on a view that repeats records: a record has no single index"
        )
    return inverse


def map_dataset(
    ds: D,
    function: Callable[..., Any] | None = None,
    with_indices: bool = False,
    input_columns: str | Sequence[str] | None = None,
    batched: bool = False,
    batch_size: int | None = 1000,
    remove_columns: str | Sequence[str] | None = None,
    fn_kwargs: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> D:
    """``ds.map(...)``: see the module docstring.

    Example:
        >>> import os, tempfile
        >>> from sjsonl import JSONLDataset
        >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
        >>> _ = open(path, "w").write('{"a": 1}\\n')
        >>> map_dataset(JSONLDataset(path), lambda r, k: {"b": r["a"] + k}, fn_kwargs={"k": 1})[0]
        {'a': 1, 'b': 2}
    """
    unknown = set(kwargs) - IGNORED
    if unknown:
        raise ArgumentTypeError(f"map() got unexpected keyword argument(s) {', '.join(sorted(unknown))}")
    stage = MapStage(
        function,
        batched=batched,
        batch_size=batch_size,
        remove_columns=[remove_columns] if isinstance(remove_columns, str) else list(remove_columns or ()),
        fn_kwargs=fn_kwargs,
        input_columns=[input_columns] if isinstance(input_columns, str) else input_columns,
        positions=_positions(ds) if with_indices else None,
        with_indices=with_indices,
    )
    out = ds._with_pipeline(Pipeline.of(ds._transform).then(stage))
    if len(out):
        out[0]  # fail now, not hours into training, when the function does not fit the rows
    return out
