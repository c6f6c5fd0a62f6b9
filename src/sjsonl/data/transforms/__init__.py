"""Transformations of a :class:`~sjsonl.data.dataset.JSONLDataset`, one concept per module (as Grain's
``transformations/``): each returns a new dataset (a view: no copy of the data) and
:class:`~sjsonl.data.dataset.JSONLDataset`'s methods of the same names delegate here in one line.

- :mod:`~sjsonl.data.transforms.pipeline` — the row functions a dataset applies to the records it reads;
- :mod:`~sjsonl.data.transforms.map` — 🤗 ``map``, lazy;
- :mod:`~sjsonl.data.transforms.filter` — 🤗 ``filter``: a sub-index computed once (parallel, cacheable);
- :mod:`~sjsonl.data.transforms.columns` — column names, ``features``, ``ds["col"]``, remove / rename columns;
- :mod:`~sjsonl.data.transforms.format` — ``with_format`` and 🤗's batch ``with_transform``;
- :mod:`~sjsonl.data.transforms.splits` — ``train_test_split`` and :class:`DatasetDict`;
- :mod:`~sjsonl.data.transforms.export` — ``to_list``, ``to_dict``, ``to_pandas``, ``iter(batch_size=)``.

Example:
    >>> import os, tempfile
    >>> from sjsonl import JSONLDataset
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "w").write("".join(f'{{"q": "q{i}", "n": {i}}}\\n' for i in range(6)))
    >>> ds = JSONLDataset(path).filter(lambda r: r["n"] % 2 == 0).map(lambda r: {"n2": r["n"] * 2})
    >>> ds.column_names, ds.to_list()[-1]
    (['q', 'n', 'n2'], {'q': 'q4', 'n': 4, 'n2': 8})
"""

from sjsonl.data.transforms.splits import DatasetDict

__all__ = ["DatasetDict"]
