"""Splits: 🤗 ``train_test_split`` (two ``select`` views, the same rows as 🤗 picks for the same seed) and
:class:`DatasetDict`, the ``{split: dataset}`` mapping ``load_dataset`` returns.

Example:
    >>> import os, tempfile
    >>> from sjsonl import JSONLDataset
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "w").write("".join(f'{{"n": {i}}}\\n' for i in range(10)))
    >>> parts = JSONLDataset(path).train_test_split(test_size=0.2, seed=0)
    >>> parts.num_rows, sorted(r["n"] for r in parts["test"])
    ({'train': 8, 'test': 2}, [4, 6])
    >>> parts.map(lambda r: {"m": -r["n"]}).column_names
    {'train': ['n', 'm'], 'test': ['n', 'm']}
"""

from __future__ import annotations

from collections.abc import Callable
from math import ceil, floor
from typing import Any

import numpy as np

from sjsonl.data.transforms.protocol import D
from sjsonl.errors import InvalidArgumentError


class DatasetDict(dict):
    """``{split: dataset}`` with 🤗 ``DatasetDict``'s methods: each applies to every split and returns a new
    :class:`DatasetDict`; properties give ``{split: value}``.

    Example:
        >>> DatasetDict({"train": [1, 2]})["train"]
        [1, 2]
    """

    def _each(self, method: str, *args: Any, **kwargs: Any) -> DatasetDict:
        return DatasetDict({k: getattr(v, method)(*args, **kwargs) for k, v in self.items()})

    def _prop(self, name: str) -> dict[str, Any]:
        return {k: getattr(v, name) for k, v in self.items()}

    @property
    def column_names(self) -> dict[str, list[str]]:
        return self._prop("column_names")

    @property
    def num_rows(self) -> dict[str, int]:
        return self._prop("num_rows")

    @property
    def features(self) -> dict[str, Any]:
        return self._prop("features")

    def map(self, function: Callable | None = None, **kwargs: Any) -> DatasetDict:
        return self._each("map", function, **kwargs)

    def filter(self, function: Callable | None = None, **kwargs: Any) -> DatasetDict:
        kwargs.pop("cache_file_names", None)
        return self._each("filter", function, **kwargs)

    def shuffle(self, seed: int = 0, **kwargs: Any) -> DatasetDict:
        return self._each("shuffle", seed, **kwargs)

    def remove_columns(self, columns: Any) -> DatasetDict:
        return self._each("remove_columns", columns)

    def rename_column(self, original: str, new: str) -> DatasetDict:
        return self._each("rename_column", original, new)

    def rename_columns(self, mapping: dict[str, str]) -> DatasetDict:
        return self._each("rename_columns", mapping)

    def select_columns(self, columns: Any) -> DatasetDict:
        return self._each("select_columns", columns)

    def with_format(self, type: str | None = None, **kwargs: Any) -> DatasetDict:
        return self._each("with_format", type, **kwargs)

    def with_transform(self, transform: Callable | None, **kwargs: Any) -> DatasetDict:
        return self._each("with_transform", transform, **kwargs)

    def set_transform(self, transform: Callable | None, **kwargs: Any) -> None:
        for v in self.values():
            v.set_transform(transform, **kwargs)

    def set_format(self, type: str | None = None, **kwargs: Any) -> None:
        for v in self.values():
            v.set_format(type, **kwargs)


def _sizes(n: int, test_size: float | int | None, train_size: float | int | None) -> tuple[int, int]:
    # 🤗's rules and messages, so that a script gets the same sizes (and errors) as with 🤗.
    if test_size is None and train_size is None:
        test_size = 0.25
    for name, v in (("test_size", test_size), ("train_size", train_size)):
        if (isinstance(v, int) and not 0 < v < n) or (isinstance(v, float) and not 0 < v < 1):
            raise InvalidArgumentError(
                f"{name}={v} should be either positive and smaller than the number of samples {n} "
                "or a float in the (0, 1) range"
            )
    if isinstance(train_size, float) and isinstance(test_size, float) and train_size + test_size > 1:
        raise InvalidArgumentError(
            f"The sum of test_size and train_size = {train_size + test_size}, should be in the (0, 1)"
        )
    n_test = ceil(test_size * n) if isinstance(test_size, float) else test_size
    n_train = floor(train_size * n) if isinstance(train_size, float) else train_size
    if n_train is None:  # train_size is None
        assert n_test is not None  # test_size defaults to 0.25 when both are None
        n_train = n - n_test
    elif n_test is None:  # test_size is None
        n_test = n - n_train
    if n_train + n_test > n:
        raise InvalidArgumentError(
            f"The sum of train_size and test_size = {n_train + n_test}, should be smaller than {n}"
        )
    if not n_train:
        raise InvalidArgumentError(
            f"With n_samples={n}, test_size={test_size} and train_size={train_size}, the train set is empty"
        )
    return int(n_train), int(n_test)


def train_test_split(
    ds: D,
    test_size: float | int | None = None,
    train_size: float | int | None = None,
    shuffle: bool = True,
    stratify_by_column: str | None = None,
    seed: int | None = None,
    generator: np.random.Generator | None = None,
    **_: Any,
) -> DatasetDict:
    """🤗 ``train_test_split``: ``{"train", "test"}`` views. With ``shuffle`` (the default) the rows are
    those 🤗 picks for the same ``seed``/``generator`` (the same numpy permutation; O(n) memory for it).
    ``stratify_by_column`` (🤗: ClassLabel columns only) is not supported."""
    if stratify_by_column is not None:
        raise NotImplementedError("stratify_by_column is not supported by sjsonl's train_test_split")
    n = len(ds)
    if n == 0:
        return DatasetDict({"train": ds, "test": ds})
    n_train, n_test = _sizes(n, test_size, train_size)
    if not shuffle:
        return DatasetDict({"train": ds.take(n_train), "test": ds.skip(n_train).take(n_test)})
    if generator is None:
        generator = np.random.default_rng(seed)
    perm = generator.permutation(n)
    return DatasetDict(
        {"train": ds.select(perm[n_test : n_test + n_train]), "test": ds.select(perm[:n_test])}
    )
