"""🤗 ``Dataset``'s surface on :class:`~sjsonl.JSONLDataset`: each method is one line, and the work lives
in :mod:`sjsonl.data.transforms`, one module per concept (the details are in their docstrings).

Example:
    >>> import os, tempfile
    >>> from sjsonl import JSONLDataset
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "w").write('{"a": 1, "b": "x"}\\n{"a": 2, "b": "y"}\\n')
    >>> ds = JSONLDataset(path)
    >>> ds.num_rows, ds.column_names, ds.rename_column("a", "n")[1], ds.to_dict()
    (2, ['a', 'b'], {'n': 2, 'b': 'y'}, {'a': [1, 2], 'b': ['x', 'y']})
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from sjsonl.data.transforms import columns as _columns
from sjsonl.data.transforms import export as _export
from sjsonl.data.transforms import format as _format
from sjsonl.data.transforms.filter import filter_dataset
from sjsonl.data.transforms.map import map_dataset
from sjsonl.data.transforms.protocol import D
from sjsonl.data.transforms.splits import DatasetDict, train_test_split


class HFSurface:
    """🤗 ``Dataset``'s properties and methods, mixed into :class:`~sjsonl.JSONLDataset` (``self`` is one:
    typed by the :class:`~sjsonl.data.transforms.protocol.RecordDataset` protocol, whose TypeVar gives the
    caller's own class back).

    Three methods change the dataset in place, as 🤗's do and as their ``set_``/``reset_`` names say:
    ``set_format``, ``set_transform`` and ``reset_format``. Every other method returns a new view and leaves
    the dataset as it was."""

    @property
    def num_rows(self: D) -> int:
        """🤗 ``num_rows``: ``len(ds)``."""
        return self._len

    @property
    def column_names(self: D) -> list[str]:
        """🤗 ``column_names``, from the schema of ALL rows (:mod:`sjsonl.data.transforms.columns`). Not free:
        the first access in any process parses every record once (in ``workers`` processes for large files)
        and caches the schema beside the index, so later accesses and opens read that file instead."""
        return _columns.column_names(self)

    @property
    def features(self: D) -> Any:
        """🤗 ``features`` (``datasets.Features``), from the same schema as ``column_names`` — the same one
        full pass on first access, then the cache beside the index."""
        return _columns.features(self)

    @property
    def format(self: D) -> dict[str, Any]:
        """🤗 ``format``: ``{"type": None | "numpy" | "torch" | "custom", ...}``."""
        return _format.describe(self)

    def map(self: D, function: Callable[..., Any] | None = None, **kwargs: Any) -> D:
        """🤗 ``map``, lazy (:mod:`sjsonl.data.transforms.map`)."""
        return map_dataset(self, function, **kwargs)

    def filter(self: D, function: Callable[..., Any] | None = None, **kwargs: Any) -> D:
        """🤗 ``filter``: a sub-index computed once (:mod:`sjsonl.data.transforms.filter`)."""
        return filter_dataset(self, function, **kwargs)

    def remove_columns(self: D, column_names: str | Sequence[str], **kwargs: Any) -> D:
        """🤗 ``remove_columns`` (a view)."""
        return _columns.remove_columns(self, column_names, **kwargs)

    def rename_column(self: D, original_column_name: str, new_column_name: str, **kwargs: Any) -> D:
        """🤗 ``rename_column`` (a view)."""
        return _columns.rename_columns(self, {original_column_name: new_column_name})

    def rename_columns(self: D, column_mapping: dict[str, str], **kwargs: Any) -> D:
        """🤗 ``rename_columns`` (a view)."""
        return _columns.rename_columns(self, column_mapping)

    def with_format(
        self: D, type: str | None = None, columns: Sequence[str] | None = None, **kwargs: Any
    ) -> D:
        """🤗 ``with_format("numpy" | "torch" | "python")`` (:mod:`sjsonl.data.transforms.format`)."""
        return _format.with_format(self, type, columns, **kwargs)

    def set_format(
        self: D, type: str | None = None, columns: Sequence[str] | None = None, **kwargs: Any
    ) -> None:
        """🤗 ``set_format``: ``with_format`` in place."""
        self.__dict__.update(self.with_format(type, columns, **kwargs).__dict__)

    def reset_format(self: D) -> None:
        """🤗 ``reset_format``: Python objects again (removes a format or transform)."""
        self.set_format(None)

    def with_transform(self: D, transform: Callable[[dict], Any] | None, **kwargs: Any) -> D:
        """🤗 ``with_transform``: ``transform`` takes a BATCH (dict of lists); for a function of one record
        use ``JSONLDataset(..., record_transform=)`` or ``map`` (:mod:`sjsonl.data.transforms.format`)."""
        return _format.with_transform(self, transform, **kwargs)

    def set_transform(self: D, transform: Callable[[dict], Any] | None, **kwargs: Any) -> None:
        """🤗 ``set_transform``: ``with_transform`` in place."""
        self.__dict__.update(self.with_transform(transform, **kwargs).__dict__)

    def train_test_split(self: D, test_size: float | int | None = None, **kwargs: Any) -> DatasetDict:
        """🤗 ``train_test_split``: ``{"train", "test"}`` views (:mod:`sjsonl.data.transforms.splits`)."""
        return train_test_split(self, test_size, **kwargs)

    def iter(self: D, batch_size: int, drop_last_batch: bool = False) -> Iterator[dict[str, list]]:
        """🤗 ``iter``: batches as dicts of lists (:mod:`sjsonl.data.transforms.export`)."""
        return _export.iter_batches(self, batch_size, drop_last_batch)

    def to_list(self: D) -> list[Any]:
        """🤗 ``to_list``: every row."""
        return _export.to_list(self)

    def to_dict(self: D, **kwargs: Any) -> dict[str, list]:
        """🤗 ``to_dict``: the columns as lists."""
        return _export.to_dict(self)

    def to_pandas(self: D, **kwargs: Any) -> Any:
        """🤗 ``to_pandas``: a DataFrame."""
        return _export.to_pandas(self)

    def to_iterable_dataset(self: D, num_shards: int | None = None) -> Any:
        """A real ``datasets.IterableDataset`` backed by this dataset — no Arrow copy — with ``len()``, exact
        shuffles reseeded by ``set_epoch`` and record-level ``shard``
        (:mod:`sjsonl.data.transforms.iterable`)."""
        from sjsonl.data.transforms.iterable import to_iterable_dataset

        return to_iterable_dataset(self, num_shards=num_shards)
