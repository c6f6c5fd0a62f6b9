"""Output formats: 🤗 ``with_format`` / ``set_format`` and 🤗's **batch** ``with_transform`` /
``set_transform``.

- ``with_format("numpy" | "torch" | "python" | None, columns=None, output_all_columns=False)``: rows come
  out with numeric values (and rectangular lists of them) as numpy arrays / torch tensors; strings and
  other values stay Python. ``format["type"]`` says which.
- ``with_transform(fn, columns=None, output_all_columns=False)`` as in 🤗: ``fn`` gets a **batch** — a dict
  of lists — of the rows requested together (``ds[i]`` is a batch of one; a DataLoader's ``__getitems__``
  its whole batch) and returns a dict of lists, one entry per row. ``format["type"]`` is ``"custom"``.
  For a function of one record, use the ``record_transform=`` argument of
  :class:`~sjsonl.data.dataset.JSONLDataset` or ``map`` (lazy as well).

A format and a transform share one slot, as in 🤗: setting one replaces the other; ``None`` resets.

Example:
    >>> import os, tempfile
    >>> from sjsonl import JSONLDataset
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "w").write('{"q": "ab", "ids": [1, 2]}\\n{"q": "c", "ids": [3, 4]}\\n')
    >>> ds = JSONLDataset(path)
    >>> ds.with_format("numpy")[0]["ids"].dtype, ds.with_format("numpy").format["type"]
    (dtype('int64'), 'numpy')
    >>> upper = ds.with_transform(lambda b: {"q": [q.upper() for q in b["q"]]})
    >>> upper[1], upper.format["type"]
    ({'q': 'C'}, 'custom')
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from sjsonl.data.transforms.map import batch_to_rows, rows_to_batch
from sjsonl.data.transforms.pipeline import Pipeline
from sjsonl.data.transforms.protocol import D
from sjsonl.errors import ArgumentTypeError, InvalidArgumentError

FORMATS = (None, "python", "numpy", "np", "torch", "pt")


def _numeric(v: Any) -> bool:
    if isinstance(v, (bool, int, float)):
        return True
    if isinstance(v, list) and v:
        return _numeric(v[0]) and all(type(x) is type(v[0]) or _numeric(x) for x in v)
    return False


class FormatStage:
    """Convert numeric values of each row to numpy arrays or torch tensors (see the module docstring)."""

    batch_size = 1

    def __init__(self, type: str | None, columns: Sequence[str] | None, output_all_columns: bool) -> None:
        if type not in FORMATS:
            raise InvalidArgumentError(f"format type {type!r} is not supported; use one of {FORMATS}")
        self.type = {"np": "numpy", "pt": "torch"}.get(type, type)  # type: ignore[arg-type]
        self.columns = list(columns) if columns is not None else None
        self.output_all_columns = output_all_columns

    def _convert(self, v: Any) -> Any:
        if self.type in (None, "python") or not _numeric(v):
            return v
        try:
            arr = np.asarray(v)
        except ValueError:  # ragged lists stay lists
            return v
        if arr.dtype == object:
            return v
        if self.type == "numpy":
            return arr
        import torch

        return torch.from_numpy(arr) if arr.ndim else torch.tensor(v)

    def apply(self, rows: list[Any], base: np.ndarray | None) -> list[Any]:
        cols, out = self.columns, []
        for r in rows:
            if type(r) is not dict:
                out.append(self._convert(r))
                continue
            keep = r if cols is None else {k: r.get(k) for k in cols}
            new = {k: self._convert(v) for k, v in keep.items()}
            if cols is not None and self.output_all_columns:
                new = {**r, **new}
            out.append(new)
        return out

    def describe(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "format_kwargs": {},
            "columns": self.columns,
            "output_all_columns": self.output_all_columns,
        }


class BatchTransform:
    """🤗's ``set_transform``: ``fn(batch: dict of lists) -> dict of lists`` over the rows read together."""

    batch_size = 0  # the rows requested together, however many

    def __init__(
        self, fn: Callable[[dict], Any], columns: Sequence[str] | None, output_all_columns: bool
    ) -> None:
        self.fn = fn
        self.columns = list(columns) if columns is not None else None
        self.output_all_columns = output_all_columns

    def apply(self, rows: list[Any], base: np.ndarray | None) -> list[Any]:
        if not rows:
            return rows
        dicts = [r if type(r) is dict else {"value": r} for r in rows]
        batch = rows_to_batch(dicts)
        if self.columns is not None:
            batch = {k: batch.get(k, [None] * len(rows)) for k in self.columns}
        out = self.fn(batch)
        result = batch_to_rows(out, len(rows))
        if self.columns is not None and self.output_all_columns:
            result = [
                {**{k: v for k, v in d.items() if k not in self.columns}, **o} for d, o in zip(dicts, result)
            ]
        return result

    def describe(self) -> dict[str, Any]:
        return {
            "type": "custom",
            "format_kwargs": {"transform": self.fn},
            "columns": self.columns,
            "output_all_columns": self.output_all_columns,
        }


def with_format(
    ds: D,
    type: str | None = None,
    columns: Sequence[str] | None = None,
    output_all_columns: bool = False,
    **format_kwargs: Any,
) -> D:
    """🤗 ``with_format`` (a view). ``format_kwargs`` (e.g. a dtype) are not supported and raise."""
    if format_kwargs:
        raise ArgumentTypeError(f"with_format() does not take {sorted(format_kwargs)} in sjsonl")
    pipe = Pipeline.of(ds._transform)
    stage = (
        None
        if type in (None, "python") and columns is None
        else FormatStage(type, columns, output_all_columns)
    )
    return ds._with_pipeline(pipe.with_output(stage))


def with_transform(
    ds: D,
    transform: Callable[[dict], Any] | None,
    columns: Sequence[str] | None = None,
    output_all_columns: bool = False,
) -> D:
    """🤗 ``with_transform`` (a view): ``transform`` takes a batch (see the module docstring)."""
    stage = None if transform is None else BatchTransform(transform, columns, output_all_columns)
    return ds._with_pipeline(Pipeline.of(ds._transform).with_output(stage))


def describe(ds: D) -> dict[str, Any]:
    """🤗 ``format``: ``{"type", "format_kwargs", "columns", "output_all_columns"}`` (type None: Python)."""
    out = Pipeline.of(ds._transform).output
    if out is None:
        return {"type": None, "format_kwargs": {}, "columns": None, "output_all_columns": False}
    return out.describe()
